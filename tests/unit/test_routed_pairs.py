"""Routed pairs (issue 26): a pair whose VMs are on two vnets with a router between them
(``path: l3-east-west``), checked by the loader, labelled in every record, shown as rows
of their own beside the L2 ones, and N/A where a family cannot cross a router."""

import pytest

from vnetbench import errors
from vnetbench.battery import broadcast
from vnetbench.battery.common import labels
from vnetbench.report.table import _row
from vnetbench.results.record import Result
from vnetbench.testbed import loader

ROUTED = """
vswitch: ovs
network: {type: vxlan}
vnets: [{name: blue}, {name: red}, {name: green}]
routers: [{name: r1, vnets: [blue, red]}]
pairs:
  - {placement: cross-host}
  - {placement: cross-host, path: l3-east-west}
"""


class Dep:
    run_id, backend = "abc123", "netns"

    def __init__(self, tb):
        self.testbed = tb


def test_the_second_vm_is_on_the_routers_other_vnet():
    tb = loader.loads(ROUTED)
    l2, ew = tb.pairs
    assert (l2.name, l2.path, l2.peer_vnet) == ("cross", "l2", None)
    assert (ew.name, ew.path, ew.vnet, ew.peer_vnet) == ("cross-ew", "l3-east-west", "blue", "red")
    assert [(tb.vm(v).host, tb.vm(v).nics[0].vnet) for v in ew.vms] == [("h1", "blue"), ("h2", "red")]


@pytest.mark.parametrize("pair,where,says", [
    ("{placement: cross-host, path: l3-east-west, vnet: green}", "pairs[0].path", "vnet 'green' has no router"),
    ("{placement: cross-host, path: l3-east-west, peer_vnet: green}", "pairs[0].peer_vnet",
     "vnet 'green' is not on the router of vnet 'blue'"),
    ("{placement: cross-host, path: l3-east-west, peer_vnet: nope}", "pairs[0].peer_vnet", "'nope' is not declared"),
    ("{placement: cross-host, peer_vnet: red}", "pairs[0].peer_vnet", "applies to path l3-east-west"),
    ("{placement: cross-host, path: l3-west}", "pairs[0].path", "is not allowed"),
])
def test_a_routed_pair_without_its_router_names_the_field(pair, where, says):
    text = ROUTED.split("pairs:")[0] + f"pairs:\n  - {pair}\n"
    with pytest.raises(errors.TestbedFileError) as exc:
        loader.loads(text, source="t.yaml")
    assert str(exc.value).startswith(f"t.yaml: {where}: ") and says in str(exc.value), str(exc.value)


def test_records_and_report_rows_tell_the_paths_apart():
    tb = loader.loads(ROUTED)
    l2, ew = tb.pairs
    assert "path" not in labels(Dep(tb), l2, "icmp_rtt")             # L2 records as before
    assert labels(Dep(tb), ew, "icmp_rtt")["path"] == "l3-east-west"
    rows = [_row(Result("icmp_rtt", labels(Dep(tb), p, "icmp_rtt", mode="flood"), {"rtt_mean_ms": [0.1]}))
            for p in (l2, ew)]
    assert [r.placement for r in rows] == ["cross-host", "cross-host l3-east-west"]


def test_broadcast_across_a_router_is_na_with_the_reason():
    tb = loader.loads(ROUTED)
    out = broadcast.run(Dep(tb), tb.pairs[1], kinds=("arp", "icmp"))
    assert [(r.labels["point"], r.samples) for r in out] == [("arp", {}), ("icmp", {})]
    assert all("does not cross a router" in r.extra["not_applicable"] for r in out)


NORTH_SOUTH = """
vswitch: ovs
network: {type: vxlan}
vnets: [{name: blue}, {name: red}]
routers: [{name: r1, host: h1, vnets: [blue, red], external_gateway: true}]
pairs:
  - {placement: same-host, path: north-south}
  - {placement: cross-host, path: north-south}
"""


class Recorder(Dep):
    def __init__(self, tb):
        super().__init__(tb)
        self.calls = []

    def exec(self, vm, argv, timeout=None):
        self.calls.append((vm, argv))


def test_north_south_pairs_a_vm_with_the_external_host():
    """The VM on the router's host (same-host) or the next one (cross-host); the far end
    is the first external host; the Deployment gives its address like a VM's."""
    from vnetbench.testbed.base import RunDeployment
    tb = loader.loads(NORTH_SOUTH)
    same, cross = tb.pairs
    assert (same.vms, cross.vms) == (("same-ns-a", "outside"), ("cross-ns-a", "outside"))
    assert [tb.vm(p.vms[0]).host for p in tb.pairs] == ["h1", "h2"]
    assert RunDeployment.ip(Dep(tb), "outside") == "198.18.128.1"
    assert RunDeployment.ip(Dep(tb), "same-ns-a") == "198.19.1.1"


@pytest.mark.parametrize("doc,where,says", [
    (NORTH_SOUTH.replace(", external_gateway: true", ""), "pairs[0].path", "no router with an external gateway"),
    (NORTH_SOUTH.replace("placement: same-host, path: north-south", "placement: same-host, path: north-south, "
                         "peer_vnet: red"), "pairs[0].peer_vnet", "applies to path l3-east-west"),
    (NORTH_SOUTH.replace("vswitch: ovs", "vswitch: ovs\nhosts: [{name: h1}]"), "pairs[1].placement",
     "needs a host other than the router's"),
])
def test_a_north_south_pair_without_its_way_out_names_the_field(doc, where, says):
    with pytest.raises(errors.TestbedFileError) as exc:
        loader.loads(doc, source="t.yaml")
    assert str(exc.value).startswith(f"t.yaml: {where}: ") and says in str(exc.value), str(exc.value)


def test_static_arp_pins_the_next_hop_a_vm_really_uses():
    """On one vnet the peer itself; across a router the router's interface on the sender's
    vnet; an external host resolves its own next hop (no VM of the testbed)."""
    from vnetbench.battery.common import static_arp
    tb = loader.loads(ROUTED.replace("routers: [{name: r1, vnets: [blue, red]}]",
                                     "routers: [{name: r1, vnets: [blue, red], external_gateway: true}]")
                      + "  - {placement: same-host, path: north-south}\n")
    dep = Recorder(tb)
    l2, ew, ns = tb.pairs
    for p in (l2, ew, ns):
        static_arp(dep, *p.vms)
    pinned = [(vm, argv[3], argv[5]) for vm, argv in dep.calls]
    r = tb.routers[0]
    assert pinned == [
        ("cross-a", "198.19.1.2", tb.vm("cross-b").nics[0].mac), ("cross-b", "198.19.1.1", tb.vm("cross-a").nics[0].mac),
        ("cross-ew-a", str(r.port("blue").ip), r.port("blue").mac), ("cross-ew-b", str(r.port("red").ip), r.port("red").mac),
        ("same-ns-a", str(r.port("blue").ip), r.port("blue").mac)]


def test_fairness_is_na_towards_an_external_host():
    from vnetbench.battery import fairness
    tb = loader.loads(NORTH_SOUTH)
    (r,) = fairness.run(Dep(tb), tb.pairs[0], settings=[(4e6, 8e6)])
    assert r.test == "udp_fairness" and "external host 'outside'" in r.extra["not_applicable"]
