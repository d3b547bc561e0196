"""``linuxbridge``: the kernel's bridge as neutron's linuxbridge agent wires it, one bridge
per vnet; no flow state, no controller (``netns``: the wiring)."""

from __future__ import annotations

from vnetbench.kinds.base import Kind
from vnetbench.testbed.model import NetType

# kernel link kinds (capabilities.LINK_KINDS) each network type needs on a host
LINKS = {NetType.FLAT: (), NetType.VLAN: ("vlan",), NetType.VXLAN: ("vxlan",),
         NetType.GRE: ("gretap",), NetType.GENEVE: ("geneve",)}
NOT_WIRED = (NetType.GRE, NetType.GENEVE)   # point-to-point devices: not built yet


class LinuxBridge(Kind):
    name = "linuxbridge"
    summary = "Linux bridge (neutron linuxbridge agent): a kernel bridge per vnet"
    openstack_environment = "linuxbridge"
    demo = True
    remote_bridges = "linux-per-vnet"
    routers = "l3-agent"
    switch_routing = ("svi",)
    firewall = "neutron iptables firewall (IptablesFirewallDriver, python3-neutron, in the host)"
    port_ready_signal = "bridge port state forwarding"

    def netns_ports_ready(self, dep, host, ends):
        import subprocess

        from vnetbench.errors import VnetbenchError
        from vnetbench.testbed import readiness
        done = subprocess.run(dep.host_argv(host.name, ["bridge", "-j", "link", "show"]),
                              capture_output=True, text=True, timeout=15)
        if done.returncode != 0:
            raise VnetbenchError(f"bridge link show on {host.name} failed: {done.stderr.strip()[-200:]}")
        return readiness.bridge_forwarding(done.stdout, ends)

    def why_not(self, caps, ntype, datapath):
        for link in LINKS[ntype]:
            if caps.links.get(link):
                return caps.link_missing(link)
        if ntype in NOT_WIRED:
            return (f"linuxbridge over {ntype} is not wired by the netns backend yet "
                    f"(it needs a {LINKS[ntype][0]} device per remote host); use ovs")
        return None

    def why_not_switch_routing(self, caps, routing):
        if routing == "stick":      # a trunk: tagged frames on one port of the bridge
            missing = caps is not None and caps.links.get("vlan")
            return ("a router on a stick needs a trunk, which a Linux bridge carries through 802.1q "
                    "VLAN devices or bridge VLAN filtering" + (f"; {caps.link_missing('vlan')}" if missing
                                                                else " (not wired by the netns backend yet)")
                    + "; use ovs (a trunk port)")
        return super().why_not_switch_routing(caps, routing)

    def netns_svi(self, ctx, ri, router):
        """Each vnet's bridge is the switch's interface on it (the seed's LiSA SVIs)."""
        from vnetbench.kinds import l3agent
        l3agent.svi(ctx, router, [ctx.names.lb_bridge(ctx.vnet_index(p.vnet)) for p in router.ports])

    def why_not_egress(self, caps):
        if caps.links.get("ifb"):
            return f"an egress limit needs IFB devices (CONFIG_IFB): {caps.links['ifb']}"
        return None

    def why_not_security_groups(self, caps):
        from vnetbench.kinds.linuxbridge import firewall
        return firewall.why_not(caps)

    def netns_update_security_groups(self, dep, ctx, groups):
        from vnetbench.kinds.linuxbridge import firewall
        firewall.rules_updated(ctx, groups)

    def netns_wire(self, ctx):
        from vnetbench.kinds.linuxbridge import firewall, netns
        for host in ctx.testbed.hosts:
            netns.wire_host(ctx, host)
        if ctx.testbed.port_security:     # Neutron's iptables firewall, as the agent runs it
            firewall.start(ctx)

    def netns_remove_vnet(self, dep, ctx, vnet):
        """The vnet's bridge and segment device go on every host."""
        from vnetbench.kinds.linuxbridge import netns
        for host in dep.testbed.hosts:
            if vnet in dep.testbed.vnets_on(host.name):
                netns.unwire_vnet(ctx, host, vnet)

    def netns_restart(self, dep, host):
        """Every bridge of the host goes down and up, which flushes its learned forwarding
        database (the kernel disables each port): the closest a kernel bridge has to a restart."""
        from vnetbench.kinds.linuxbridge import netns
        netns.bridges_down_up(dep, host)

    def netns_unplug(self, dep, host, port):
        from vnetbench.linux import links, nsops
        with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
            ns.link("set", index=links.index(ns, port), master=0)

    def netns_plug(self, dep, host, port, vm, k, nic):
        from vnetbench.linux import links, nsops
        vi = [v.name for v in dep.testbed.vnets].index(nic.vnet)
        with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
            links.up(ns, port, master=dep.names.lb_bridge(vi))


KIND = LinuxBridge()
