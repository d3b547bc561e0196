"""The ``ovs`` kind with security groups: the OVSDB rows and OpenFlow pipeline Neutron's
OVS agent leaves for its firewall driver (vnetbench.kinds.ovs.firewall, .pipeline).
The driver's own flows are Neutron's (integration tests run it); these check what the
driver reads and the bridges it filters on."""

import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench.kinds.neutron import sg as neutron_sg
from vnetbench.kinds.ovs import firewall, pipeline
from vnetbench.kinds.ovs import netns as ovs
from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns.context import Context

SG = """
vswitch: ovs
network: {{type: {ntype}}}
{sg}
hosts: [{{name: h1}}, {{name: h2}}, {{name: h3}}]
vnets: [{{name: red, cidr: 198.19.1.0/24}}, {{name: blue, cidr: 198.19.2.0/24}}]
vms:
  - {{name: a, host: h1, vnets: [{{name: red}}, {{name: blue}}]}}
  - {{name: b, host: h2, vnets: [{{name: red}}]}}
  - {{name: c, host: h3, vnets: [{{name: blue}}]}}
"""


def _host(ntype="vxlan", sg="security_groups: []", host=0):
    t = loads(SG.format(ntype=ntype, sg=sg), source="<ovs sg>", online_cpus=[0, 1])
    ctx = Context(SimpleNamespace(run_id="abc123", dir=Path("/run/x")), t, caps=None)
    return ovs.OvsHost(ctx, t.hosts[host]), ctx


def _ports(tx, bridge):
    return [tx[i + 2] for i in range(len(tx) - 2) if tx[i] == "add-port" and tx[i + 1] == bridge]


def test_a_tunnel_network_with_port_security_gets_the_agents_two_bridges():
    o, ctx = _host()
    n = ctx.names
    tx = o._transaction("netdev")
    assert set(_ports(tx, n.ovs_int)) == {n.vm_port(0, 0), n.vm_port(0, 1), n.patch_tun}
    # one tunnel port per peer host sharing a vnet, keyed by flows, on the tunnel bridge
    assert set(_ports(tx, n.ovs_tun)) == {n.patch_int, n.flow_tunnel(1), n.flow_tunnel(2)}
    assert "options:key=flow" in tx and f"options:peer={n.patch_int}" in tx
    assert "fail_mode=secure" in tx


def test_without_port_security_the_bridge_is_the_single_normal_one():
    o, ctx = _host(sg="")
    tx = o._transaction("netdev")
    assert ctx.names.ovs_tun not in tx and "fail_mode=secure" not in tx
    assert any(p.startswith(f"tn{ctx.names.rid}") for p in _ports(tx, ctx.names.ovs_int))


def test_a_vm_port_carries_what_the_driver_reads():
    """get_vif_port_by_id: iface-id (the Neutron port id, the driver's device) and
    attached-mac; get_tag_from_other_config and friends: tag, network_type, segmentation_id."""
    o, ctx = _host()
    tb, tx = ctx.testbed, o._transaction("netdev")
    port = ctx.names.vm_port(0, 1)                       # a's NIC on blue
    start = tx.index(port)
    cols = tx[start:start + 20]
    assert "tag=2" in cols and "other_config:tag=2" in cols
    assert "other_config:network_type=vxlan" in cols
    assert f"other_config:segmentation_id={tb.vnet('blue').segmentation_id}" in cols
    assert f'external_ids:"iface-id"="{neutron_sg.port_id("abc123", "a", 1)}"' in cols
    assert f'external_ids:"attached-mac"="{tb.vm("a").nics[1].mac}"' in cols


def test_a_flat_port_names_its_physical_network_and_no_segment():
    o, ctx = _host("flat")
    cols = o._transaction("netdev")
    assert "other_config:network_type=flat" in cols and f"other_config:physical_network={firewall.PHYSNET}" in cols
    assert not any(c.startswith("other_config:segmentation_id") for c in cols)
    assert ctx.names.ovs_tun not in cols


def test_the_tunnel_bridge_maps_each_network_and_floods_only_to_its_hosts():
    o, ctx = _host()
    n, tb = ctx.names, ctx.testbed
    flows = firewall.flows(ctx, o.host, lambda v: ctx.vnet_index(v.name) + 1)
    tun = flows[n.ovs_tun]
    for vi, vnet in enumerate(tb.vnets):
        seg = vnet.segmentation_id
        peer = n.flow_tunnel(1 if vnet.name == "red" else 2)
        assert (f"table=4,priority=1,tun_id=0x{seg:x},actions=push_vlan:0x8100,"
                f"set_field:{(vi + 1) | 0x1000}->vlan_vid,goto_table:10") in tun
        assert (f"table=22,priority=1,dl_vlan={vi + 1},actions=pop_vlan,"
                f"set_field:0x{seg:x}->tun_id,output:{peer}") in tun
    for p in (n.flow_tunnel(1), n.flow_tunnel(2)):
        assert f"table=0,priority=1,in_port={p},actions=goto_table:4" in tun
    assert "table=60,priority=3,actions=NORMAL" in flows[n.ovs_int]


def test_flat_and_vlan_filter_on_the_single_bridge():
    for ntype in ("flat", "vlan"):
        o, ctx = _host(ntype)
        assert list(firewall.flows(ctx, o.host, lambda v: 1)) == [ctx.names.ovs_int]


def test_an_egress_meter_hands_the_packet_on_to_the_pipeline():
    t = loads("vswitch: ovs\nnetwork: {type: vxlan}\nsecurity_groups: []\nvms:\n"
              "  - {name: q, host: h1, vnets: [{name: vnet1, qos: {max_kbps: 1000, direction: egress}}]}\n",
              source="<ovs sg qos>", online_cpus=[0, 1])
    ctx = Context(SimpleNamespace(run_id="abc123", dir=Path("/run/x")), t, caps=None)
    flows = [c[2] for c in ovs.OvsHost(ctx, t.hosts[0]).egress_commands() if c[0] == "add-flow"]
    assert any("actions=meter:1,goto_table:59" in f for f in flows)


@pytest.mark.skipif(not shutil.which("ovs-ofctl"), reason="ovs-ofctl not installed")
def test_every_pipeline_flow_is_one_ovs_ofctl_accepts():
    """Parsed by ovs-ofctl itself (OpenFlow 1.3), port names replaced by numbers (no
    switch to resolve them)."""
    o, ctx = _host()
    flows = firewall.flows(ctx, o.host, lambda v: ctx.vnet_index(v.name) + 1)
    for flow in [f for fs in flows.values() for f in fs]:
        flow = re.sub(r"\b(in_port=|output:)[a-z]{2}abc123(-\d+)?", r"\g<1>7", flow)
        done = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "parse-flow", flow],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{flow}: {done.stderr}"


def test_pipeline_tables_are_neutrons():
    """The table numbers are neutron_lib's ovs_constants (Zed)."""
    assert (pipeline.TRANSIENT_TABLE, pipeline.PACKET_RATE_LIMIT, pipeline.LEARN_FROM_TUN,
            pipeline.UCAST_TO_TUN, pipeline.FLOOD_TO_TUN) == (60, 59, 10, 20, 22)
    assert pipeline.TUN_TABLE == {"gre": 3, "vxlan": 4, "geneve": 6}
