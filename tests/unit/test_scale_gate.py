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


def test_a_conn_pairs_figure_is_its_connections_within_the_deadline_per_second():
    """flowgen's recorded results: 30,000 of 30,000 in 3 s is 10,000/s; 100 of 300 refused
    in 1 s is 200/s and a third lost; iperf3's output is not flowgen's (the pair failed,
    never zero)."""
    import pytest
    from pathlib import Path
    from vnetbench.scale.run import UNIT, _figure, client_argv
    data = Path(__file__).parent.parent / "data" / "flowgen"
    got = _figure("conn", (data / "rate10k.json").read_text())
    assert got["cps"] == pytest.approx(10000.0) and got["loss_pct"] == 0 and got["offered_cps"] == 9999.3
    refused = _figure("conn", (data / "refused.json").read_text())
    assert refused["cps"] == pytest.approx(200.0, rel=0.01) and refused["loss_pct"] == pytest.approx(33.3333)
    with pytest.raises(ValueError):
        _figure("conn", '{"start": {}, "end": {}}')
    assert UNIT == {"tcp": "gbps", "udp": "gbps", "conn": "cps"}

    class Dep:
        def ip(self, vm):
            return {"a": "198.19.1.1", "b": "198.19.1.2"}[vm]

    class Pair:
        vms = ("a", "b")
    argv = client_argv(Dep(), Pair(), "conn", 3, 5300, None, 1, conn_rate=250)
    assert argv[1] == "client" and argv[argv.index("-rate") + 1] == "250" and \
        argv[argv.index("-target") + 1] == "198.19.1.2" and argv[argv.index("-duration") + 1] == "3"
