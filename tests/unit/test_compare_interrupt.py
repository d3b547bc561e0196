"""compare's unwinding of an interrupted Rally task, without Rally or testbeds: the child
gets SIGINT once, is killed (with its process group) when it outlives the grace, and the
runs created under the command's owner mark -- and only those -- are torn down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from vnetbench import compare, state


def child(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Three runs in a private state root: two created under owner "me", one not."""
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(tmp_path / "state"))
    made = {}
    for rid, owner in (("aaaaa1", "me"), ("aaaaa2", "someone"), ("aaaaa3", "me")):
        monkeypatch.setenv(state.OWNER_ENV, owner)
        run = state.Run(rid, state.state_root())
        run.create(status="up", name=rid)
        run.unlock()
        made[rid] = run
    monkeypatch.delenv(state.OWNER_ENV)
    torn = []
    from vnetbench.testbed import deployment
    monkeypatch.setattr(deployment, "teardown", lambda run: torn.append(run.run_id) or [])
    return made, torn


def test_only_the_owners_runs_are_found(runs):
    made, _ = runs
    mine, stale = state.owned_by("me")
    assert sorted(r.run_id for r in mine) == ["aaaaa1", "aaaaa3"] and stale == []
    assert json.loads((made["aaaaa2"].dir / "meta.json").read_text())["owner"] == "someone"


def test_a_child_that_stops_on_sigint_is_waited_for_then_the_runs_go(runs, capsys):
    _, torn = runs
    # short sleeps, as a busy Rally process runs bytecode: Python runs a signal's handler
    # only between bytecodes, so a SIGINT landing after the last check before a single
    # sleep(60) was entered stayed pending for the whole minute (6 children in 600 here)
    # and SIGINT at Python's default whatever this process inherited: a test command run as
    # a background job of a script (SIGINT ignored there) left the child deaf to it
    p = child("import signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "try:\n    print('ready', flush=True)\n    while True:\n"
              "        time.sleep(0.05)\nexcept KeyboardInterrupt:\n    time.sleep(0.5)\n")
    t0 = time.monotonic()
    compare._unwind(p, "me", grace=10)
    assert time.monotonic() - t0 < 5 and p.returncode == 0     # it unwound on its own
    assert sorted(torn) == ["aaaaa1", "aaaaa3"]
    err = capsys.readouterr().err
    assert "killed" not in err and "run aaaaa1: removed" in err


def test_a_child_that_ignores_sigint_is_killed_after_the_grace(runs, capsys):
    _, torn = runs
    p = child("import signal, subprocess, sys, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
              "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print('ready', flush=True)\ntime.sleep(60)\n")
    t0 = time.monotonic()
    compare._unwind(p, "me", grace=1)
    assert 1 <= time.monotonic() - t0 < 5 and p.returncode == -9
    assert sorted(torn) == ["aaaaa1", "aaaaa3"]
    assert "Rally still running after 1 s: killed" in capsys.readouterr().err


def test_the_grandchildren_go_with_the_group(runs):
    p = subprocess.Popen([sys.executable, "-c", "import signal, subprocess, sys, time\n"
                          "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                          "g = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                          "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)'])\n"
                          "print(g.pid, flush=True)\ntime.sleep(60)\n"],
                         start_new_session=True, stdout=subprocess.PIPE, text=True)
    grandchild = int(p.stdout.readline())
    compare._unwind(p, "me", grace=0.5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{grandchild}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":      # killed, not yet reaped by init
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(grandchild, 9)
        pytest.fail("the Rally child's own child outlived the unwinding")


def test_rally_hears_sigint_when_compare_was_started_deaf_to_it():
    """Started as a background job of a script, compare has SIGINT ignored, and Rally would
    inherit that: neither compare's unwinding nor the parent-death signal could stop it."""
    probe = [sys.executable, "-c", "import signal; print('vnetbench: SIGINT default', "
             "signal.getsignal(signal.SIGINT) is signal.default_int_handler)"]
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        out, code = compare._stream(probe, None)
    finally:
        signal.signal(signal.SIGINT, old)
    assert code == 0 and "vnetbench: SIGINT default True" in out, out
