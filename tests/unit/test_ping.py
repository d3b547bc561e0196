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


def test_replies_name_the_lost_echo():
    """Recorded (ping -D -O, the partition test's sequence): the first echo after a
    management partition unanswered; 'no answer yet' is not a reply."""
    got = ping.replies((DATA / "first_lost.txt").read_text())
    assert sorted(got) == list(range(2, 11)) and got[2] == 0.337
    assert ping.replies((DATA / "lost.txt").read_text()) == {}


def test_parse_rejects_other_output():
    with pytest.raises(ValueError, match="not ping output"):
        ping.parse("ping: connect: Network is unreachable\n")


def test_reachability_of_a_source_without_a_route():
    """A guest whose deprovisioned port the cloud unplugged has no route: iputils prints
    only why (recorded: ping -n -c 2 in a namespace without links), and that is a ping
    that reached nothing, not output the suite cannot read."""
    stderr = (DATA / "unreachable.stderr.txt").read_text()
    assert ping.reachability("", stderr) == {"sent": 0, "received": 0,
                                             "unreachable": "Network is unreachable"}
    assert ping.reachability((DATA / "lost.txt").read_text())["received"] == 0
    with pytest.raises(ValueError, match=r"no 'packets transmitted' summary \(ping: unknown host x\)"):
        ping.reachability("", "ping: unknown host x\n")
