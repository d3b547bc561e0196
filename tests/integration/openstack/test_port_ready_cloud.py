"""port_ready on the all-in-one cloud (issue 48): ports without a VM, made through Neutron
(binding:host_id: the testbed host's compute node) and plugged on that node as os-vif
would (testbed/openstack/ports.py), against a pair of Nova guests, one per node: every
new port ACTIVE in Neutron and answering its peer on the other node within the deadline,
every stage recorded with ordered percentiles; after the family, none of its ports is
left in Neutron, on the nodes' bridges or as a namespace."""

from __future__ import annotations

import pytest
from pyroute2 import netns

from aio_nodes import kind_of, layout_of, tenant_type
from aio_testbed import up_on_the_aio
from vnetbench.battery import portready
from vnetbench.testbed.openstack import ports

TESTBED = """
vswitch: {kind}
network: {{type: {net}}}
vms:
  - {{name: a, host: h1, vnets: [vnet1]}}
  - {{name: b, host: h2, vnets: [vnet1]}}
"""
DEADLINE_MS = 60_000        # a Neutron port's ACTIVE on two busy CPUs: seconds, not a minute


@pytest.fixture(scope="module")
def pair(aio_cloud, tmp_path_factory):
    lay = layout_of(aio_cloud)
    if lay.computes < 2:
        pytest.skip("the session's AIO has one compute node: the probe's peer must be on another")
    text = TESTBED.format(kind=kind_of(aio_cloud), net=tenant_type(lay))
    with up_on_the_aio(aio_cloud, tmp_path_factory.mktemp("port-ready-cloud"), text,
                       "--mgmt-network", "vnetbench-flat") as (dep, _):
        yield dep


def test_new_ports_become_active_and_answer_across_the_nodes(pair, conn):
    dep = pair
    results = portready.run(dep, ports=6, steps=2, concurrency=3, deadline_ms=DEADLINE_MS)
    assert [r.extra["existing_ports"] for r in results] == [2, 8]
    for r in results:
        m = {k: v[0] for k, v in r.samples.items()}
        assert m["ports"] == 6 and m["not_ready"] == 0, r.extra["never_ready"]
        for stage in ("requested", "programmed", "first_packet"):
            qs = [m[f"{stage}_{q}_ms"] for q in ("min", "p50", "p95", "p99", "max")]
            assert all(q is not None for q in qs) and qs == sorted(qs), (stage, qs)
        assert {t["host"] for t in r.extra["timelines"]} == {"h1", "h2"}
        print(f"port_ready on the cloud, {r.extra['existing_ports']} existing: requested p50 "
              f"{m['requested_p50_ms']:.0f} ms, ACTIVE p50 {m['programmed_p50_ms']:.0f} / max "
              f"{m['programmed_max_ms']:.0f} ms, first packet p50 {m['first_packet_p50_ms']:.0f} / max "
              f"{m['first_packet_max_ms']:.0f} ms")
    assert list(conn.network.ports(device_owner=ports.DEVICE_OWNER)) == []
    assert [n for n in netns.listnetns() if n.startswith(f"vnb-{dep.run_id}-p-")] == []
    assert dep.added_ports() == {}
