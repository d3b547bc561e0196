"""Run state on disk: every owned object is journaled *before* it is created.

A run lives in ``<root>/<run id>/``: ``journal.jsonl`` (append-only, fsynced,
one owned resource per line), ``meta.json`` (status, testbed, backend) and
per-host working directories. Teardown and ``cleanup`` work from this alone,
so they also work after the builder was killed with SIGKILL mid-build.

A run directory appears complete (with its meta.json) and already locked: the
process that builds or tears a run down holds ``flock`` on the directory, so a
concurrent ``cleanup`` leaves that run alone instead of racing it; the kernel
drops the lock when that process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench import signals
from vnetbench.errors import RunNotFoundError, VnetbenchError
from vnetbench.inputs import excerpt

RUN_ID_RE = re.compile(r"^[0-9a-f]{6}\Z")
DEFAULT_ROOT = "/run/vnetbench"
#: set by a command that runs others (compare runs Rally): every run they create is marked
#: with it (meta "owner"), so the command can unwind exactly its own runs when interrupted
OWNER_ENV = "VNETBENCH_OWNER"
_HELD: dict[str, int] = {}       # run dir -> fd whose flock this process holds


class RunBusyError(VnetbenchError):
    """Another live process holds the run's lock (it is being built or torn down)."""


def state_root() -> Path:
    """$VNETBENCH_STATE_DIR (default /run/vnetbench), checked before anything uses it."""
    text = os.environ.get("VNETBENCH_STATE_DIR") or DEFAULT_ROOT
    problem = None
    if not text.isprintable():
        problem = "holds a control character"
    elif not os.path.isabs(text):
        problem = "is not an absolute path"
    elif len(text) > 200:
        problem = "is longer than 200 characters"
    elif os.path.exists(text) and not os.path.isdir(text):
        problem = "exists and is not a directory"
    if problem:
        raise VnetbenchError(f"VNETBENCH_STATE_DIR={excerpt(text)} {problem}; point it at a "
                             f"directory (unset, it is {DEFAULT_ROOT})")
    return Path(text)


def new_run_id() -> str:
    root = state_root()
    while True:
        rid = secrets.token_hex(3)
        if not rid.isdigit() and not (root / rid).exists() and not (root / f".{rid}.new").exists():
            return rid


def stale_new_dirs() -> list[Path]:
    """Half-made run directories (creator died before renaming): nothing was built in them."""
    root = state_root()
    if not root.is_dir():
        return []
    return [p for p in root.iterdir() if p.name.startswith(".") and p.name.endswith(".new")
            and RUN_ID_RE.match(p.name[1:-4])]


def journal_append(path: Path, kind: str, /, **data) -> None:
    """Append one resource to the journal at PATH, durable (fsynced) before returning:
    the one journal format of the suite (testbeds, monitors, the all-in-one cloud)."""
    line = json.dumps({"kind": kind, **data}, sort_keys=True) + "\n"
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def journal_entries(path: Path) -> list[dict]:
    """The entries of the journal at PATH in creation order ([] if it does not exist);
    a torn last line (crash) or any line that is not an entry is ignored."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("kind"), str):
            out.append(entry)
    return out


@dataclass(frozen=True)
class Run:
    """Handle on one run's directory."""
    run_id: str
    root: Path

    @property
    def dir(self) -> Path:
        return self.root / self.run_id

    @property
    def journal_path(self) -> Path:
        return self.dir / "journal.jsonl"

    def create(self, **meta) -> None:
        """The run directory with its meta.json, appearing at once and locked by us."""
        tmp = self.root / f".{self.run_id}.new"
        try:
            self.root.mkdir(parents=True, mode=0o755, exist_ok=True)
            tmp.mkdir(mode=0o700)
            fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise VnetbenchError(f"cannot create a run directory in {self.root} ({exc.strerror}); "
                                 "set VNETBENCH_STATE_DIR to a writable directory") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        _HELD[str(self.dir)] = fd
        owner = os.environ.get(OWNER_ENV)
        meta = {**meta, **({"owner": owner} if owner else {}), "updated": time.time()}
        (tmp / "meta.json").write_text(json.dumps(meta, sort_keys=True))
        os.rename(tmp, self.dir)

    @contextlib.contextmanager
    def locked(self):
        """Hold the run's lock (re-entrant in this process); RunBusyError if another
        live process holds it."""
        key = str(self.dir)
        if key in _HELD:
            yield
            return
        try:
            fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise RunNotFoundError(f"run {self.run_id}: its directory {self.dir} is gone") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self.meta().get("builder_pid", "?")
            raise RunBusyError(f"run {self.run_id} is in use by another process (pid {pid}: "
                               "bring-up or teardown); left alone") from None
        _HELD[key] = fd
        try:
            yield
        finally:
            self.unlock()

    def unlock(self) -> None:
        fd = _HELD.pop(str(self.dir), None)
        if fd is not None:
            os.close(fd)

    def remove(self) -> None:
        """Delete the run directory (only once nothing it journals can exist)."""
        shutil.rmtree(self.dir, ignore_errors=True)

    def record(self, kind: str, /, **data) -> None:
        """Append one resource to the journal and make it durable before returning."""
        signals.checkpoint()         # an interrupt stops the build before the next object
        journal_append(self.journal_path, kind, **data)

    def entries(self) -> list[dict]:
        """Journal entries in creation order; a torn last line (crash) is ignored."""
        return journal_entries(self.journal_path)

    def write_meta(self, **updates) -> dict:
        meta = {**self.meta(), **updates, "updated": time.time()}
        tmp = self.dir / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
        os.replace(tmp, self.dir / "meta.json")
        return meta

    def meta(self) -> dict:
        """meta.json, or {} when it is missing or damaged (the run is still cleanable)."""
        try:
            meta = json.loads((self.dir / "meta.json").read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def describe(self) -> str:
        """What is wrong with a run directory that cannot be attached, or ''."""
        meta = self.meta()
        if not meta:
            return "meta.json is missing or damaged (bring-up killed early?)"
        if meta.get("kind", TESTBED) == TESTBED and not isinstance(meta.get("testbed"), dict):
            return "meta.json has no testbed"
        return ""


TESTBED, MONITOR = "testbed", "monitor"
AIO = "aio"        # an all-in-one cloud's registration (vnetbench.aio.registry)
AIO_ROOT = "aio-root"   # the build of an all-in-one cloud's root (vnetbench.aio.rootbuild)
HOW_TO_START = {TESTBED: "vnetbench testbed up FILE", MONITOR: "vnetbench monitor up",
                AIO: "tools/aio/aio up", AIO_ROOT: "python -m vnetbench.aio root build"}


def runs(kind: str | None = None) -> list[Run]:
    """Every run (testbeds, monitors, all-in-one clouds), or those of one kind (meta "kind")."""
    root = state_root()
    if not root.is_dir():
        return []
    found = sorted((Run(p.name, root) for p in root.iterdir()
                    if p.is_dir() and RUN_ID_RE.match(p.name)), key=lambda r: r.run_id)
    return [r for r in found if kind is None or r.meta().get("kind", TESTBED) == kind]


def owned_by(owner: str) -> tuple[list[Run], list[Path]]:
    """The runs created under ``OWNER_ENV=owner``, and its half-made run directories."""
    def mine(meta_path: Path) -> bool:
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return False
        return isinstance(meta, dict) and meta.get("owner") == owner
    return ([r for r in runs() if mine(r.dir / "meta.json")],
            [d for d in stale_new_dirs() if mine(d / "meta.json")])


def find_run(ref: str | None, kind: str | None = TESTBED) -> Run:
    """A run of ``kind`` (any kind if None) by id or name; with no ref, the only one there is."""
    candidates = runs(kind)
    noun, hint = kind or "run", kind or TESTBED      # any kind: point at testbeds
    if ref is None:
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise RunNotFoundError(f"no {noun} is up; start one with '{HOW_TO_START[hint]}'")
        ids = ", ".join(f"{r.run_id} ({r.meta().get('name', '?')})" for r in candidates)
        raise RunNotFoundError(f"several {noun}s are up ({ids}); pick one with --run ID")
    matches = [r for r in candidates if r.run_id == ref or r.meta().get("name") == ref]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFoundError(f"no {noun} has the id or name {excerpt(ref)} under "
                               f"{state_root()}; 'vnetbench {hint} status' lists them")
    raise RunNotFoundError(f"run {ref!r}: the name matches several runs "
                           f"({', '.join(r.run_id for r in matches)}); use the run id")
