"""The routing rows' verdicts (issue 26) on measurements of working and broken routers,
and the TTLs read from ping's output."""

from vnetbench.functional import verdict as v
from vnetbench.functional.verdict import Status
from vnetbench.traffic import ping

PING = """PING 198.19.2.1 (198.19.2.1) 56(84) bytes of data.
64 bytes from 198.19.2.1: icmp_seq=1 ttl=63 time=0.201 ms
64 bytes from 198.19.2.1: icmp_seq=2 ttl=63 time=0.136 ms

--- 198.19.2.1 ping statistics ---
2 packets transmitted, 2 received, 0% packet loss, time 1030ms
rtt min/avg/max/mdev = 0.136/0.168/0.201/0.032 ms
"""


def pinged(ttls, sent=3, dst="198.19.2.1"):
    return {"dst": dst, "sent": sent, "received": len(ttls), "ttls": ttls}


def test_ttls_of_each_reply():
    assert ping.ttls(PING) == [63, 63]
    assert ping.ttls("no replies") == []


def test_one_router_hop_passes():
    got = v.routed({"routed": pinged([63, 63, 63]), "switched": pinged([64] * 3, dst="198.19.1.2")})
    assert (got.status, got.value) == (Status.PASS, 63) and "one router hop" in got.detail


def test_a_bridged_or_two_hop_path_fails():
    for ttls in ([64, 64], [62, 62], [63, 62]):
        got = v.routed({"routed": pinged(ttls), "switched": pinged([64])})
        assert got.status is Status.FAIL and "not one router hop" in got.detail, ttls


def test_no_answer_across_vnets_fails_and_no_control_is_an_error():
    assert v.routed({"routed": pinged([]), "switched": pinged([64])}).status is Status.FAIL
    assert v.routed({"routed": pinged([63]), "switched": pinged([])}).status is Status.ERROR


def floating(**over):
    m = {"inbound": {"sent": 3, "received": 3}, "fixed": {"sent": 1, "received": 0},
         "seen": {"blue-1": "198.18.128.2", "red-1": "198.18.128.3"},
         "expected": {"blue-1": "198.18.128.2", "red-1": "198.18.128.3"}}
    return v.floating_ip({**m, **over})


def test_floating_ip_and_snat_as_expected_pass():
    got = floating()
    assert got.status is Status.PASS and "red-1 198.18.128.3" in got.detail


def test_what_breaks_nat_fails_naming_it():
    assert "did not answer" in floating(inbound={"sent": 3, "received": 0}).detail
    assert "fixed (tenant) address" in floating(fixed={"sent": 1, "received": 1}).detail
    leaked = floating(seen={"blue-1": "198.19.1.1", "red-1": "198.18.128.3"})
    assert leaked.status is Status.FAIL and "blue-1 198.19.1.1 (expected 198.18.128.2)" in leaked.detail
    lost = floating(seen={"blue-1": "198.18.128.2", "red-1": None})
    assert "red-1 nothing" in lost.detail


def test_interface_removal_uses_the_deprovision_timing_with_its_own_words():
    ms = 1_000_000
    m = {"t_start_ns": 1000 * ms, "t_done_ns": 1010 * ms,
         "sender": {"interval_ns": 5 * ms, "last_ns": 4000 * ms},
         "probes": [[i, i * 5 * ms, i * 5 * ms + ms] for i in range(1, 202)],
         "change": "the router interface was removed", "control": "blue's own switching",
         "new_ping": {"sent": 5, "received": 0}, "other_vnet_ping": {"sent": 5, "received": 0}}
    got = v.deprovision(m)
    assert got.status is Status.FAIL and "blue's own switching lost reachability" in got.detail
    m["probes"] = []
    assert "before the router interface was removed" in v.deprovision(m).detail
