"""Seed 000's inter-VLAN testbeds as routers (``routing: svi | stick``): the model, the
loader's one-line refusals, which kinds realise them and why the others cannot, and what
the ``ovs`` kind writes into OVSDB for each (the integration test pings across them)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench import errors
from vnetbench.kinds.ovs import netns as ovs
from vnetbench.testbed import codec
from vnetbench.testbed.capabilities import Capabilities
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import STICK, SVI
from vnetbench.testbed.netns import veths
from vnetbench.testbed.netns.context import Context

SEED000 = """
vswitch: {kind}
network: {{type: {ntype}}}
hosts: [{{name: sw}}, {{name: h2}}]
vnets: [{{name: vlan10, segmentation_id: 10}}, {{name: vlan20, segmentation_id: 20}}]
vms:
  - {{name: pc1, host: sw, vnets: [vlan10]}}
  - {{name: pc2, host: h2, vnets: [vlan10]}}
  - {{name: pc3, host: h2, vnets: [vlan20]}}
routers:
  - {{name: r, host: {rhost}, vnets: [vlan10, vlan20], routing: {routing}{extra}}}
"""


def _tb(routing, kind="ovs", ntype="vlan", rhost="sw", extra=""):
    return loads(SEED000.format(kind=kind, ntype=ntype, routing=routing, rhost=rhost, extra=extra),
                 source="seed000.yaml", online_cpus=[0, 1])


def _caps(vlan_missing=None):
    return Capabilities(root=True, binaries={}, links={"vlan": vlan_missing}, ovs_kernel=False,
                        ovs_version="3.1")


def test_a_router_on_a_stick_is_a_namespace_and_an_svi_is_its_host():
    stick, svi = _tb(STICK), _tb(SVI)
    assert [v.name for v in stick.attached] == ["pc1", "pc2", "pc3", "r"]
    assert [v.name for v in svi.attached] == ["pc1", "pc2", "pc3"]
    # the L3 switch carries both VLANs on its host though no VM there is on vlan20
    assert [v.name for v in svi.vnets_on("sw")] == ["vlan10", "vlan20"]
    assert svi.routers[0].port("vlan20").ip.exploded == "198.19.2.254"   # the vnet's last address
    assert _tb("router").routers[0].routing == "router"


@pytest.mark.parametrize("routing", [SVI, STICK])
def test_the_routing_survives_the_state_file(routing):
    tb = _tb(routing)
    assert codec.from_dict(codec.to_dict(tb)) == tb


@pytest.mark.parametrize("routing", [SVI, STICK])
def test_an_external_gateway_on_a_seed000_router_is_refused_naming_the_field(routing):
    with pytest.raises(errors.TestbedFileError) as e:
        _tb(routing, extra=", external_gateway: true")
    assert "routers[0].external_gateway" in str(e.value) and f"routing: {routing}" in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unknown_routing_is_refused_by_the_schema():
    with pytest.raises(errors.TestbedFileError) as e:
        _tb("l3switch")
    assert "routers[0].routing" in str(e.value) or "routing" in str(e.value)


@pytest.mark.parametrize("kind,ntype,routing,refused", [
    ("ovs", "vlan", SVI, None), ("ovs", "vlan", STICK, None), ("ovs", "vxlan", STICK, None),
    ("linuxbridge", "vxlan", SVI, None),
    ("linuxbridge", "vxlan", STICK, "CONFIG_VLAN_8021Q"),
    ("ovn", "geneve", SVI, "not realised on ovn"), ("ovs-openflow", "vxlan", STICK, "not realised on ovs-openflow"),
    ("vrouter", "gre", SVI, "not realised on vrouter"), ("faucet", "vlan", SVI, None),
    ("faucet", "vlan", STICK, "not realised on faucet"),
])
def test_which_kinds_realise_which_testbed(kind, ntype, routing, refused):
    why = _caps("Operation not supported").why_not_routers(_tb(routing, kind=kind, ntype=ntype))
    if refused is None:
        assert why is None
    else:
        assert refused in why and "\n" not in why


def _ovs(tb, host=0):
    ctx = Context(SimpleNamespace(run_id="abc123", dir=Path("/run/x")), tb, caps=None)
    return ovs.OvsHost(ctx, tb.hosts[host]), ctx


def _ports(tx, bridge):
    return {tx[i + 2]: tx[i + 3] for i in range(len(tx) - 3) if tx[i] == "add-port" and tx[i + 1] == bridge}


def test_ovs_svi_is_an_internal_port_per_vlan_on_the_integration_bridge():
    """The seed's Figure 4: ``add-port SW vlanN tag=N -- set interface vlanN type=internal``."""
    o, ctx = _ovs(_tb(SVI))
    n, tx = ctx.names, o._transaction("netdev")
    ports = _ports(tx, n.ovs_int)
    assert ports[n.svi(0, 0)] == "tag=10" and ports[n.svi(0, 1)] == "tag=20"
    i = next(i for i in range(len(tx)) if tx[i:i + 3] == ["set", "Interface", n.svi(0, 1)])
    assert tx[i + 3:i + 5] == ["type=internal", f'mac="{_tb(SVI).routers[0].ports[1].mac}"']
    h2, _ = _ovs(_tb(SVI), host=1)
    assert not [p for p in _ports(h2._transaction("netdev"), n.ovs_int) if p.startswith("sv")]


def test_ovs_stick_is_a_trunk_port_whose_far_end_a_bridge_splits_per_tag():
    """The seed's Figure 8 (``trunks=10,20``); the router's subinterfaces, which this kernel
    cannot make (no 802.1q), are access ports of a bridge behind the trunk's far end."""
    tb = _tb(STICK)
    o, ctx = _ovs(tb)
    n, tx = ctx.names, o._transaction("netdev")
    assert _ports(tx, n.ovs_int)[n.trunk(0)] == "trunks=10,20"
    stick = _ports(tx, n.stick_bridge(0))
    r = [v.name for v in tb.attached].index("r")
    assert stick == {n.trunk_nic(0): "trunks=10,20", n.vm_port(r, 0): "tag=10", n.vm_port(r, 1): "tag=20"}
    assert tx.index(n.stick_bridge(0)) < tx.index(n.vm_port(r, 0))       # the bridge before its ports
    assert n.vm_port(r, 0) not in _ports(tx, n.ovs_int)


def test_the_trunk_is_a_veth_of_the_routers_host_with_both_ends_there():
    tb = _tb(STICK)
    n = Context(SimpleNamespace(run_id="abc123", dir=Path("/run/x")), tb, caps=None).names
    (trunk,) = [v for v in veths.host_veths(tb, n, "sw") if v.role == veths.TRUNK]
    assert (trunk.name, trunk.peer_ns, trunk.peer) == (n.trunk(0), n.host_ns("sw"), n.trunk_nic(0))
    assert not [v for v in veths.host_veths(tb, n, "h2") if v.role == veths.TRUNK]


def test_a_seed000_router_keeps_its_interfaces():
    """Removing an interface is Neutron's API on its own router; an L3 switch or a router
    on a stick is refused before anything is journaled."""
    from vnetbench.errors import UnsupportedError
    from vnetbench.testbed.netns.deployment import Deployment as NetnsDeployment
    tb = _tb(SVI)
    run = SimpleNamespace(run_id="abc123", dir=Path("/nonexistent"),
                          record=lambda *a, **k: pytest.fail("journaled a refused change"))
    dep = NetnsDeployment.__new__(NetnsDeployment)
    dep.run, dep.testbed = run, tb
    with pytest.raises(UnsupportedError, match="routing: svi"):
        dep.remove_router_interface("r", "vlan10")


# --- pairs of declared VMs (the seed's PCs) -------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/seed000-stick.yaml"


def test_the_seed000_pairs_are_its_own_pcs():
    from vnetbench.testbed.loader import load
    intra, inter = load(EXAMPLE, online_cpus=[0, 1]).pairs
    assert (intra.vms, intra.path, intra.vnet) == (("pc1", "pc2"), "l2", "vlan10")
    assert (inter.vms, inter.path, inter.peer_vnet) == (("pc1", "pc3"), "l3-east-west", "vlan20")


@pytest.mark.parametrize("pair,field,says", [
    ("vms: [pc1, pc9]", "pairs[0].vms", "'pc9' is not declared"),
    ("vms: [pc1, pc1]", "pairs[0].vms", "with itself"),
    ("vms: [pc1, pc3], path: l2", "pairs[0].path", "meet on path l3-east-west"),
    ("vms: [pc1, pc2], placement: cross-host", "pairs[0].placement", "are same-host"),
    ("vms: [pc1, pc2], hosts: [sw]", "pairs[0].hosts", "taken from the declared VMs"),
    ("vms: [pc1, pc2], peer_vnet: vlan20", "pairs[0].peer_vnet", "taken from the declared VMs"),
    ("vms: [pc1, pc2], vnet: vlan20", "pairs[0].vnet", "no NIC on vnet 'vlan20'"),
    ("vms: [pc1, pc2], path: north-south", "pairs[0].vms", "applies to paths l2 and l3-east-west"),
])
def test_a_pair_of_declared_vms_that_does_not_fit_names_the_field(pair, field, says):
    text = EXAMPLE.read_text().split("pairs:")[0]
    text += "pairs:\n  - {" + ("" if "placement" in pair else "placement: same-host, ") + pair + "}\n"
    with pytest.raises(errors.TestbedFileError) as e:
        loads(text, source="t.yaml")
    assert f"t.yaml: {field}: " in str(e.value) and says in str(e.value) and "\n" not in str(e.value)


# --- seed 000's CBR background ---------------------------------------------------------

def test_seed000_background_crosses_the_trunk_behind_a_stick_and_is_every_pc_to_every_other_on_svi():
    from vnetbench.battery.udp import background_flows
    from vnetbench.testbed.loader import load
    stick = load(EXAMPLE, online_cpus=[0, 1])
    inter = stick.pairs[1]
    # the seed's 4.2.2: PC1 -> PC4, PC2 -> PC3, PC3 -> PC1, PC4 -> PC2
    assert background_flows(stick, inter, "seed000") == [("pc1", "pc4"), ("pc2", "pc3"), ("pc3", "pc1"),
                                                         ("pc4", "pc2")]
    svi = load(EXAMPLE.with_name("seed000-svi.yaml"), online_cpus=[0, 1])
    flows = background_flows(svi, svi.pairs[1], "seed000")    # 4.2.1: each PC to the other three
    assert len(flows) == 12 and len(set(flows)) == 12 and all(s != d for s, d in flows)
    assert background_flows(svi, inter, "pair") == [("pc1", "pc3")]


def test_seed000_background_needs_the_seeds_two_vlans_behind_one_router():
    from vnetbench.battery.udp import background_flows
    from vnetbench.testbed.loader import load
    routed = load(EXAMPLE.parents[0] / "routed-two-subnets.yaml", online_cpus=[0, 1])
    plain = load(EXAMPLE.parents[0] / "ovs-vxlan.yaml", online_cpus=[0, 1])
    with pytest.raises(ValueError, match="on a router between two vnets"):
        background_flows(plain, plain.pairs[0], "seed000")
    with pytest.raises(ValueError, match="one of pair, seed000"):
        background_flows(routed, plain.pairs[0], "cbr")


def test_rallys_metrics_table_keeps_a_routed_pairs_rows_apart():
    """Two pairs on one placement (seed 000's pc1 -> pc2 and pc1 -> pc3): the routed one's
    rows carry its path, so Rally does not merge them into one statistic."""
    from vnetbench.rally_plugins import charts
    from vnetbench.results.record import Result
    mk = lambda **path: Result("udp_stream", {"placement": "same-host", "point": "p=1", **path},  # noqa: E731
                               {"loss_pct": [0.0]})
    rows = charts.metrics_table([mk(), mk(path="l3-east-west")], ["loss_pct"])["data"]
    assert [name for name, _ in rows] == ["same-host p=1 loss_pct", "same-host l3-east-west p=1 loss_pct"]
    table = charts.results_table("t", [mk(), mk(path="l3-east-west")], ["loss_pct"])["data"]
    assert [row[:3] for row in table["rows"]] == [["same-host", "l2", "p=1"], ["same-host", "l3-east-west", "p=1"]]
