"""Every provider network type heat-templates/ offers, made on the all-in-one cloud by
Heat from the parameters the backend computes for the isolation testbed's two vnets
(admin: provider attributes through the Net's value_specs), and read back from Neutron:
the type asked for, VLAN ids as the testbed declares them on the environment file's
physical network, tunnel ids allocated and distinct for the two vnets.

The networks only: a guest pair of each type would be 8 more TCG boots, and the flat
network's pair is booted and measured in test_openstack_cloud. Flat is not among them:
Neutron holds one flat network per physical network and the AIO's one is the shared
vnetbench-flat."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from aio_nodes import kind_of, layout_of, skip_unless_offered

from vnetbench.aio import conf
from vnetbench.functional.tests.test_isolation import TESTBED as ISOLATION   # two vnets, same CIDR
from vnetbench.state import new_run_id
from vnetbench.testbed.loader import loads
from vnetbench.testbed.openstack import builder, stack as st, undo

CLOUD = "vnetbench-aio"
TYPES = [t for t in conf.NETWORK_TYPES if t != "flat"]     # the types ML2/OVN lacks: skipped
NO_GUESTS = {"same_host_pairs": 0, "cross_host_pairs": 0, "unplaced_pairs": 0, "vnet_b_pairs": 0,
             "vm_count": 0, "vm_layout": [], "host_count": 0}


@pytest.mark.parametrize("ntype", TYPES)
def test_provider_networks_of_every_type(conn, aio_cloud, ntype):
    """One stack per type (ML2/OVN: VLAN and Geneve; VXLAN and GRE skipped, not offered)."""
    skip_unless_offered(layout_of(aio_cloud), ntype)
    tb = loads(ISOLATION.format(kind=kind_of(aio_cloud), ntype=ntype), source=f"<{ntype}>", online_cpus=[0, 1])
    rid = new_run_id()
    params = {**st.parameters(tb, rid, st.Options(cloud=CLOUD, flavor="vnetbench-shared"),
                              admin=True, public_key="", owner=True),
              **NO_GUESTS, "key_name": "unused (no guests)"}
    try:
        conn.create_stack(st.stack_name(rid), tags=",".join(st.tags(rid)),
                          template_file=str(st.TEMPLATE), environment_files=[str(st.environment(tb))],
                          rollback=False, wait=False, timeout=300, **params)
        stack = builder.wait_created(conn, st.stack_name(rid), 300)
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs or []}
        nets = [conn.network.get_network(outputs["networks"][v]) for v in ("a", "b")]
        assert [n.provider_network_type for n in nets] == [ntype, ntype], stack.name
        segs = [n.provider_segmentation_id for n in nets]
        if ntype == "vlan":
            assert segs == [v.segmentation_id for v in tb.vnets]
            assert {n.provider_physical_network for n in nets} == {conf.PHYSNET}
        else:       # the cloud allocates a tunnel's id (the testbed's could collide there)
            assert len(set(segs)) == 2 and all(segs), segs
    finally:        # waited for by the backend's own undo
        conn.delete_stack(st.stack_name(rid))
        undo.undo_stack(SimpleNamespace(run_id=rid), {"name": st.stack_name(rid), "cloud": CLOUD},
                        conn=conn)
