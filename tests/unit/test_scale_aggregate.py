"""A scale step's aggregate from per-pair results, and the saturation point on synthetic
curves: a plateau with the host's CPU at its ceiling, a steady rise, a plateau with CPU
to spare, and noise."""

import pytest

from vnetbench.scale import aggregate


def pairs(*gbps, failed=()):
    out = [{"pair": f"p{i + 1}", "ok": True, "gbps": g, "loss_pct": 0.0, "rtt_ms": [0.1 * (i + 1)] * 10}
           for i, g in enumerate(gbps)]
    out += [{"pair": name, "ok": False, "error": why} for name, why in failed]
    return out


def test_the_aggregate_is_the_sum_of_the_pairs_that_ran_and_failures_are_named():
    s = aggregate.step(pairs(1.0, 2.0, 3.0, 4.0, failed=[("p9", "iperf3 server gone")]), "gbps")
    assert s["sum"] == 10.0 and s["ran"] == 4 and s["pairs"] == 5
    assert s["failed"] == [{"pair": "p9", "error": "iperf3 server gone"}]
    assert (s["min"], s["p5"], s["p50"], s["p95"]) == (1.0, 1.0, 2.0, 4.0)
    assert s["jain"] == pytest.approx(100 / (4 * 30))
    assert s["rtt_p50_ms"] == pytest.approx(0.2) and s["rtt_p99_ms"] == pytest.approx(0.4)
    assert s["echoes"] == 40


def test_a_step_where_nothing_ran_has_no_sum_not_zero():
    s = aggregate.step(pairs(failed=[("p1", "x"), ("p2", "y")]), "gbps")
    assert s["sum"] is None and s["ran"] == 0 and len(s["failed"]) == 2 and s["jain"] is None


def steps(sums, cpu, cpus=1):
    return [{"pairs": n, "sum": s, "hosts": {"h1": {"dataplane_pct": c, "cpus": cpus},
                                             "h2": {"dataplane_pct": c / 3, "cpus": cpus}}}
            for n, s, c in zip((1, 2, 4, 8), sums, cpu)]


def test_a_plateau_at_the_hosts_cpu_ceiling_is_its_saturation_point():
    sat = aggregate.saturation(steps([1.0, 1.9, 2.0, 2.05], [50, 85, 97, 99]))
    assert sat["h1"]["step"] == 2 and "4 pairs gave 105% of the aggregate of 2" in sat["h1"]["why"]
    assert sat["h2"]["step"] is None and "not this host's vSwitch" in sat["h2"]["why"]


def test_a_steady_rise_never_saturates():
    sat = aggregate.saturation(steps([1.0, 2.0, 3.9, 7.5], [20, 40, 80, 99]))
    assert sat["h1"]["step"] is None and sat["h2"]["step"] is None


def test_noise_below_the_ceiling_is_not_saturation_and_two_cpus_raise_the_ceiling():
    sat = aggregate.saturation(steps([1.0, 1.05, 0.98, 1.02], [95, 96, 97, 96], cpus=2))
    assert sat["h1"]["step"] is None and sat["h1"]["plateau"] == 1      # named, not a saturation
    assert "stopped growing after 1 pairs while h1's data plane used 96% of its 2 CPU(s)" in sat["h1"]["why"]
    sat = aggregate.saturation(steps([1.0, 1.05, 0.98, 1.02], [185, 190, 195, 196], cpus=2))
    assert sat["h1"]["step"] == 1


def test_a_host_busy_with_guests_saturates_when_its_data_plane_took_most_of_it():
    """One CPU shared by the VMs and the vSwitch: the data plane never reaches 90%, but the
    CPU is full and the data plane took at least half of it (the emulation-bound rule)."""
    curve = [{"pairs": n, "sum": s, "hosts": {"h1": {"dataplane_pct": dp, "busy_pct": 99, "cpus": 1}}}
             for n, s, dp in ((1, 0.79, 56), (2, 0.68, 48), (4, 0.63, 34))]
    assert aggregate.saturation(curve)["h1"]["step"] is None          # 48% < half of 99% at 2 pairs
    curve[1]["hosts"]["h1"]["dataplane_pct"] = 60
    sat = aggregate.saturation(curve)["h1"]
    assert sat["step"] == 1 and "used 60% of its 1 CPU(s), 99% busy in all" in sat["why"]


def test_a_cloud_node_whose_cpus_are_unknown_is_never_called_saturated():
    """A cloud's compute node (CPU from Prometheus, its CPU count the cloud's): a plateau is
    named, with no ceiling claimed."""
    sat = aggregate.saturation(steps([1.0, 1.9, 2.0, 2.05], [50, 85, 97, 99], cpus=None))
    assert sat["h1"]["step"] is None
    assert "no ceiling known" in sat["h1"]["why"] and "stopped growing after 2 pairs" in sat["h1"]["why"]
