"""The two placements (seed 004's Figure 1 and Figure 9 with a measured profile) on
table-driven workloads, the per-host prediction, the OpenStack hand-off, and the
planner's property: the network-aware placement never puts a host past its measured
vSwitch capacity -- it places within it or refuses in one line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vnetbench.capacity import openstack, place, planner
from vnetbench.capacity.files import Flow, HostSpec, Hosts, VmSpec, Workload


def role(capacity, points, how="saturated"):
    return {"dataplane_cpus": 1, "capacity_gbps": {"mean": capacity, "how": how},
            "points": [{"load_gbps": {"mean": x}, "cpu_pct": {"mean": y}} for x, y in points]}


#: a userspace vSwitch in the shape this machine measures: a tunnel end costs more than
#: a same-host hop, the sender's end the most
PROFILE = {"vnetbench_capacity": 1, "stable": True, "cells": [{
    "vswitch": "ovs", "network": "vxlan", "tenant_mtu": 1450,
    "roles": {"tx": role(1.0, [(0.5, 30), (1.0, 60)]),
              "rx": role(2.0, [(0.5, 24), (1.0, 47)], "extrapolated"),
              "same": role(3.0, [(1.0, 30), (1.4, 42)], "extrapolated")},
    "new_conn_s": {"same-host": {"mean": 10000}, "cross-host": {"mean": 1000}}}]}


def hosts(n=2, cores=4, memory_mb=16384, network="vxlan", dataplane_cpus=1):
    return Hosts(network, tuple(HostSpec(f"h{i + 1}", cores, memory_mb, "ovs", dataplane_cpus)
                                for i in range(n)))


def workload(vms, flows=()):
    return Workload("t", tuple(VmSpec(n, c, m) for n, c, m in vms),
                    tuple(Flow(a, b, g, g, c) for a, b, g, c in flows))


WEB_DB = workload([("web1", 2, 2048), ("web2", 2, 2048), ("db1", 2, 4096), ("db2", 2, 4096)],
                  [("web1", "db1", 0.6, 0), ("web2", "db2", 0.6, 0)])


def test_agnostic_is_the_seeds_figure_1_next_fit_in_order():
    where = place.agnostic(WEB_DB, hosts())
    assert where == {"web1": "h1", "web2": "h1", "db1": "h2", "db2": "h2"}


def test_the_agnostic_packing_overloads_a_host_the_aware_one_does_not():
    out = planner.plan(WEB_DB, hosts(), PROFILE)
    ag, aw = out["placements"]["agnostic"], out["placements"]["aware"]
    assert ag["overloaded"] == ["h1"]
    h1 = ag["hosts"][0]
    assert h1["gbps"] == {"tx": 1.2} and h1["overloaded_pct"] == pytest.approx(20.0)
    assert aw["overloaded"] == []
    # the heavy pairs share a host: a same-host hop costs less than a tunnel's two ends
    assert aw["where"]["web1"] == aw["where"]["db1"] and aw["where"]["web2"] == aw["where"]["db2"]
    assert all(r["gbps"] == {"same": 0.6} for r in aw["hosts"])


def test_overload_is_quantified_and_the_delivered_share_follows_equation_3():
    w = workload([("a", 2, 1024), ("b", 2, 1024), ("c", 2, 1024), ("d", 2, 1024)],
                 [("a", "c", 0.75, 0), ("b", "d", 0.75, 0)])
    out = planner.plan(w, hosts(), PROFILE)
    ag = out["placements"]["agnostic"]
    h1 = next(r for r in ag["hosts"] if r["host"] == "h1")
    assert h1["gbps"] == {"tx": 1.5} and h1["utilisation"] == pytest.approx(1.5)
    assert h1["overloaded_pct"] == pytest.approx(50.0)
    assert h1["delivered_gbps"] == pytest.approx(1.0)          # min(offered, capacity)
    assert h1["cpu_pct"] == pytest.approx(60.0)                # the CPU of what it carries
    assert ag["delivered_gbps"] == pytest.approx(1.0)
    assert "overloads h1 by 50%" in "\n".join(out["summary"])


def test_both_agree_when_traffic_does_not_matter():
    w = workload([("a", 1, 1024), ("b", 1, 1024)], [("a", "b", 0.1, 0)])
    out = planner.plan(w, hosts(), PROFILE)
    assert out["placements"]["agnostic"]["where"] == out["placements"]["aware"]["where"] == {"a": "h1", "b": "h1"}


def test_aware_moves_a_pair_off_a_host_whose_vswitch_would_saturate():
    # both pairs fit h1's cores, but 4 Gbit/s through its same-host path is past its 3.0
    w = workload([("a", 1, 1024), ("b", 1, 1024), ("c", 1, 1024), ("d", 1, 1024)],
                 [("a", "b", 2.0, 0), ("c", "d", 2.0, 0)])
    where = place.aware(w, hosts(cores=8), place.Model(PROFILE, hosts(cores=8)))
    assert where == {"a": "h1", "b": "h1", "c": "h2", "d": "h2"}
    assert place.agnostic(w, hosts(cores=8)) == {v: "h1" for v in "abcd"}
    # one host: no placement within its capacity, refused with the flow and the reason
    with pytest.raises(place.PlanInfeasible, match=r"flow c -> d \(2 Gbit/s\) fits no host: 1 host\(s\) "
                       r"have the cores and memory, but .* measured vSwitch capacity"):
        place.aware(w, hosts(1, cores=8), place.Model(PROFILE, hosts(1, cores=8)))


def test_aware_splits_pairs_over_hosts_when_cores_force_it_and_capacity_allows():
    w = workload([("a", 2, 1024), ("b", 2, 1024), ("c", 2, 1024), ("d", 2, 1024)],
                 [("a", "b", 0.4, 0), ("c", "d", 0.4, 0)])
    where = place.aware(w, hosts(), place.Model(PROFILE, hosts()))
    assert where["a"] == where["b"] != where["c"] == where["d"]


def test_infeasible_cores_are_one_clear_line():
    w = workload([("big", 8, 1024)])
    with pytest.raises(place.PlanInfeasible, match="VM big .* fits on no host"):
        place.agnostic(w, hosts())
    out = planner.plan(w, hosts(), PROFILE)
    assert "infeasible" in out["placements"]["aware"] and "\n" not in out["placements"]["aware"]["infeasible"]


def test_a_peak_no_vswitch_carries_is_refused_before_placing():
    w = Workload("t", (VmSpec("a", 1, 1), VmSpec("b", 1, 1)), (Flow("a", "b", 0.5, 9.0),))
    with pytest.raises(place.PlanInfeasible, match="peaks at 9 Gbit/s"):
        place.aware(w, hosts(), place.Model(PROFILE, hosts()))


def test_new_connections_are_a_capacity_too():
    w = workload([("a", 2, 1024), ("b", 2, 1024), ("c", 2, 1024), ("d", 2, 1024)],
                 [("a", "c", 0.01, 800), ("b", "d", 0.01, 800)])
    out = planner.plan(w, hosts(), PROFILE)
    h1 = out["placements"]["agnostic"]["hosts"][0]
    assert h1["conn_utilisation"] == pytest.approx(1.6) and h1["overloaded_pct"] == pytest.approx(60)
    assert out["placements"]["aware"]["overloaded"] == []


def test_a_kind_or_role_the_profile_lacks_is_named():
    other = Hosts("vxlan", (HostSpec("h1", 4, 4096, "linuxbridge"),))
    with pytest.raises(place.PlanInfeasible, match="no cell for linuxbridge/vxlan .*it has ovs/vxlan"):
        place.Model(PROFILE, other)
    no_same = {**PROFILE, "cells": [{**PROFILE["cells"][0], "roles": {"tx": PROFILE["cells"][0]["roles"]["tx"]}}]}
    w = workload([("a", 1, 1024), ("b", 1, 1024)], [("a", "b", 0.1, 0)])
    with pytest.raises(place.PlanInfeasible, match="no 'same' role .*double_room"):
        place.predict(w, hosts(), place.Model(no_same, hosts()), {"a": "h1", "b": "h1"})


def test_cpu_curve_interpolates_through_the_origin_and_extends_at_the_last_cost():
    c = place.Curve(role(1.0, [(0.5, 30), (1.0, 60)]))
    assert c.cpu(0) == 0 and c.cpu(0.25) == pytest.approx(15) and c.cpu(0.75) == pytest.approx(45)
    assert c.cpu(2.0) == pytest.approx(120)


def test_more_dataplane_cpus_scale_the_capacity():
    w = workload([("a", 2, 1024), ("b", 2, 1024), ("c", 2, 1024), ("d", 2, 1024)],
                 [("a", "c", 0.75, 0), ("b", "d", 0.75, 0)])
    out = planner.plan(w, hosts(dataplane_cpus=2), PROFILE)
    assert out["placements"]["agnostic"]["overloaded"] == []


@pytest.mark.parametrize("fmt", planner.FORMATS)
def test_every_format_renders(fmt):
    text = planner.render(planner.plan(WEB_DB, hosts(), PROFILE), fmt)
    assert "h1" in text
    if fmt == "html":
        assert "<svg" in text and "measured vSwitch capacity" in text
    if fmt == "md":
        assert "| host |" in text


def test_openstack_handoff_physnet_and_tunnelled():
    prof = {**PROFILE, "cells": [{**PROFILE["cells"][0], "network": "vlan"}]}
    out = openstack.handoff(prof, hosts(network="vlan"), WEB_DB)
    h1 = out["hosts"][0]
    assert h1["ovs_agent"]["ovs"][0] == "resource_provider_bandwidths = br-data:1000000:2000000"
    # 1 Gbit/s of 1464-byte frames
    assert h1["ovs_agent"]["ovs"][1] == "resource_provider_packet_processing_without_direction = h1:85"
    web1 = next(p for p in out["ports"] if p["vm"] == "web1")["commands"]
    assert "--type minimum-bandwidth --min-kbps 600000 --egress vnb-min-web1" in web1[1]
    tunnelled = openstack.handoff(PROFILE, hosts(), WEB_DB)
    assert not any("resource_provider_bandwidths" in line for h in tunnelled["hosts"]
                   for line in h["ovs_agent"]["ovs"])
    assert "tunnelled" in tunnelled["notes"][0]
    assert "minimum-packet-rate" in openstack.render(tunnelled)


FLOWS = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.floats(0.0, 1.2),
                           st.sampled_from([0, 0, 100, 600])), max_size=10)


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(256, 8192)), min_size=1, max_size=8),
       FLOWS, st.integers(1, 4))
def test_aware_never_exceeds_a_hosts_measured_capacity(vms, flows, n_hosts):
    names = [f"v{i}" for i in range(len(vms))]
    seen, fl = set(), []
    for a, b, g, c in flows:
        a, b = a % len(names), b % len(names)
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            fl.append((names[a], names[b], g, c))
    w = workload([(n, c, m) for n, (c, m) in zip(names, vms)], fl)
    hs = hosts(n_hosts)
    model = place.Model(PROFILE, hs)
    try:
        where = place.aware(w, hs, model)
    except place.PlanInfeasible as exc:
        assert "\n" not in str(exc) and str(exc).startswith("network-aware placement: ")
        return
    assert set(where) == set(names)
    for r in place.predict(w, hs, model, where):
        assert r["utilisation"] <= 1 + 1e-6 and (r["conn_utilisation"] or 0) <= 1 + 1e-6
        assert r["cores"][0] <= r["cores"][1] and r["memory_mb"][0] <= r["memory_mb"][1]


def test_verify_errors_are_computed_from_the_figures_as_reported():
    from vnetbench.capacity import verify
    predicted = [{"host": "h1", "delivered_gbps": 0.5, "cpu_pct": 57.06, "overloaded_pct": 0.0}]
    measured = {"hosts": {"h1": {"gbps": {"same": 0.49995}, "cpu_pct": 51.6149}}}
    (r,) = verify.compare(predicted, measured)
    assert r["measured_cpu_pct"] == 51.61
    assert r["cpu_error_pct"] == round(100 * (51.61 - 57.06) / 57.06, 1) == -9.6
    assert r["cpu_within"] and r["gbps_within"] and r["gbps_error_pct"] == -0.0
