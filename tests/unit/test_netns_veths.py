"""The one map of a host's veths and their far ends (``testbed.netns.veths``), and the
users that act on it: the build's offloads, the AF_XDP port choice, a capture's place."""

from types import SimpleNamespace

import pytest

from vnetbench.kinds import ovs as ovs_kind
from vnetbench.kinds.ovs import netns as ovs
from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns import veths
from vnetbench.testbed.netns.context import Context
from vnetbench.testbed.netns.names import Names

TWO_VNETS = """vswitch: ovs
network: {type: %s}
vnets: [{name: red, cidr: 198.19.1.0/24}, {name: blue, cidr: 198.19.2.0/24}]
vms:
  - {name: a, host: h1, vnets: [red, blue]}
  - {name: b, host: h2, vnets: [red]}
  - {name: c, host: h1, vnets: [blue]}
"""


def tb(ntype):
    return loads(TWO_VNETS % ntype, source="<t>", online_cpus=[0, 1])


@pytest.mark.parametrize("ntype", ["flat", "vxlan"])
def test_every_veth_with_its_far_end(ntype):
    n = Names("abc123")
    got = {(v.role, v.name, v.peer_ns, v.peer) for v in veths.host_veths(tb(ntype), n, "h1")}
    want = {("uplink", n.uplink, n.fabric_ns, n.fabric_uplink(0)),
            ("vm", n.vm_port(0, 0), n.vm_ns("a"), n.vm_nic(0)),
            ("vm", n.vm_port(0, 1), n.vm_ns("a"), n.vm_nic(1)),
            ("vm", n.vm_port(2, 0), n.vm_ns("c"), n.vm_nic(0))}
    if ntype == "flat":          # a physnet per vnet on the host, only on a flat network
        want |= {("physnet", n.physnet(0), n.fabric_ns, n.fabric_physnet(0, 0)),
                 ("physnet", n.physnet(1), n.fabric_ns, n.fabric_physnet(0, 1))}
    assert got == want
    assert ovs_kind.veth_ports(tb(ntype), "h1") == len(want)
    h2 = veths.host_veths(tb(ntype), n, "h2")
    assert {v.role for v in h2} == ({"uplink", "vm", "physnet"} if ntype == "flat" else {"uplink", "vm"})


@pytest.mark.parametrize("afxdp", [True, False])
def test_offloads_go_off_on_both_ends(monkeypatch, afxdp):
    """TX checksum off on every host end and VM NIC; with AF_XDP also TX VLAN offload on
    every far end (VM NICs and the fabric's ends); one call per namespace."""
    calls = []
    monkeypatch.setattr(ovs.offloads, "off", lambda ns, devices: calls.append((ns, list(devices))))
    t = tb("flat")
    ctx = Context(SimpleNamespace(run_id="abc123"), t, caps=None)
    ovs.offloads_off(ctx, t.host("h1"), afxdp)
    n = ctx.names
    assert len({ns for ns, _ in calls}) == len(calls)
    by_dev = {(ns, dev): tuple(words) for ns, devices in calls for dev, words in devices if words}
    for v in veths.host_veths(t, n, "h1"):
        assert by_dev[(n.host_ns("h1"), v.name)] == ("tx",)
        far = by_dev.get((v.peer_ns, v.peer))
        if v.role == "vm":
            assert far == ("tx",) + (("txvlan",) if afxdp else ())
        else:
            assert far == (("txvlan",) if afxdp else None)