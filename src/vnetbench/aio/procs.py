"""The AIO's journal and its daemons: every process is journaled with its pid and start
time (so a recycled pid is never killed), runs in a process group of its own and carries
the AIO's marker in its environment, so teardown finds its children too — never by name."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from vnetbench import state
from vnetbench.errors import PrerequisiteError, VnetbenchError
from vnetbench.linux import proc

MARKER = "VNETBENCH_AIO"


class Journal:
    """The AIO's handle on its run journal: the suite's one journal format
    (``vnetbench.state``), without a testbed run's lock and interrupt checkpoint."""

    def __init__(self, path: Path):
        self.path = path

    def record(self, kind: str, /, **data) -> None:
        state.journal_append(self.path, kind, **data)

    def entries(self) -> list[dict]:
        return state.journal_entries(self.path)


def start_time(pid: int) -> int | None:
    """Clock ticks since boot at which PID started (None if it is gone)."""
    fields = proc.stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):        # a zombie is gone
        return None
    return int(fields[19])


def alive(entry: dict) -> bool:
    return start_time(entry["pid"]) == entry["start"]


class Daemons:
    def __init__(self, journal: Journal, logs: Path, marker: str):
        self.journal, self.logs, self.marker = journal, logs, marker

    def start(self, name: str, argv: list[str], env: dict | None = None,
              cwd: Path | None = None) -> dict:
        """Start ARGV in the background (log in logs/NAME.log) and journal it."""
        self.logs.mkdir(parents=True, exist_ok=True)
        self.journal.record("starting", name=name)
        full_env = {**os.environ, **(env or {}), MARKER: self.marker}
        with open(self.logs / f"{name}.log", "ab") as log:
            try:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     env=full_env, cwd=cwd, start_new_session=True)
            except FileNotFoundError:
                raise VnetbenchError(f"aio: {argv[0]} not found; run 'make install' (Zed's "
                                     "OpenStack packages: 'make install-zed')") from None
        entry = {"name": name, "pid": p.pid, "start": start_time(p.pid)}
        self.journal.record("process", **entry)
        return entry

    def check(self, name: str, entry: dict) -> None:
        if not alive(entry):
            tail = _tail(self.logs / f"{name}.log")
            raise VnetbenchError(f"aio: {name} exited at start: {tail} (log: {self.logs / name}.log)")


def _tail(path: Path) -> str:
    lines = log_lines(path)
    if lines is None:
        return "no log"
    # the last error line says more than a traceback's closing frame
    errors = [ln for ln in lines[-60:] if " ERROR " in ln or " CRITICAL " in ln]
    return (errors or lines or ["no output"])[-1][-300:]


def log_lines(path: Path, last: int = 200) -> list[str] | None:
    """The log's last non-blank lines, colour codes and oslo's bare closing lines dropped."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    lines = [ln.replace("\x1b[00m", "").rstrip() for ln in text.splitlines()[-last:]]
    return [ln for ln in lines if ln and not re.search(r" (ERROR|WARNING|INFO) \S+ ?(\[[^]]*\])?$", ln)]


def wait_port(port: int, name: str, timeout_s: float, entry: dict | None = None,
              logs: Path | None = None) -> float:
    """Seconds until 127.0.0.1:PORT accepts; an error naming NAME if its process dies."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return time.monotonic() - t0
        except OSError:
            pass
        if entry is not None and not alive(entry):
            tail = _tail(logs / f"{name}.log") if logs else ""
            raise VnetbenchError(f"aio: {name} exited before listening on {port}: {tail}")
        time.sleep(0.2)
    raise VnetbenchError(f"aio: {name} not listening on 127.0.0.1:{port} after {timeout_s:g} s")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def marked(marker: str) -> list[int]:
    """Pids whose environment carries MARKER=marker (children that left the group)."""
    return proc.pids_with_env(MARKER, marker)


def stop(entries: list[dict], marker: str | None, timeout_s: float = 15) -> list[str]:
    """SIGTERM the journaled process groups (newest first), SIGKILL what remains, then
    every process still carrying the marker. Returns what could not be stopped.

    Not ``linux.proc.stop``: an OpenStack service forks workers that share its group and
    its environment but not its argv, and the whole cloud is stopped at once, so this
    signals groups together and sweeps by the marker instead of one pidfile'd daemon at
    a time; and a zombie counts as stopped here (``start_time``), where the testbed's
    teardown, which reaps its own children, waits for it."""
    live = [e for e in reversed(entries) if alive(e)]
    for e in live:
        _signal_group(e, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(e) for e in live):
        time.sleep(0.2)
    for e in live:
        if alive(e):
            _signal_group(e, signal.SIGKILL)
    deadline = time.monotonic() + 5          # until the killed are reaped
    while time.monotonic() < deadline and any(alive(e) for e in live):
        time.sleep(0.1)
    strays = marked(marker) if marker else []
    for pid in strays:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if strays:
        time.sleep(0.3)
    left = [f"{e['name']} (pid {e['pid']})" for e in live if alive(e)]
    return left + [f"pid {pid}" for pid in (marked(marker) if marker else [])]


def _signal_group(entry: dict, sig) -> None:
    try:
        os.killpg(entry["pid"], sig)        # its own session: the group id is its pid
    except OSError:
        try:
            os.kill(entry["pid"], sig)
        except OSError:
            pass

def command(argv, what: str, timeout_s: float = 600, env=None, input=None) -> str:
    """ARGV's output; a missing program, a timeout or a failure is one line naming WHAT."""
    try:
        done = subprocess.run(list(map(str, argv)), capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, **(env or {})}, input=input)
    except FileNotFoundError:
        raise PrerequisiteError(f"aio: {argv[0]} not found; run 'make install'") from None
    except subprocess.TimeoutExpired:
        raise VnetbenchError(f"aio: {what} did not finish within {timeout_s:g} s") from None
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise VnetbenchError(f"aio: {what} failed (exit {done.returncode}): {tail[:300]}")
    return done.stdout
