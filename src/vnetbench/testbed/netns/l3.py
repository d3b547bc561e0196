"""The external network, external hosts and the VMs' default routes on the netns backend,
for every kind that routes; the routers themselves are the kind's (``NetnsDriver.routers``:
the namespaces of Neutron's legacy L3 agent in ``kinds/neutron/l3agent.py``, OVN's logical
routers in ``kinds/ovn/routers.py``).

The external network is a bridge in the fabric namespace with a link into each host that
holds a router's gateway (left for the kind to bridge: its ``br-ex``) and one to each
external host, a namespace standing for a machine outside the cloud. The VMs on a routed
vnet get a default route through its router's interface, as Neutron's DHCP gives them.
Everything lives in the run's namespaces (journaled at creation): deleting them removes it.
"""

from __future__ import annotations

from vnetbench.linux import links, nsops, offloads
from vnetbench.testbed.model import EXTERNAL_MTU, NAMESPACE_ROUTERS, STICK

EXTERNAL_DEV = "eth0"         # an external host's NIC


def external_links(ctx) -> None:
    """The external network in the fabric, a link from it into each gateway host (left
    for the kind to bridge: ``namespace_routers``, or OVN's provider bridge) and one to
    each external host, addressed and up. Before the kinds wire the hosts."""
    tb, n = ctx.testbed, ctx.names
    ext = tb.external
    with nsops.rtnl(n.fabric_ns) as fab:
        links.bridge(fab, n.ext_fabric_bridge, EXTERNAL_MTU, n.alias("external network"))
        for host in tb.gateway_hosts():
            hi = ctx.host_index(host)
            links.veth(fab, n.ext_fabric_port(hi), n.ext_uplink, n.host_ns(host), EXTERNAL_MTU,
                       n.alias(f"external link of host={host}"))
            links.up(fab, n.ext_fabric_port(hi), master=n.ext_fabric_bridge)
        for i, eh in enumerate(tb.external_hosts):
            links.veth(fab, n.ext_host_port(i), EXTERNAL_DEV, n.external_ns(eh.name), EXTERNAL_MTU,
                       n.alias(f"external host={eh.name}"))
            links.up(fab, n.ext_host_port(i), master=n.ext_fabric_bridge)
    # a kind whose routers are not namespaces bridges the external link itself, in OVS's
    # userspace datapath here: then checksums must be computed where packets start (a
    # kernel path keeps its offloads: TSO is most of a namespace router's TCP throughput)
    userspace = ctx.datapath == "netdev" and ctx.kind.routers not in NAMESPACE_ROUTERS
    for host in tb.gateway_hosts():
        with nsops.rtnl(n.host_ns(host)) as ns:
            links.stamp(ns, n.ext_uplink, n.alias("external link"))
            links.up(ns, n.ext_uplink)
        if userspace:
            offloads.off(n.host_ns(host), [(n.ext_uplink, ("tx",))])
    for eh in tb.external_hosts:
        if userspace:
            offloads.off(n.external_ns(eh.name), [(EXTERNAL_DEV, ("tx",))])
        with nsops.rtnl(n.external_ns(eh.name)) as ns:
            idx = links.index(ns, EXTERNAL_DEV)
            ns.link("set", index=idx, address=eh.mac)
            links.stamp(ns, EXTERNAL_DEV, n.alias(f"external host={eh.name}"))
            links.address(ns, EXTERNAL_DEV, eh.ip, ext.cidr.prefixlen)
            links.up(ns, EXTERNAL_DEV)


def trunk_links(ctx) -> None:
    """Each router on a stick's trunk link: a veth in its host, one end for the vSwitch's
    trunk port, the other the router's one NIC (the kind splits it into subinterfaces:
    ``ovs.netns.switch_routing``). Before the kinds wire the hosts."""
    tb, n = ctx.testbed, ctx.names
    for ri, r in enumerate(tb.routers):
        if r.routing != STICK:
            continue
        hns = n.host_ns(r.host)
        with nsops.rtnl(hns) as ns:
            links.veth(ns, n.trunk(ri), n.trunk_nic(ri), hns, tb.network.tenant_mtu,
                       n.alias(f"router={r.name} trunk (switch end)"))
            links.stamp(ns, n.trunk_nic(ri), n.alias(f"router={r.name} trunk (router's NIC)"))
            links.up(ns, n.trunk(ri))
            links.up(ns, n.trunk_nic(ri))


def default_routes(ctx) -> None:
    """Each VM's default route through its first routed NIC's router (Neutron's DHCP
    option 3: the subnet's gateway, the router's interface address)."""
    tb, n = ctx.testbed, ctx.names
    for vm in tb.vms:
        for k, nic in enumerate(vm.nics):
            router = tb.router_of(nic.vnet)
            if router is not None:
                with nsops.rtnl(n.vm_ns(vm.name)) as ns:
                    ns.route("add", dst="0.0.0.0/0", gateway=str(router.port(nic.vnet).ip),
                             oif=links.index(ns, n.vm_nic(k)))
                break
