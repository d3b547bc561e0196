"""Processes: run a command, start an owned daemon, stop an owned process.

A process is stopped only when it is provably ours: its pid comes from a pidfile
or journal entry of the run, and its command line still contains the run's
own path (pid reuse guard). Nothing is ever matched by program name.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vnetbench import signals
from vnetbench.errors import BuildError


def run(argv, timeout=15.0, env=None, what=None) -> str:
    """Run argv to completion; a failure raises BuildError naming the command."""
    signals.checkpoint()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what or argv[0]}: timed out after {timeout:.0f} s "
                         f"({' '.join(map(str, argv))})") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise BuildError(f"{what or argv[0]}: exit {done.returncode}: "
                         f"{detail[-1] if detail else 'no output'}")
    return done.stdout


def pinned(argv, cpus=None) -> list[str]:
    """argv pinned to ``cpus`` with taskset (unchanged when no CPUs are given)."""
    return ["taskset", "-c", ",".join(map(str, cpus)), *argv] if cpus else list(argv)


def in_netns(ns: str, argv, cpus=None) -> list[str]:
    """argv that runs inside namespace ``ns``, pinned to ``cpus`` when given."""
    return ["ip", "netns", "exec", ns, *pinned(argv, cpus)]


def daemon(journal, rundir, prog: str, args, netns=None, cpus=None, env=None, owner="",
           name=None, unixctl=True) -> None:
    """Start an OVS/OVN-style daemon that detaches itself: journaled first by its
    run-unique pidfile (the argmark teardown finds it by); its pidfile, unixctl
    socket and log are ``rundir/<name>.*`` (``name`` defaults to ``prog``; a daemon
    without ``--unixctl`` puts its socket in its rundir environment variable)."""
    name = name or prog
    pidfile = rundir / f"{name}.pid"
    mark = f"--pidfile={pidfile}"
    journal.record("daemon", name=name, host=owner, pidfile=str(pidfile), argmark=mark)
    argv = [prog, *args, mark, *([f"--unixctl={rundir / (name + '.ctl')}"] if unixctl else []),
            f"--log-file={rundir / (name + '.log')}", "--detach", "--no-chdir"]
    argv = in_netns(netns, argv, cpus) if netns else pinned(argv, cpus)
    run(argv, env=env, timeout=30, what=f"{prog} on {owner}")


def python_daemon(journal, ns: str, rundir, name: str, owner: str, argv_tail: list,
                  cpus=None) -> None:
    """Start ``python -m <argv_tail>`` in namespace ``ns``, journaled first by its
    run-unique ``--pidfile=`` argument (it writes the pidfile itself); its pidfile and
    log are ``rundir/<name>.*``. Not waited for."""
    script_daemon(journal, ns, rundir, name, owner, [sys.executable, "-m", *argv_tail], cpus)


def script_daemon(journal, ns: str, rundir, name: str, owner: str, argv: list, cpus=None) -> None:
    """Start ``argv`` (a program that takes ``--pidfile=`` and writes it itself) in
    namespace ``ns``, journaled first by that run-unique argument; its pidfile and log
    are ``rundir/<name>.*``. Not waited for."""
    pf, log = rundir / f"{name}.pid", rundir / f"{name}.log"
    journal.record("daemon", name=name, host=owner, pidfile=str(pf), argmark=f"--pidfile={pf}")
    with open(log, "ab") as out:
        subprocess.Popen(in_netns(ns, [*argv, f"--pidfile={pf}"], cpus),
                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)


def argv(pid: int) -> list[str]:
    """The process's argv exactly (NUL-separated: a path with spaces stays one argument)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def pids_naming(text: str) -> list[int]:
    """Processes (not this one) with an argument containing ``text`` (a run-unique path)."""
    needle, found = text.encode(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                args = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(needle in a for a in args):
                found.append(int(entry.name))
    return found


def netns_of(pid: int) -> tuple[int, int] | None:
    """The network namespace of PID as (st_dev, st_ino) of ``/proc/PID/ns/net``; None
    when it is gone."""
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def running(comm: str) -> bool:
    """Whether any process whose name (``/proc/PID/comm``) is COMM runs: to tell what a
    leftover is, never to stop anything by name."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(entry.path, "comm").read_text().strip() == comm:
                    return True
            except OSError:
                continue
    return False


def netns_members() -> dict[tuple[int, int], list[int]]:
    """Every process by its network namespace ((st_dev, st_ino) of ``/proc/PID/ns/net``):
    one scan of /proc for any number of namespaces."""
    found: dict[tuple[int, int], list[int]] = {}
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me:
            ns = netns_of(int(entry.name))
            if ns is not None:
                found.setdefault(ns, []).append(int(entry.name))
    return found


def pids_in_netns(path) -> list[int]:
    """Processes whose network namespace is the one bound at ``path`` (e.g.
    /run/netns/<name>): by namespace inode, never by name."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            if netns_of(int(entry.name)) == (st.st_dev, st.st_ino):
                found.append(int(entry.name))
    return found


def wait_through_interrupts(wait) -> None:
    """Call ``wait()`` until it returns even if KeyboardInterrupt (SIGINT, SIGTERM)
    arrives meanwhile, then re-raise the first interrupt: work already started
    (a namespace, a daemon) finishes and is journaled before anyone unwinds."""
    interrupted = None
    while True:
        try:
            wait()
            break
        except KeyboardInterrupt as exc:
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def parallel(calls, workers: int = 8) -> None:
    """Run the zero-argument ``calls`` on threads (subprocess work only); raise the
    first failure. On an interrupt, calls not yet started are dropped and started
    ones finish before it propagates: nothing keeps creating behind a teardown."""
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(calls))))
    try:
        for fut in [pool.submit(c) for c in calls]:
            fut.result()
    finally:
        wait_through_interrupts(lambda: pool.shutdown(wait=True, cancel_futures=True))


def listening_ports(pid: int, proc_root: Path = Path("/proc")) -> set[int]:
    """The TCP ports PID listens on, from its own socket inodes and its network
    namespace's table (so a daemon in another namespace is read where it is)."""
    try:
        inodes = {os.readlink(f).removeprefix("socket:[").rstrip("]")
                  for f in (proc_root / str(pid) / "fd").iterdir()}
        table = (proc_root / str(pid) / "net" / "tcp").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(f[1].rsplit(":", 1)[1], 16) for f in (line.split() for line in table)
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes}      # 0A: LISTEN


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after its command name (None if PID is gone):
    ``[0]`` the scheduler state, ``[19]`` the start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def starttime(pid: int) -> int | None:
    """Kernel start time of pid (clock ticks since boot): identifies a process across pid reuse."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[19])


def pids_with_env(var: str, value: str) -> list[int]:
    """Processes (not this one) whose environment holds ``VAR=value`` (a run-unique
    marker its children inherit even when they leave the process group)."""
    want, found = f"{var}={value}".encode(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                env = Path(entry.path, "environ").read_bytes()
            except OSError:
                continue
            if want in env.split(b"\0"):
                found.append(int(entry.name))
    return found


def pids_with_arg(arg: str) -> list[int]:
    """Processes whose argv contains exactly ``arg`` (an owned, run-unique path)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if arg.encode() in argv:
                found.append(int(entry.name))
    return found


def stop(pid: int, is_ours, grace=1.0, hard=False) -> bool:
    """SIGTERM, then SIGKILL after ``grace`` s (``hard``: SIGKILL at once); only while
    ``is_ours(pid)`` holds."""
    if not is_ours(pid):
        return False
    steps = ((signal.SIGTERM, grace),) if not hard else ()
    for i, (sig, wait) in enumerate(steps + ((signal.SIGKILL, 2.0),)):
        if i and not is_ours(pid):        # it ended in the grace and its pid was reused
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.01)
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        try:                      # our own child: reap it
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True


def python_daemon_report(rundir, name: str, dump_wait_s: float = 1.0) -> str:
    """Why a ``python_daemon`` may not have done its part, for a time-out message: its
    pid and scheduler state and, while it runs, the innermost frames of the stack it
    dumps to its log on SIGUSR1 (``vnetbench.sdn.controller.run_osken`` registers
    faulthandler for it); or that it is gone and the last line of its log."""
    pf, log = Path(rundir) / f"{name}.pid", Path(rundir) / f"{name}.log"
    size = log.stat().st_size if log.exists() else 0
    try:
        pid = int(pf.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return f"{name}: no pidfile (it never got past its imports); log: {_last_line(log)}"
    if f"--pidfile={pf}" not in argv(pid) or not _alive(pid):
        return f"{name}: pid {pid} is not running; log: {_last_line(log)}"
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + dump_wait_s
    while time.monotonic() < deadline and (log.stat().st_size if log.exists() else 0) <= size:
        time.sleep(0.05)
    time.sleep(0.1)                               # the rest of the dump
    with open(log, "rb") as f:
        f.seek(size)
        dump = f.read().decode(errors="replace")
    threads = _threads(dump)
    error = _last_exception(log, size)
    return (f"{name}: pid {pid} state {state}, "
            f"{'where its threads wait: ' + ' | '.join(threads) if threads else 'no stack dump'}"
            f"{'; last exception in its log: ' + error if error else ''}")


# a frame line of a faulthandler dump ('line N in f') and of a traceback ('line N, in f')
_FRAME = re.compile(r'File "([^"]+)", line (\d+),? in (\S+)')


def _threads(dump: str) -> list[str]:
    """Per thread of a faulthandler dump, its innermost frame outside the standard
    library (``func (file:line)``) and, when that is a library's, the innermost of
    vnetbench's own (`` in func (file:line)``): where each thread of the daemon is.
    Alike threads are listed once with their count (every thread is shown: one missing
    from a cut list looked like a dead one)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    out: dict[str, int] = {}
    for block in re.split(r"\n\s*\n|(?=^(?:Current )?[Tt]hread 0x)", dump, flags=re.M):
        frames = _FRAME.findall(block)
        own = [f for f in frames if not f[0].startswith(stdlib)] or frames
        if not own:
            continue
        where = _frame(own[0])
        ours = next((f for f in frames if f"{os.sep}vnetbench{os.sep}" in f[0]), None)
        if ours and ours != own[0]:
            where += f" in {_frame(ours)}"
        out[where] = out.get(where, 0) + 1
    return [w if n == 1 else f"{w} x{n}" for w, n in out.items()]


def _frame(f) -> str:
    path, line, func = f
    return f"{func} ({Path(path).name}:{line})"


def _last_exception(log: Path, end: int, tail: int = 65536) -> str | None:
    """The exception line of the last traceback in the log's last ``tail`` bytes before
    ``end`` (a thread that died of it leaves the daemon running, without that thread)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, end - tail))
            text = f.read(min(end, tail)).decode(errors="replace")
    except OSError:
        return None
    i = text.rfind("Traceback (most recent call last):")
    if i < 0:
        return None
    where = ""
    for line in text[i:].splitlines()[1:]:
        at = line[:1].isspace() and _FRAME.search(line)
        if at:
            where = f" (at {_frame(at.groups())})"
        elif line and not line[0].isspace():
            return line.strip()[:300] + where
    return None


def _last_line(log: Path) -> str:
    try:
        return (log.read_text(errors="replace").strip().splitlines() or ["(empty)"])[-1]
    except OSError:
        return "no log"
