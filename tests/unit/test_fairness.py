"""Fairness's pure parts: Jain's index, max-min and proportional shares, the TBF
bottleneck's payload capacity and command, the choice of source VMs."""

import pytest

from vnetbench.battery import fairness
from vnetbench.battery.fairness import jain, maxmin_shares, proportional_shares
from vnetbench.testbed.loader import loads


# -- Jain's index ----------------------------------------------------------------------

def test_jain_is_one_for_equal_shares_and_one_over_n_for_a_monopoly():
    assert jain([5, 5, 5]) == pytest.approx(1.0)
    assert jain([7.0]) == pytest.approx(1.0)
    assert jain([9, 0, 0]) == pytest.approx(1 / 3)
    assert jain([10, 0]) == pytest.approx(0.5)


def test_jain_known_values_and_scale_invariance():
    assert jain([1, 2, 3]) == pytest.approx(36 / 42)           # (6^2) / (3 * 14)
    assert jain([40e6, 80e6]) == pytest.approx(0.9)            # (120)^2 / (2 * 8000)
    assert jain([4, 8]) == pytest.approx(jain([40e6, 80e6]))


def test_jain_undefined_and_invalid():
    assert jain([]) is None and jain([0, 0]) is None
    with pytest.raises(ValueError):
        jain([1, -1])


# -- shares ----------------------------------------------------------------------------

def test_maxmin_water_filling():
    assert maxmin_shares([70, 70], 100) == [50, 50]
    assert maxmin_shares([30, 90], 100) == [30, 70]            # the small flow is served fully
    assert maxmin_shares([40, 40, 80], 100) == pytest.approx([100 / 3] * 3)
    assert maxmin_shares([10, 40, 80], 100) == [10, 40, 50]
    assert maxmin_shares([10, 20], 100) == [10, 20]            # no congestion
    assert sum(maxmin_shares([5, 60, 70, 80], 100)) == pytest.approx(100)
    with pytest.raises(ValueError):
        maxmin_shares([1, -1], 10)


def test_proportional_shares():
    assert proportional_shares([40, 80], 100) == pytest.approx([100 / 3, 200 / 3])
    assert proportional_shares([10, 20], 100) == [10, 20]


def test_jain_vs_shares_tells_maxmin_from_proportional():
    demands, cap = [10, 90], 50
    prop = proportional_shares(demands, cap)                     # what a FIFO tail drop gives
    mm = maxmin_shares(demands, cap)
    assert prop == pytest.approx([5, 45]) and mm == [10, 40]
    got = prop
    assert jain([x / s for x, s in zip(got, prop)]) == pytest.approx(1.0)
    assert jain([x / s for x, s in zip(got, mm)]) < 0.9
    assert jain(got) < jain(mm)


# -- bottleneck ------------------------------------------------------------------------

def test_payload_capacity_counts_the_l2_headers_tbf_sees():
    # TBF on a veth counts Ethernet 14 + IPv4 20 + UDP 8 + payload (no FCS)
    assert fairness.payload_capacity_bps(50e6, 1400) == pytest.approx(50e6 * 1400 / 1442)
    assert fairness.payload_capacity_bps(100e6, 1422) == pytest.approx(97.13e6, rel=1e-3)


def test_tbf_command_and_burst():
    assert fairness.tbf_command("tpabc-3-0", 100e6, 125000, 50) == [
        "tc", "qdisc", "replace", "dev", "tpabc-3-0", "root", "tbf", "rate", "100000000bit",
        "burst", "125000", "latency", "50ms"]
    assert fairness.tbf_burst_bytes(100e6, 1450) == 125000       # 10 ms at 100 Mbit/s
    assert fairness.tbf_burst_bytes(1e6, 1450) == 14640          # at least 10 frames


def test_labels():
    assert fairness.label((70e6, 70e6)) == "70/70 Mbit/s"
    assert fairness.label((40e6, 40e6, 80e6)) == "40/40/80 Mbit/s"
    assert fairness.label((2.5e6,)) == "2.5 Mbit/s"


# -- sources ---------------------------------------------------------------------------

TB = loads("vswitch: ovs\nnetwork: {type: vxlan}\n")     # h1: same-a, same-b, cross-a; h2: cross-b


def test_pair_sources_share_the_pair_source_vm():
    cross = TB.pair("cross")
    assert fairness.pick_sources(TB, cross, 3) == ["cross-a"] * 3


def test_host_sources_spread_over_the_source_host_keeping_the_placement():
    cross, same = TB.pair("cross"), TB.pair("same")
    got = fairness.pick_sources(TB, cross, 4, "host")
    assert got[0] == "cross-a" and set(got) == {"cross-a", "same-a", "same-b"}
    assert all(TB.vm(v).host == "h1" for v in got)              # cross-b is on h2: still cross-host
    got = fairness.pick_sources(TB, same, 3, "host")
    assert "same-b" not in got and got[0] == "same-a"           # never the receiver itself
    with pytest.raises(ValueError):
        fairness.pick_sources(TB, cross, 2, "everywhere")


def test_receiver_port_is_the_host_side_veth_of_the_receiver():
    from types import SimpleNamespace

    from vnetbench.testbed.netns.deployment import Deployment
    dep = Deployment(SimpleNamespace(run_id="abc123"), TB)
    assert fairness.receiver_port(dep, TB.pair("cross")) == ("h2", "tpabc123-3-0")
    assert fairness.receiver_port(dep, TB.pair("same")) == ("h1", "tpabc123-1-0")


@pytest.mark.parametrize("kw", [dict(settings=[]), dict(settings=[[10e6, 0]]),
                                dict(bottleneck_bps=0), dict(background_bps=-1)])
def test_run_refuses_bad_settings_before_touching_anything(kw):
    with pytest.raises(ValueError):
        fairness.run(None, TB.pair("cross"), **kw)
