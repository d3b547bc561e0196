"""Build an all-in-one cloud's root: debootstrap a Debian suite into a directory, then
apt-get the release file's pinned packages inside it.

Why this shape:
- Owned and journaled like every AIO object: the build is a run of kind ``aio-root`` in
  vnetbench's state root, its journal naming the partial entry (and the marker every
  process of the build carries in its environment) before that entry exists, so
  ``vnetbench cleanup`` after a SIGKILL stops what the build left running (apt-get, dpkg,
  maintainer scripts) and removes the partial root.
- Nothing leaks onto the host's mount table: debootstrap (which mounts /proc and /sys in
  its target) and every chroot run in a private mount namespace of their own
  (``unshare -m``), which goes with their last process. The root is bind-mounted onto
  itself first, so tools that remount "/" inside (``ip netns exec``) work in it.
- No service starts inside the root during the install: ``/usr/sbin/policy-rc.d`` exits
  101 (it stays: the cloud starts its daemons itself).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from vnetbench import outfiles, signals
from vnetbench.aio import procs, rootcache
from vnetbench.aio.release import RELEASES, Release, mirror_of
from vnetbench.errors import VnetbenchError
from vnetbench.state import AIO_ROOT, Run, new_run_id, state_root

JOURNAL_KIND = "aio_root"
PROGRESS_EVERY_S = 10.0
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The root's /dev: a tmpfs of its own with fresh nodes (as debootstrap and mmdebstrap make
# them), never the host's /dev. Maintainer scripts change what they find there: trixie's
# udev applies static-nodes-permissions.conf (/dev/kvm to group kvm, its own gid 993, mode
# 0660); through a bind of the host's /dev that left the qemu user without /dev/kvm while
# QEMU (probed with CAP_DAC_OVERRIDE) still used it, and the host's libvirtd then judged its
# capability cache stale on every lookup, re-probing QEMU for ~50 s per guest started.
# $1: the root; $2: extra nodes, "name:major:minor" words.
PRIVATE_DEV = r"""
private_dev() {
  d=$1/dev
  mount -t tmpfs -o mode=755,size=1m,nosuid vnb-dev "$d"
  for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0 $2; do
    name=${n%%:*} num=${n#*:}
    mkdir -p "$(dirname "$d/$name")"
    mknod -m 666 "$d/$name" c "${num%%:*}" "${num#*:}"
  done
  mkdir "$d/pts" "$d/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620 vnb-pts "$d/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev vnb-shm "$d/shm"
  ln -s pts/ptmx "$d/ptmx"
  ln -s /proc/self/fd "$d/fd"
  ln -s /proc/self/fd/0 "$d/stdin"; ln -s /proc/self/fd/1 "$d/stdout"; ln -s /proc/self/fd/2 "$d/stderr"
}
"""
# run a command chrooted into $1 with /proc, /sys and a private /dev, in the caller's
# (private) mount namespace; the root is a mount point of its own first (ip netns exec
# remounts "/")
IN_ROOT = ('set -eu;' + PRIVATE_DEV + 'r=$1; shift; mount --bind "$r" "$r"; '
           'mount -t proc proc "$r/proc"; mount -t sysfs sysfs "$r/sys"; private_dev "$r" ""; '
           'exec chroot "$r" "$@"')
SCRIPTS = Path("/usr/share/debootstrap/scripts")
UNSAFE_IO = Path("etc/dpkg/dpkg.cfg.d/vnetbench-unsafe-io")
POLICY_RC = "#!/bin/sh\n# vnetbench: no service starts from a package's install\nexit 101\n"


def build(release: Release, cache: Path, progress=print) -> tuple[Path, dict]:
    """RELEASE's root in CACHE (built now unless a complete one is cached): its entry
    and its marker."""
    final = rootcache.entry(cache, release)
    marker = rootcache.cached(cache, release)
    if marker is not None:
        progress(f"aio root: {release.name}: cached in {final} ({len(marker['installed'])} packages)")
        return final, marker
    rootcache.check_room(cache, release)
    debootstrap_ready(progress, release.suite)
    run = Run(new_run_id(), state_root())
    run.create(kind=AIO_ROOT, name=f"aio-root-{run.run_id}", status="building",
               builder_pid=os.getpid(), release=release.name, cache=str(cache), created=time.time())
    where = rootcache.partial(cache, release, run.run_id)
    try:
        run.record(JOURNAL_KIND, path=str(where), marker=mark_of(run))
        progress(f"aio root: run {run.run_id} builds {release.name} in {where} ('vnetbench cleanup "
                 f"--run {run.run_id}' removes it after a crash)")
        marker = _build_into(where, release, mark_of(run), progress, log=cache / f"{final.name}.log")
        _publish(where, final)
    except BaseException:
        with signals.deferred():          # a second Ctrl-C does not cut the unwinding short
            left = stop_and_remove(where, mark_of(run))
        if left:
            run.write_meta(status="teardown-failed", errors=left)
        else:
            run.remove()
        raise
    finally:
        run.unlock()
    run.remove()
    progress(f"aio root: {release.name}: built in {final} in {marker['timings']['total']:.0f} s, "
             f"{marker['size_bytes'] / 1e9:.2f} GB, {len(marker['installed'])} packages")
    return final, rootcache.cached(cache, release) or marker


def mark_of(run: Run) -> str:
    return f"aio-root-{run.run_id}"


def debootstrap_ready(progress, suite: str) -> None:
    """debootstrap on the host (installed with apt-get when missing), knowing SUITE."""
    if not shutil.which("debootstrap", path=PATH):
        _install_debootstrap(progress)
    if not (SCRIPTS / suite).exists():
        raise VnetbenchError(f"aio root: this machine's debootstrap does not know {suite} (no "
                             f"{SCRIPTS / suite}); install a newer debootstrap, then retry")


def _install_debootstrap(progress) -> None:
    progress("aio root: installing debootstrap (apt-get install debootstrap)")
    done = subprocess.run(["apt-get", "install", "-y", "-q", "debootstrap"], env=_env(None),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0 or not shutil.which("debootstrap", path=PATH):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise VnetbenchError(f"aio root: apt-get install debootstrap failed ({tail[0][:200]}); "
                             "install debootstrap, then retry")


def _build_into(where: Path, release: Release, mark: str, progress, log: Path) -> dict:
    """The steps, each timed; the marker written last."""
    where.mkdir(parents=True)
    root, mirror, timings, t0 = where / "root", mirror_of(release), {}, time.monotonic()
    outfiles.check_file(log, "--cache")       # the log of the last build, never through a link
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with open(fd, "w") as out:
        steps = Steps(mark, out, progress, f"{RELEASES / release.name}.yaml")
        steps.run("debootstrap", ["unshare", "--mount", "--propagation", "private", "debootstrap",
                                  f"--variant={release.variant}",
                                  f"--components={','.join(release.components)}",
                                  release.suite, str(root), mirror], timings, Debootstrap())
        configure(root, release, mirror)
        steps.run("apt-get update", _in_root(root, "apt-get", "-q", "update"), timings, None)
        steps.run("install", _in_root(root, "apt-get", "install", "-y", "-q", "--no-install-recommends",
                                      "-o", "Dpkg::Use-Pty=0", *release.pins()), timings, Install())
        steps.run("apt-get clean", _in_root(root, "apt-get", "clean"), timings, None)
        installed = steps.installed(root)
    (root / UNSAFE_IO).unlink()
    os.sync()                                  # the root on disk before the marker says so
    missing = rootcache.pins_missing(release, installed)
    if missing:
        raise VnetbenchError(f"aio root: installed at another version: {', '.join(missing[:3])}; "
                             f"fix {RELEASES / release.name}.yaml")
    timings["total"] = round(time.monotonic() - t0, 1)
    return rootcache.write_marker(where, release, installed, mirror=mirror, timings=timings,
                                  size_bytes=rootcache.size_bytes(root))


def configure(root: Path, release: Release, mirror: str) -> None:
    """Before any package: the mirror, no recommends, and no service may start."""
    (root / "etc/apt/sources.list").write_text(
        f"deb {mirror} {release.suite} {' '.join(release.components)}\n")
    (root / "etc/apt/apt.conf.d/99vnetbench").write_text(
        'APT::Install-Recommends "false";\nAcquire::Retries "3";\n')
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text(POLICY_RC)
    policy.chmod(0o755)
    # dpkg fsyncs every file it unpacks (some 80 000 here): a root that does not finish is
    # thrown away anyway, and the finished one is synced once before its marker
    (root / UNSAFE_IO).parent.mkdir(parents=True, exist_ok=True)
    (root / UNSAFE_IO).write_text("force-unsafe-io\n")


def _in_root(root: Path, *argv: str) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_ROOT, "sh", str(root), *argv]


def _env(mark: str | None) -> dict:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8", "PATH": PATH}
    return {**env, procs.MARKER: mark} if mark else env


class Steps:
    """The build's commands: in a session of their own carrying the build's marker, their
    output in the build log, progress lines from it."""

    def __init__(self, mark: str, log, progress, release_file: str):
        self.mark, self.log, self.progress, self.release_file = mark, log, progress, release_file

    def run(self, name: str, argv: list[str], timings: dict, watch) -> None:
        t0 = time.monotonic()
        self.progress(f"aio root: {name} ...")
        tail = self._follow(argv, name, watch, t0)
        timings[name] = round(time.monotonic() - t0, 1)
        if tail is not None:
            hint = (f"; the mirror no longer has that version: set the one 'apt-cache policy' "
                    f"shows in {self.release_file}" if re.search(r"Version '.*' .* was not found", tail)
                    else "")
            raise VnetbenchError(f"aio root: {name} failed: {tail}{hint} (log: {self.log.name})")
        self.progress(f"aio root: {name} done in {timings[name]:.0f} s")

    def _follow(self, argv, name, watch, t0) -> str | None:
        """Run ARGV to its end; None if it succeeded, else its most telling line."""
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=_env(self.mark), start_new_session=True,
                             text=True, errors="replace")
        last_said, lines = time.monotonic(), []
        for line in p.stdout:
            self.log.write(line)
            lines = (lines + [line.rstrip()])[-40:]
            if watch is not None:
                watch.see(line)
                if time.monotonic() - last_said >= PROGRESS_EVERY_S:
                    self.progress(f"aio root: {name}: {watch.say()} ({time.monotonic() - t0:.0f} s)")
                    last_said = time.monotonic()
        self.log.flush()
        if p.wait() == 0:
            return None
        errors = [ln for ln in lines if ln.startswith(("E:", "W: Failure", "dpkg: error"))]
        return ((errors or lines or [f"exit {p.returncode}"])[-1])[:300]

    def installed(self, root: Path) -> dict:
        """Package -> version of what dpkg has installed in ROOT."""
        done = subprocess.run(["chroot", str(root), "dpkg-query", "-W", "-f",
                               "${db:Status-Status}\t${Package}\t${Version}\n"],
                              env=_env(self.mark), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, start_new_session=True)
        if done.returncode != 0:
            raise VnetbenchError(f"aio root: dpkg-query failed: {done.stderr.strip()[:200]}")
        rows = [ln.split("\t") for ln in done.stdout.splitlines()]
        return {r[1]: r[2] for r in rows if len(r) == 3 and r[0] == "installed"}


class Debootstrap:
    """debootstrap's progress: its latest I: line."""

    def __init__(self):
        self.last = "starting"

    def see(self, line: str) -> None:
        if line.startswith("I: "):
            self.last = line[3:].strip()[:80]

    def say(self) -> str:
        return self.last


class Install:
    """apt-get install's progress: packages fetched, unpacked, set up, of the total."""

    def __init__(self):
        self.total, self.counts = None, {"fetched": 0, "unpacked": 0, "set up": 0}

    def see(self, line: str) -> None:
        if m := re.match(r"^\d+ upgraded, (\d+) newly installed", line):
            self.total = int(m.group(1))
        for prefix, what in (("Get:", "fetched"), ("Unpacking ", "unpacked"), ("Setting up ", "set up")):
            if line.startswith(prefix):
                self.counts[what] += 1

    def say(self) -> str:
        of = f"/{self.total}" if self.total else ""
        return ", ".join(f"{n}{of} {what}" for what, n in self.counts.items()) + " packages"


def _publish(where: Path, final: Path) -> None:
    """WHERE renamed to FINAL in one step; if another build finished first, its root stays."""
    try:
        os.rename(where, final)
    except OSError:
        if rootcache.marker_problem(final, _release_of(final)) == "":
            rootcache.remove_tree(where)
            return
        raise


def _release_of(final: Path) -> Release:
    from vnetbench.aio.release import load
    return load(rootcache.ENTRY_RE.match(final.name).group(1))


def build_pids(mark: str, where: Path) -> list[int]:
    """The build's processes: its marker in their environment, or their root inside WHERE
    (a maintainer script that cleared its environment)."""
    pids = set(procs.marked(mark))
    prefix = str(where) + "/"
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if (os.readlink(d / "root") + "/").startswith(prefix):
                    pids.add(int(d.name))
            except OSError:
                continue
    return sorted(pids)


def stop_and_remove(where: Path, mark: str, timeout_s: float = 15.0) -> list[str]:
    """Stop every process of the build (SIGKILL: the root is thrown away), then remove the
    partial entry; what could not be done. Its mount namespaces go with their processes."""
    deadline = time.monotonic() + timeout_s
    while (pids := build_pids(mark, where)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)
    if pids:
        return [f"{where}: build processes {pids[:5]} did not exit"]
    try:
        if where.exists():
            rootcache.remove_tree(where)
    except (OSError, RuntimeError) as exc:
        return [f"{where}: {exc}"]
    return []


def undo_root_build(run: Run, entry: dict) -> None:
    """``vnetbench cleanup``'s step for a journaled root build: its processes stopped, its
    partial entry removed (never anything the journal names outside the cache's pattern)."""
    path, mark = entry.get("path"), entry.get("marker")
    where = Path(path) if isinstance(path, str) and os.path.isabs(path) else None
    m = rootcache.PARTIAL_RE.match(where.name) if where else None
    if not m or m.group(3) != run.run_id or mark != mark_of(run) or ".." in where.parts:
        raise ValueError(f"journal names no partial root of run {run.run_id} ({path!r}); left alone")
    left = stop_and_remove(where, mark)
    if left:
        raise RuntimeError("; ".join(left))
