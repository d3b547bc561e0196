"""vnetbench.machinelock: the test lanes' (and two sessions') turns with the machine.

Holders are separate processes, as the lanes are: each writes to a shared log when it
is granted its turn and when it lets go, so the order is read, not timed."""

import contextlib
import os
import subprocess
import sys
import textwrap
import time

import pytest

from vnetbench import machinelock

HOLDER = textwrap.dedent("""
    import os, sys, time
    from vnetbench import machinelock
    path, mode, name, log, release = sys.argv[1:6]
    with machinelock.turn(mode == "x", name, path=path):
        with open(log, "a") as f:
            f.write(f"{name} in\\n")
        while not os.path.exists(release):
            time.sleep(0.02)
        with open(log, "a") as f:
            f.write(f"{name} out\\n")
""")


def _holder(tmp_path, mode, name):
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "m.lock"), mode, name,
                             str(tmp_path / "log"), str(tmp_path / f"release-{name}")])


def _log(tmp_path):
    p = tmp_path / "log"
    return p.read_text().split("\n")[:-1] if p.exists() else []


def _wait_for(tmp_path, line, timeout=10.0):
    deadline = time.monotonic() + timeout
    while line not in _log(tmp_path):
        assert time.monotonic() < deadline, (line, _log(tmp_path))
        time.sleep(0.02)


def _release(tmp_path, *names):
    for n in names:
        (tmp_path / f"release-{n}").touch()


def test_without_a_lock_file_nothing_is_held(monkeypatch, tmp_path):
    monkeypatch.delenv(machinelock.ENV, raising=False)
    with machinelock.turn(True, "t") as waited:
        assert waited == 0.0 and machinelock.HELD not in os.environ
    assert list(tmp_path.iterdir()) == []


def test_shares_overlap_and_the_whole_machine_waits_for_them(tmp_path):
    a, b = _holder(tmp_path, "s", "a"), _holder(tmp_path, "s", "b")
    _wait_for(tmp_path, "a in")
    _wait_for(tmp_path, "b in")
    x = _holder(tmp_path, "x", "x")
    time.sleep(0.6)                         # three polls: it must still wait
    assert "x in" not in _log(tmp_path)
    _release(tmp_path, "a", "b", "x")
    _wait_for(tmp_path, "x out")
    log = _log(tmp_path)
    assert log.index("x in") > max(log.index("a out"), log.index("b out")), log
    for p in (a, b, x):
        assert p.wait(10) == 0


def test_a_waiting_whole_machine_turn_goes_before_later_shares(tmp_path):
    """Writer priority: the lanes take a share per test, back to back; without the
    turnstile a whole-machine test could wait for ever."""
    a = _holder(tmp_path, "s", "a")
    _wait_for(tmp_path, "a in")
    x = _holder(tmp_path, "x", "x")
    time.sleep(0.6)                         # x is waiting on a
    c = _holder(tmp_path, "s", "c")
    time.sleep(0.6)
    assert "c in" not in _log(tmp_path), _log(tmp_path)
    _release(tmp_path, "a")
    _wait_for(tmp_path, "x in")
    time.sleep(0.4)
    assert "c in" not in _log(tmp_path), _log(tmp_path)       # not beside the whole machine
    _release(tmp_path, "x", "c")
    _wait_for(tmp_path, "c out")
    log = _log(tmp_path)
    assert log.index("c in") > log.index("x out"), log
    for p in (a, x, c):
        assert p.wait(10) == 0


def test_a_turn_inside_a_turn_holds_nothing_more(tmp_path):
    """A test holding its share runs ``vnetbench functional`` (a child, the environment
    inherited): the child's rows must not wait for the machine their parent shares."""
    path = str(tmp_path / "m.lock")
    with machinelock.turn(False, "outer", path=path):
        assert os.environ[machinelock.HELD] == "shared"
        done = subprocess.run([sys.executable, "-c", "from vnetbench import machinelock\n"
                               f"with machinelock.turn(True, 'inner', path={path!r}, timeout_s=1) as w:\n"
                               "    print(w)"], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and done.stdout.strip() == "0.0", done.stderr
    assert machinelock.HELD not in os.environ


def test_a_turn_not_granted_in_time_says_who_holds_the_machine(tmp_path):
    x = _holder(tmp_path, "x", "the-capacity-test")
    _wait_for(tmp_path, "the-capacity-test in")
    try:
        with pytest.raises(machinelock.MachineBusyError, match="held by pid [0-9]+: the-capacity-test"):
            with machinelock.turn(False, "t", path=str(tmp_path / "m.lock"), timeout_s=0.5):
                pass
    finally:
        _release(tmp_path, "the-capacity-test")
        assert x.wait(10) == 0


def test_turns_span_a_unit_and_are_exclusive_when_one_item_needs_the_machine(monkeypatch):
    """A testbed's rows share one turn; a whole-machine row is a turn of its own; the
    turn ends with its unit (what ran between the items ends with it)."""
    log = []

    @contextlib.contextmanager
    def fake_turn(exclusive, who):
        log.append(("take", who, exclusive))
        yield 0.0
        log.append(("drop", who))
    monkeypatch.setattr(machinelock, "turn", fake_turn)
    items = [("a", False), ("a", False), ("rate", True), ("a", False), ("b", False)]
    turns = machinelock.Turns(unit_of=lambda i: i[0], whole=lambda i: i[1])
    for i, item in enumerate(items):
        turns.enter(item, items)
        turns.leave(items[i + 1] if i + 1 < len(items) else None)
    assert log == [("take", "a", False), ("drop", "a"), ("take", "rate", True), ("drop", "rate"),
                   ("take", "a", False), ("drop", "a"), ("take", "b", False), ("drop", "b")]
