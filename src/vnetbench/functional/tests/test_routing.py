"""Routed tenant networks (issue 26): east-west through a router, north-south through a
floating IP and SNAT, and what removing a router interface does to traffic through it.
A kind that does not realise routers yet is refused at build time (N/A, the reason); one
that routes east-west only (``Kind.no_north_south``; none today) is built without the gateway
and the floating IP, and its floating-IP row is N/A with that reason.

blue-1 (h1) and blue-2 (h2) on blue, red-1 (h2) on red; router r1 on h1 joins blue and
red and has a gateway on the external network, where the external host 'outside' is;
red-1 has a floating IP. blue-1 -> red-1 crosses the tunnel to h1's router and back (on a
kind whose every host routes, vrouter, h1's own vRouter routes it: one tunnel; its
north-south crosses the SDN gateway in h1's vRouter, red-1's floating IP NAT'd in h2's).
"""

import pytest

from vnetbench import kinds
from vnetbench.functional import measure, verdict
from vnetbench.functional.plugin import deployment

TESTBED = """
vswitch: {kind}
network: {{type: {ntype}}}
vnets: [{{name: blue, cidr: 198.19.1.0/24}}, {{name: red, cidr: 198.19.2.0/24}}]
vms:
  - {{name: blue-1, host: h1, vnets: [blue]}}
  - {{name: blue-2, host: h2, vnets: [blue]}}
  - {{name: red-1, host: h2, vnets: [red]}}
routers:
  - {{name: r1, host: h1, vnets: [blue, red], external_gateway: true}}
floating_ips:
  - {{vm: red-1}}
"""
PER_KIND = True      # routing does not depend on the encapsulation
EAST_WEST = TESTBED.replace(", external_gateway: true", "").split("floating_ips")[0]


@pytest.fixture(scope="module")
def dep(combo, caps, target):
    """The testbed, without its north-south part where the kind routes east-west only."""
    text = EAST_WEST if kinds.get(combo[0].value).no_north_south else TESTBED
    with deployment(combo, caps, text, "routing", target) as d:
        yield d


# --quick measures the routing rows on one kind: tests/integration/test_routers.py checks
# every kind that routes (TTL, floating IP, SNAT, Neutron's NAT, an interface removed)
@pytest.mark.quick_one_kind
@pytest.mark.row("routing.east-west")
def test_east_west_crosses_one_router(dep, record):
    m = {"routed": measure.ttl_ping(dep, "blue-1", dep.ip("red-1")),
         "switched": measure.ttl_ping(dep, "blue-1", dep.ip("blue-2"))}
    record(verdict.routed(m), m)


@pytest.mark.quick_one_kind
@pytest.mark.row("routing.floating-ip")
def test_floating_ip_in_and_snat_out(dep, record):
    tb = dep.testbed
    if not tb.floating_ips:
        return record(verdict.na(kinds.of(tb).no_north_south))
    outside, router, fip = tb.external_hosts[0], tb.routers[0], tb.floating_ips[0]
    m = {"inbound": measure.ping_once(dep, outside.name, str(fip.ip), count=3),
         "fixed": measure.ping_once(dep, outside.name, dep.ip("red-1"), count=1),
         "seen": measure.sources_seen(dep, outside.name, str(outside.ip), ["blue-1", "red-1"]),
         "expected": {"blue-1": str(router.gateway), "red-1": str(fip.ip)}}
    record(verdict.floating_ip(m), m)


@pytest.mark.quick_one_kind
@pytest.mark.row("routing.interface-removed")
def test_removing_the_interface_stops_routed_traffic(dep, record):
    """Last in the module: r1's interface on blue goes (red's holds a floating IP: Neutron
    would refuse) while red-1 streams probes to blue-2, through h1's router."""
    # guests get a longer window after the change (a cloud's API call takes a second or
    # more, and the verdict needs 1.5 s of probes after it), as deprovisioning does
    after_s = 8.0 if measure.native(dep) else 2.5
    m = measure.probes_around(dep, "red-1", "blue-2", lambda: dep.remove_router_interface("r1", "blue"),
                              after_s=after_s)
    m.update(change="the router interface was removed", control="blue's own switching",
             **measure.pings_at_once(dep, new_ping=("red-1", dep.ip("blue-2")),
                                     other_vnet_ping=("blue-1", dep.ip("blue-2"))))
    record(verdict.deprovision(m), m)
