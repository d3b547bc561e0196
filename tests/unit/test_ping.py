"""The ping executor against recorded iputils output."""

from pathlib import Path

import pytest

from vnetbench.traffic import ping

DATA = Path(__file__).resolve().parents[1] / "data" / "ping"


def test_command_is_numeric_counted_and_bounded():
    argv = ping.command(ping.PingParams(dest="198.19.1.2", count=5, interval_s=0.05, payload=1000))
    assert argv == ["ping", "-n", "-c", "5", "-i", "0.05", "-s", "1000", "-W", "1", "198.19.1.2"]


def test_parse_replies():
    res = ping.parse((DATA / "ok.txt").read_text())
    assert (res["transmitted"], res["received"], res["loss_pct"]) == (5, 5, 0.0)
    assert res["samples_ms"] == [0.038, 0.042, 0.052, 0.048, 0.046]
    assert (res["rtt_min_ms"], res["rtt_avg_ms"], res["rtt_max_ms"]) == (0.038, 0.045, 0.052)


def test_parse_total_loss_has_no_rtt():
    res = ping.parse((DATA / "lost.txt").read_text())
    assert (res["received"], res["loss_pct"], res["rtt_avg_ms"], res["samples_ms"]) == (0, 100.0, None, [])


def test_parse_rejects_other_output():
    with pytest.raises(ValueError, match="not ping output"):
        ping.parse("ping: connect: Network is unreachable\n")
