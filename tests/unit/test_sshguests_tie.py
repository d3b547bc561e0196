"""The guest command channel's tie (``sshguests.tied_popen``), run here by a local shell
in place of SSH: the command ends when the session's stdin does; with ``stdin=PIPE``
the lines written reach the command first (a scale gate released on a guest), and its
output is read while the tie stays open."""

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from vnetbench.scale import run as scale_run
from vnetbench.testbed import sshguests


class _Journal:
    def __init__(self):
        self.entries = []

    def record(self, kind, **fields):
        self.entries.append((kind, fields))


LOCAL = SimpleNamespace(argv=lambda argv: list(argv))      # "ssh" that runs the argv here


def _popen(argv, **kw):
    return sshguests.tied_popen(_Journal(), LOCAL, argv, {"vm": "a"}, **kw)


def test_a_gate_behind_the_tie_is_released_by_a_write_and_finishes():
    p = _popen(scale_run.gated(["sh", "-c", "sleep 0.2; echo done"], ["date", "+%s%N"]),
               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    t0 = time.time_ns()
    p.stdin.write("go\n")
    p.stdin.flush()
    out = scale_run._finish(p, timeout=10)
    assert out["rc"] == 0 and out["out"].strip() == "done", out
    assert t0 <= scale_run.parse_stamp(out["stamp"]) <= time.time_ns()
    assert p.stdin is not None and not p.stdin.closed      # read without closing the tie
    p.stdin.close()


@pytest.mark.parametrize("writes", [True, False])
def test_the_end_of_the_session_ends_the_command(writes):
    kw = {"stdin": subprocess.PIPE} if writes else {}
    p = _popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
               stdout=subprocess.PIPE, text=True, **kw)
    assert p.stdout.readline().strip() == "up"
    assert (p.stdin is not None) is writes
    p.tie.close()
    assert p.wait(timeout=5) != 0
    assert not [f for f in os.listdir("/tmp") if f == f"vnb-stdin.{p.pid}"]
