"""The management network of SDN kinds: a controller namespace joined to every
emulated host by its own veth, apart from the tenant underlay.

Controllers (OVN's databases, an OpenFlow controller, a control node) listen on
the controller's management address; hosts reach it over their ``mg<run>``
interface. Because each host has its own link into the controller's bridge, a
partition fault can cut one host's control plane (link down) while its tenant
traffic keeps the underlay.
"""

from __future__ import annotations

import ipaddress

from vnetbench.errors import BuildError
from vnetbench import kinds
from vnetbench.linux import links, nsops
from vnetbench.testbed.model import Testbed

# Candidate management networks (RFC 2544 range); the first that the underlay
# does not overlap is used. Tenant CIDRs live only in VM namespaces: no clash.
CANDIDATES = ("198.19.255.0/24", "198.18.255.0/24")
MGMT_MTU = 1500


def needed(testbed: Testbed) -> bool:
    """The kind's control plane lives in the controller namespace."""
    return kinds.of(testbed).controlled


def cidr(testbed: Testbed) -> ipaddress.IPv4Network:
    for text in CANDIDATES:
        net = ipaddress.IPv4Network(text)
        if not net.overlaps(testbed.network.underlay_cidr):
            return net
    raise AssertionError("the candidate management networks cannot both overlap one underlay")


def controller_ip(testbed: Testbed) -> ipaddress.IPv4Address:
    return cidr(testbed).network_address + 1


def host_ip(testbed: Testbed, host_i: int) -> ipaddress.IPv4Address:
    return cidr(testbed).network_address + 2 + host_i


def build(ctx) -> None:
    """The controller's bridge and address, and one link per host (namespaces exist)."""
    tb, n = ctx.testbed, ctx.names
    net = cidr(tb)
    if len(tb.hosts) > net.num_addresses - 3:
        raise BuildError(f"{tb.source}: the management network {net} has room for "
                         f"{net.num_addresses - 3} hosts; use fewer hosts")
    with nsops.rtnl(n.ctl_ns) as ctl:
        links.bridge(ctl, n.mgmt_bridge, MGMT_MTU, n.alias("management network"))
        links.address(ctl, n.mgmt_bridge, controller_ip(tb), net.prefixlen)
        for hi, host in enumerate(tb.hosts):
            hns = n.host_ns(host.name)
            links.veth(ctl, n.ctl_mgmt(hi), n.mgmt, hns, MGMT_MTU,
                       n.alias(f"management link of host={host.name}"))
            links.up(ctl, n.ctl_mgmt(hi), master=n.mgmt_bridge)
            with nsops.rtnl(hns) as ns:
                links.stamp(ns, n.mgmt, n.alias("management interface"))
                links.address(ns, n.mgmt, host_ip(tb, hi), net.prefixlen)
                links.up(ns, n.mgmt)


def set_link(dep, host: str, up: bool) -> None:
    """Cut (``up=False``) or heal one host's management link at the controller's bridge."""
    tb, n = dep.testbed, dep.names
    hi = [h.name for h in tb.hosts].index(tb.host(host).name)
    with nsops.rtnl(n.ctl_ns) as ctl:
        ctl.link("set", index=links.index(ctl, n.ctl_mgmt(hi)), state="up" if up else "down")
