"""One interrupt trial: start ``vnetbench testbed up`` of a testbed, interrupt it at a
random point (SIGINT to its process group as Ctrl-C does, SIGTERM, two SIGTERMs
0.15 s apart, SIGKILL) or race it with ``vnetbench cleanup``; then ``vnetbench
cleanup`` and look for anything of the suite left on the machine. Shared by
tests/integration/test_interrupt_stress.py and bench/bench_interrupts.py."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from leaks import processes_mentioning
from pyroute2 import IPRoute, netns

MODES = ("sigint-group", "sigterm", "double-sigterm", "sigkill", "cleanup-race")
READY = "vSwitches ready"        # progress line printed once the build is complete
# the last line 'testbed up' prints: killed by a signal's default action after it, the
# process had finished (main() restores SIG_DFL once the command returned). READY's
# read time alone can lag the signal on a loaded machine (the reader is a thread).
SUMMARY = "down: vnetbench testbed down --run"


def vnetbench(*args) -> list[str]:
    return [sys.executable, "-m", "vnetbench", *args]


class _Lines(threading.Thread):
    """Reads a pipe, keeping (monotonic time, line) pairs."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe, self.lines = pipe, []

    def run(self):
        for line in self.pipe:
            self.lines.append((time.monotonic(), line))

    def text(self) -> str:
        return "".join(line for _, line in self.lines)

    def first(self, needle):
        return next((t for t, line in self.lines if needle in line), None)


def _interactive():
    """SIGINT as a terminal's Ctrl-C finds it. A test run in the background of a
    non-interactive shell (as a CI job may be) inherits SIGINT ignored, and a program
    started that way keeps ignoring it, as Unix programs do."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def trial(mode: str, delay: float, testbed: Path, env: dict, timeout: float = 90.0) -> list[str]:
    """Run one trial; returns the problems found (empty: clean)."""
    problems = []
    t0 = time.monotonic()
    builder = subprocess.Popen(vnetbench("testbed", "up", str(testbed)), env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, preexec_fn=_interactive)
    out, err = _Lines(builder.stdout), _Lines(builder.stderr)
    out.start(), err.start()
    try:        # a builder that ends before the signal point is signalled at once: there is
        builder.wait(timeout=delay)     # nothing left of it to interrupt, sooner or later
        exited = True
    except subprocess.TimeoutExpired:
        exited = False
    sent = time.monotonic()
    racer = None
    if mode == "sigint-group":
        _signal(lambda: os.killpg(builder.pid, signal.SIGINT))
    elif mode == "sigterm":
        _signal(lambda: builder.send_signal(signal.SIGTERM))
    elif mode == "double-sigterm":
        _signal(lambda: builder.send_signal(signal.SIGTERM))
        time.sleep(0.15)
        _signal(lambda: builder.send_signal(signal.SIGTERM))
    elif mode == "sigkill":
        _signal(lambda: builder.send_signal(signal.SIGKILL))
    elif mode == "cleanup-race":
        racer = subprocess.run(vnetbench("cleanup"), env=env, capture_output=True, text=True,
                               timeout=timeout)
    try:
        rc = builder.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        builder.kill()
        rc = builder.wait()
        problems.append(f"builder still running {timeout:.0f} s after {mode}")
    out.join(5), err.join(5)
    text = err.text() + out.text()
    if "Traceback" in text:
        problems.append(f"traceback: {text[text.index('Traceback'):][:400]}")
    ready = err.first(READY)
    done_before = (exited and rc == 0) or (ready is not None and ready <= sent)
    started = err.first("run ") is not None
    finished = err.first("vnetbench: interrupted") or err.first("vnetbench: error")
    if mode in ("sigint-group", "sigterm", "double-sigterm"):
        if rc == 0 and not done_before:
            problems.append(f"{mode} at {delay:.2f} s ignored: the testbed was built anyway")
        elif rc in (-signal.SIGTERM, -signal.SIGINT) and (done_before or not started or finished
                                                             or out.first(SUMMARY) is not None):
            pass       # a signal while starting up or exiting: nothing was being built
        elif rc not in (0, 130):
            problems.append(f"{mode}: exit {rc}: {text[-300:]}")
    elif mode == "cleanup-race":
        if rc != 0:
            problems.append(f"a concurrent cleanup broke the bring-up (exit {rc}): {text[-300:]}"
                            f" / cleanup said: {racer.stdout[-200:]}")
        if racer.returncode != 0:
            problems.append(f"the racing cleanup failed: {racer.stdout[-300:]}{racer.stderr[-300:]}")
    rids = set(re.findall(r"\brun ([0-9a-f]{6})\b", text))     # even if its directory is gone
    problems += after_cleanup(env, rids)
    problems = [f"{mode} after {delay:.2f} s (trial {time.monotonic() - t0:.1f} s): {p}"
                for p in problems]
    return problems


def bring_up_seconds(testbed: Path, env: dict, timeout: float = 90.0) -> tuple[float, list[str]]:
    """One bring-up left alone: seconds from its start until it exits, and the problems
    found after it (it must succeed; cleanup must leave nothing). Where the trials'
    signal points fall: a signal after the exit interrupts nothing."""
    t0 = time.monotonic()
    done = subprocess.run(vnetbench("testbed", "up", str(testbed)), env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_interactive)
    seconds = time.monotonic() - t0
    problems = [] if done.returncode == 0 else [f"uninterrupted bring-up: exit {done.returncode}: "
                                                f"{done.stderr[-300:]}"]
    rids = set(re.findall(r"\brun ([0-9a-f]{6})\b", done.stderr + done.stdout))
    return seconds, problems + after_cleanup(env, rids)


def _signal(send) -> None:
    try:
        send()
    except ProcessLookupError:      # it had already finished
        pass


def after_cleanup(env: dict, rids=()) -> list[str]:
    """``vnetbench cleanup``, then anything of this state dir left on the machine."""
    state_dir = Path(env["VNETBENCH_STATE_DIR"])
    rc, said = cleanup_here(state_dir)
    problems = []
    if rc != 0:
        problems.append(f"cleanup exit {rc}: {said[-400:]}")
    left = leftovers(state_dir, set(rids))
    if left:
        problems.append(f"left after cleanup: {left}")
    return problems


def cleanup_here(state_dir: Path) -> tuple[int, str]:
    """``vnetbench cleanup`` of STATE_DIR through the command line's own entry, in this
    process (no Python start and imports per trial): its exit code and what it printed;
    an exception is exit 1 with its traceback. The racing cleanup stays a process."""
    from vnetbench.cli import main
    said, before = io.StringIO(), os.environ.get("VNETBENCH_STATE_DIR")
    os.environ["VNETBENCH_STATE_DIR"] = str(state_dir)
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            rc = main(["cleanup"])
    except Exception:        # noqa: BLE001 -- reported as the trial's problem
        rc = 1
        said.write(traceback.format_exc())
    finally:
        if before is None:
            os.environ.pop("VNETBENCH_STATE_DIR")
        else:
            os.environ["VNETBENCH_STATE_DIR"] = before
    return rc, said.getvalue()


def leftovers(state_dir: Path, rids: set) -> dict:
    """Namespaces, root-namespace links, processes and state of the runs ``rids``
    (named by the builder's output) and of any run still kept in ``state_dir``."""
    found = {"state": sorted(p.name for p in state_dir.iterdir()) if state_dir.exists() else []}
    rids = rids | {name.strip(".").split(".")[0] for name in found["state"]}
    found["processes"] = processes_mentioning(str(state_dir))
    found["namespaces"] = [n for n in netns.listnetns() for rid in rids if n.startswith(f"vnb-{rid}-")]
    with IPRoute() as ipr:
        found["root links"] = [link.get_attr("IFLA_IFNAME") for link in ipr.get_links()
                               if any(rid in (link.get_attr("IFLA_IFALIAS") or "") for rid in rids)]
    return {k: v for k, v in found.items() if v}
