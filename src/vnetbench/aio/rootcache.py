"""The cache of all-in-one roots: ~/.cache/vnetbench/aio-roots/<release>-<key>/.

Why a marker: a root is only ever taken from the cache when its entry holds
``complete.json``, written last (the packages ``dpkg-query`` reports installed), and the
entry appears under its final name by one rename of a sibling built as
``.<release>-<key>.<run id>.partial``. So an interrupted build is never mistaken for a
complete one; the partial entry is the build's journaled object, removed by its own
unwinding or by ``vnetbench cleanup`` after a crash.

An entry: ``root/`` (the Debian tree), ``complete.json`` (the marker), ``build.log``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

from vnetbench.aio.release import Release
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt

MARKER = "complete.json"
PARTIAL_RE = re.compile(r"^\.([a-z][a-z0-9]{1,19})-([0-9a-f]{12})\.([0-9a-f]{6})\.partial\Z")
ENTRY_RE = re.compile(r"^([a-z][a-z0-9]{1,19})-([0-9a-f]{12})\Z")


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vnetbench" / "aio-roots"


def check_cache(path: Path) -> Path:
    """PATH (--cache) as an absolute directory that is or can be made: one line naming
    the problem otherwise (nothing is created here)."""
    text = str(path)
    if not text.isprintable() or len(text) > 200:
        raise VnetbenchError(f"--cache {excerpt(text)}: not a usable path (control characters or "
                             "over 200 characters); pass a plain directory path")
    path = Path(os.path.abspath(path))
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                what = "is" if p == path else f"lies under {p}, which is"
                raise VnetbenchError(f"--cache {path} {what} not a directory; pass a directory "
                                     f"(default {default_cache()})")
            if not os.access(p, os.W_OK | os.X_OK):
                raise VnetbenchError(f"--cache {path}: {p} is not writable; pass a writable directory")
            return path
    return path


def check_room(cache: Path, release: Release, free=None) -> None:
    """Enough free disk where CACHE is for RELEASE's root (its disk_gb), before starting."""
    base = next(p for p in (cache, *cache.parents) if p.exists())
    free = shutil.disk_usage(base).free if free is None else free
    if free < release.disk_bytes:
        raise VnetbenchError(f"aio root: {base} has {free / 1e9:.1f} GB free, the {release.name} root "
                             f"needs {release.disk_bytes / 1e9:.1f} GB (disk_gb of its release "
                             "file); free some space or pass --cache DIR on a larger disk")


def entry(cache: Path, release: Release) -> Path:
    return cache / f"{release.name}-{release.key}"


def partial(cache: Path, release: Release, run_id: str) -> Path:
    return cache / f".{release.name}-{release.key}.{run_id}.partial"


def write_marker(where: Path, release: Release, installed: dict, **facts) -> dict:
    """The marker of a finished root, durable before the entry is renamed into place."""
    marker = {"release": release.name, "key": release.key, "suite": release.suite,
              "openstack": release.openstack, "installed": installed, "built": time.time(), **facts}
    tmp = where / f"{MARKER}.tmp"
    with open(tmp, "w") as f:
        json.dump(marker, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, where / MARKER)
    return marker


def pins_missing(release: Release, installed: dict) -> list[str]:
    """The pinned packages INSTALLED lacks or has at another version."""
    return [f"{name} {version} (installed: {installed.get(name, 'none')})"
            for name, version in sorted(release.packages.items()) if installed.get(name) != version]


def marker_problem(where: Path, release: Release) -> str:
    """Why the entry WHERE is not a complete root of RELEASE ('' when it is)."""
    try:
        marker = json.loads((where / MARKER).read_text())
    except FileNotFoundError:
        return f"no {MARKER} (an unfinished build)"
    except (OSError, ValueError) as exc:
        return f"{MARKER} is unreadable ({excerpt(str(exc))})"
    if not isinstance(marker, dict) or not isinstance(marker.get("installed"), dict):
        return f"{MARKER} lists no installed packages"
    if (marker.get("release"), marker.get("key")) != (release.name, release.key):
        return (f"{MARKER} is of another release file ({excerpt(str(marker.get('release')))}, "
                f"key {excerpt(str(marker.get('key')))})")
    if not (where / "root" / "usr" / "bin").is_dir():
        return "its root/ is missing"
    missing = pins_missing(release, marker["installed"])
    return f"pinned packages not installed: {', '.join(missing[:3])}" if missing else ""


def cached(cache: Path, release: Release) -> dict | None:
    """The marker of RELEASE's complete root in CACHE, or None."""
    where = entry(cache, release)
    if not where.is_dir() or marker_problem(where, release):
        return None
    return json.loads((where / MARKER).read_text())


def size_bytes(path: Path) -> int:
    """Disk used under PATH (blocks, hard links once), not following symlinks."""
    seen, total = set(), 0
    for d, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(d, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def mounts_under(path: Path) -> list[str]:
    """Mount points of this mount namespace at or under PATH (never removed through)."""
    prefix = str(path).rstrip("/") + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = [ln.split()[4].encode().decode("unicode_escape") for ln in lines if len(ln.split()) > 4]
    return [p for p in points if p == str(path) or p.startswith(prefix)]


def remove_tree(path: Path) -> None:
    """Remove PATH, refusing while anything is mounted in it (rmtree would descend into
    a bind mount of /dev or /proc)."""
    if mounts := mounts_under(path):
        raise RuntimeError(f"{path}: {mounts[0]} is mounted in it; unmount it first")
    shutil.rmtree(path, ignore_errors=False, onerror=_tolerate_gone)


def _tolerate_gone(func, path, exc_info):
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def entries(cache: Path) -> list[tuple[Path, str]]:
    """CACHE's entries, complete and partial, with their kind."""
    if not cache.is_dir():
        return []
    out = []
    for p in sorted(cache.iterdir()):
        if p.is_dir() and not p.is_symlink():
            if ENTRY_RE.match(p.name):
                out.append((p, "complete" if (p / MARKER).is_file() else "damaged"))
            elif PARTIAL_RE.match(p.name):
                out.append((p, "partial"))
    return out
