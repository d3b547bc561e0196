"""Linux bridge the way neutron's linuxbridge agent wires it: one bridge per vnet,
joined to the underlay by a flat physnet port, a VLAN subinterface or a VXLAN device.
A VM port's bandwidth limit is a TBF qdisc on the port, as neutron's agent sets it."""

from __future__ import annotations


from vnetbench.linux import links, nlbatch, nsops
from vnetbench.testbed.model import NetType

VXLAN_PORT = 4789
#: ifindex of vnet i's bridge in a host's namespace (BRIDGE_INDEX + 2i; its segment device
#: the next one): chosen, so the batch needs no lookup; far above what the kernel picks
BRIDGE_INDEX = 1 << 20


def wire_host(ctx, host) -> None:
    """The uplink's address; then one netlink write (``nlbatch``): per vnet its bridge,
    its segment port and its VM ports enslaved; then the ports' limits."""
    tb, names = ctx.testbed, ctx.names
    mtu = tb.network.tenant_mtu
    ns_name = names.host_ns(host.name)
    with nsops.rtnl(ns_name) as ns:
        links.address(ns, names.uplink, host.underlay_ip, tb.network.underlay_cidr.prefixlen)
        uplink = links.index(ns, names.uplink)
    batch = nlbatch.Batch(ns_name)
    for vnet in tb.vnets_on(host.name):
        vi = ctx.vnet_index(vnet.name)
        br, br_i = names.lb_bridge(vi), BRIDGE_INDEX + 2 * vi
        batch.link(f"bridge {br}", "add", index=br_i, ifname=br, kind="bridge", mtu=mtu, br_stp_state=0,
                   br_forward_delay=0, state="up")
        batch.set(f"alias of {br}", index=br_i, alias=names.alias(f"vnet={vnet.name} bridge"))
        _segment_port(ctx, batch, host, vnet, vi, uplink, br_i)
        for port in ctx.vm_ports(host.name, vnet.name):
            batch.set(f"{port} into {br}", ifname=port, master=br_i, up=True)
    batch.send()
    limited = ctx.qos_ports(host.name)
    if limited:
        with nsops.rtnl(ns_name) as ns:
            for port, qos in limited:
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


def _segment_port(ctx, batch, host, vnet, vi, uplink: int, br_i: int) -> None:
    """The port that carries the vnet between hosts, made (a VLAN or VXLAN device, index
    ``br_i`` + 1) or taken (a flat physnet), enslaved to the vnet's bridge."""
    tb, names = ctx.testbed, ctx.names
    ntype = tb.network.type
    alias = names.alias(f"vnet={vnet.name} segment")
    if ntype is NetType.FLAT:
        batch.set(f"{names.physnet(vi)} into its bridge", ifname=names.physnet(vi), master=br_i, up=True)
        return
    idx = br_i + 1
    if ntype is NetType.VLAN:
        name = names.vlan_dev(vi)
        batch.link(f"VLAN device {name}", "add", index=idx, ifname=name, kind="vlan", link=uplink,
                   vlan_id=vnet.segmentation_id, mtu=tb.network.tenant_mtu)
    elif ntype is NetType.VXLAN:
        name = names.vxlan_dev(vi)
        batch.link(f"VXLAN device {name}", "add", index=idx, ifname=name, kind="vxlan",
                   vxlan_id=vnet.segmentation_id, vxlan_local=str(host.underlay_ip),
                   vxlan_port=VXLAN_PORT, vxlan_learning=1, mtu=tb.network.tenant_mtu)
        for peer in ctx.peers(host.name, vnet.name):   # head-end replication, no multicast
            batch.fdb(f"flood entry of {name} to {peer.underlay_ip}", "append", ifindex=idx,
                      lladdr="00:00:00:00:00:00", dst=str(peer.underlay_ip))
    else:
        raise AssertionError(f"linuxbridge cannot carry {ntype}; capabilities should have refused it")
    batch.set(f"alias of {name}", index=idx, alias=alias)
    batch.set(f"{name} into its bridge", index=idx, master=br_i, up=True)


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
