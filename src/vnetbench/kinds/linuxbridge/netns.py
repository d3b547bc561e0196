"""Linux bridge the way neutron's linuxbridge agent wires it: one bridge per vnet,
joined to the underlay by a flat physnet port, a VLAN subinterface or a VXLAN device.
A VM port's bandwidth limit is a TBF qdisc on the port, as neutron's agent sets it."""

from __future__ import annotations


from vnetbench.testbed.model import NetType
from vnetbench.testbed.netns import links, nsops

VXLAN_PORT = 4789


def wire_host(ctx, host) -> None:
    tb, names = ctx.testbed, ctx.names
    mtu = tb.network.tenant_mtu
    with nsops.rtnl(names.host_ns(host.name)) as ns:
        links.address(ns, names.uplink, host.underlay_ip, tb.network.underlay_cidr.prefixlen)
        for vnet in tb.vnets_on(host.name):
            vi = ctx.vnet_index(vnet.name)
            br = names.lb_bridge(vi)
            links.bridge(ns, br, mtu, names.alias(f"vnet={vnet.name} bridge"))
            links.up(ns, _segment_port(ctx, ns, host, vnet, vi), master=br)
            for port in ctx.vm_ports(host.name, vnet.name):
                links.up(ns, port, master=br)
        for port, qos in ctx.qos_ports(host.name):
            if qos.egress:      # what the VM sends arrives on the port: shape it on an IFB
                ifb = ctx.names.ifb(port)
                links.ifb(ns, ifb, names.alias(f"egress limit of {port}"))
                links.redirect_ingress(ns, port, ifb)
                port = ifb
            links.shape(ns, port, qos.max_kbps, qos.max_burst_kbits)


def unwire_vnet(ctx, host, vnet) -> None:
    """Deprovision ``vnet`` at ``host``: its bridge and its segment device go; the VM
    ports it held stay, detached."""
    names, vi = ctx.names, ctx.vnet_index(vnet.name)
    with nsops.rtnl(names.host_ns(host.name)) as ns:
        for dev in (names.lb_bridge(vi), names.vlan_dev(vi), names.vxlan_dev(vi)):
            if ns.link_lookup(ifname=dev):
                ns.link("del", index=links.index(ns, dev))


def _segment_port(ctx, ns, host, vnet, vi) -> str:
    """The port that carries the vnet between hosts."""
    tb, names = ctx.testbed, ctx.names
    ntype = tb.network.type
    alias = names.alias(f"vnet={vnet.name} segment")
    if ntype is NetType.FLAT:
        return names.physnet(vi)
    if ntype is NetType.VLAN:
        name = names.vlan_dev(vi)
        ns.link("add", ifname=name, kind="vlan", link=links.index(ns, names.uplink),
                vlan_id=vnet.segmentation_id, mtu=tb.network.tenant_mtu)
        links.stamp(ns, name, alias)
        return name
    if ntype is NetType.VXLAN:
        name = names.vxlan_dev(vi)
        ns.link("add", ifname=name, kind="vxlan", vxlan_id=vnet.segmentation_id,
                vxlan_local=str(host.underlay_ip), vxlan_port=VXLAN_PORT,
                vxlan_learning=1, mtu=tb.network.tenant_mtu)
        links.stamp(ns, name, alias)
        idx = links.index(ns, name)
        for peer in ctx.peers(host.name, vnet.name):   # head-end replication, no multicast
            ns.fdb("append", ifindex=idx, lladdr="00:00:00:00:00:00", dst=str(peer.underlay_ip))
        return name
    raise AssertionError(f"linuxbridge cannot carry {ntype}; capabilities should have refused it")


def bridges_down_up(dep, host) -> None:
    """Every bridge of HOST down, then up: the kernel flushes what each learned."""
    names = dep.names
    with nsops.rtnl(names.host_ns(host.name)) as ns:
        bridges = [names.lb_bridge(i) for i, v in enumerate(dep.testbed.vnets)
                   if v in dep.testbed.vnets_on(host.name)]
        for br in bridges:
            ns.link("set", index=links.index(ns, br), state="down")
        for br in bridges:
            links.up(ns, br)
