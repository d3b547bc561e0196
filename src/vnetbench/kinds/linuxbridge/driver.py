"""``linuxbridge`` on the netns backend: Neutron's linuxbridge agent's work on each
emulated host (a bridge and a segment device per vnet, ``netns``; the iptables firewall,
``firewall``)."""

from __future__ import annotations

import subprocess

from vnetbench.errors import VnetbenchError
from vnetbench.kinds.neutron import l3agent
from vnetbench.kinds.driver import NetnsDriver
from vnetbench.kinds.linuxbridge import firewall, netns
from vnetbench.linux import links, nsops
from vnetbench.testbed import readiness


class Driver(NetnsDriver):
    def ports_ready(self, dep, host, ends):
        done = subprocess.run(dep.host_argv(host.name, ["bridge", "-j", "link", "show"]),
                              capture_output=True, text=True, timeout=15)
        if done.returncode != 0:
            raise VnetbenchError(f"bridge link show on {host.name} failed: {done.stderr.strip()[-200:]}")
        return readiness.bridge_forwarding(done.stdout, ends)

    def svi(self, ctx, ri, router):
        """Each vnet's bridge is the switch's interface on it (the seed's LiSA SVIs)."""
        l3agent.svi(ctx, router, [ctx.names.lb_bridge(ctx.vnet_index(p.vnet)) for p in router.ports])

    def update_security_groups(self, dep, ctx, groups):
        firewall.rules_updated(ctx, groups)

    def wire(self, ctx):
        for host in ctx.testbed.hosts:
            netns.wire_host(ctx, host)
        if ctx.testbed.port_security:     # Neutron's iptables firewall, as the agent runs it
            firewall.start(ctx)

    def remove_vnet(self, dep, ctx, vnet):
        """The vnet's bridge and segment device go on every host."""
        for host in dep.testbed.hosts:
            if vnet in dep.testbed.vnets_on(host.name):
                netns.unwire_vnet(ctx, host, vnet)

    def restart(self, dep, host):
        """Every bridge of the host goes down and up, which flushes its learned forwarding
        database (the kernel disables each port): the closest a kernel bridge has to a restart."""
        netns.bridges_down_up(dep, host)

    def unplug(self, dep, host, port):
        with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
            ns.link("set", index=links.index(ns, port), master=0)

    def plug(self, dep, host, port, vm, k, nic):
        vi = [v.name for v in dep.testbed.vnets].index(nic.vnet)
        with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
            links.up(ns, port, master=dep.names.lb_bridge(vi))
