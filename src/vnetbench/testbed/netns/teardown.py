"""Unwind a run from its journal: reverse order, bounded, past failures, idempotent."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from pyroute2 import netns

from vnetbench.state import Run
from vnetbench.testbed.netns import proc


def teardown(run: Run, budget_s: float = 20.0) -> list[str]:
    """Remove everything the run journaled; returns the failures (empty when clean).

    The run directory goes last, and only when every step succeeded, so that a
    later ``cleanup`` can retry whatever could not be removed now.
    """
    errors = []
    deadline = time.monotonic() + budget_s
    for entry in reversed(run.entries()):
        if time.monotonic() > deadline:
            errors.append(f"teardown budget of {budget_s:.0f} s exhausted at {entry}")
            break
        try:
            _UNDO[entry["kind"]](run, entry)
        except Exception as exc:  # keep unwinding: one stuck object must not strand the rest
            errors.append(f"{entry['kind']} {_label(entry)}: {exc}")
    if errors:
        run.write_meta(status="teardown-failed", errors=errors)
    else:
        shutil.rmtree(run.dir, ignore_errors=True)
    return errors


def _label(entry):
    return entry.get("name") or entry.get("pidfile") or entry.get("pid") or ""


def _undo_netns(run: Run, entry):
    name = entry["name"]
    if not name.startswith(f"vnb-{run.run_id}-"):
        raise ValueError(f"journal names foreign namespace {name!r}; left alone")
    if name in netns.listnetns():
        netns.remove(name)


def _undo_daemon(run: Run, entry):
    """A daemon that detached itself: its pid is in its pidfile, or (if it died
    before writing it) found by the run-unique ``--pidfile=`` argument."""
    pidfile, mark = Path(entry["pidfile"]), entry["argmark"]
    pids = set(proc.pids_with_arg(mark))
    try:
        pids.add(int(pidfile.read_text().strip()))
    except (OSError, ValueError):
        pass
    for pid in pids:
        if not proc.stop(pid, lambda p: mark in proc.cmdline(p).split(),
                         grace=entry.get("grace_s", 1.0)):
            if proc.cmdline(pid):
                raise RuntimeError(f"pid {pid} did not exit")


def _undo_process(run: Run, entry):
    pid, start = entry["pid"], entry["starttime"]
    if not proc.stop(pid, lambda p: proc.starttime(p) == start):
        if proc.starttime(pid) == start:
            raise RuntimeError(f"pid {pid} did not exit")


def _undo_file(run: Run, entry):
    """A file the run wrote outside its own directory (e.g. a scrape target list)."""
    Path(entry["path"]).unlink(missing_ok=True)


def _undo_nothing(run: Run, entry):
    """A change that created nothing (a vnet deprovisioned while the run was up)."""


_UNDO = {
    "netns": _undo_netns,
    "daemon": _undo_daemon,
    "process": _undo_process,
    "file": _undo_file,
    "deprovision": _undo_nothing,
}
