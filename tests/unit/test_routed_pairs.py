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
