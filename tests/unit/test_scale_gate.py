"""The scale run's start gate: a client says ready, waits for the release, stamps its clock
the moment it opens and then *is* the client (same process, nothing in between)."""

import subprocess
import time

from vnetbench.scale import run as scale_run


def test_the_gate_holds_until_released_then_stamps_and_becomes_the_command():
    argv = scale_run.gated(["sh", "-c", 'echo "pid $$"'], ["date", "+%s%N"])
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    assert p.poll() is None                       # still waiting for the release
    t0 = time.time_ns()
    out, _ = p.communicate("go\n", timeout=10)
    stamp, pid_line = out.strip().splitlines()
    assert t0 <= scale_run.parse_stamp(stamp) <= time.time_ns()
    assert pid_line == f"pid {p.pid}"             # exec: the gate's shell became the client


def test_stamps_of_both_clocks_parse():
    assert scale_run.parse_stamp("1764180000123456789\n") == 1764180000123456789
    assert scale_run.parse_stamp('{"monotonic_ns": 42}') == 42
