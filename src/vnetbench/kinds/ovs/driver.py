"""``ovs`` on the netns backend: Neutron's OVS agent's work on each emulated host (the
integration bridge, its VLAN-tagged access ports, the firewall driver's flows). The other
OVS-based kinds' drivers subclass ``Driver``: they share its restart and port plugging
and change, through the hooks below, what a port carries and who programs it again."""

from __future__ import annotations

import contextlib
import time

from vnetbench.kinds.neutron import l3agent
from vnetbench.kinds.driver import NetnsDriver
from vnetbench.kinds.ovs import firewall, netns
from vnetbench.linux import links, nsops
from vnetbench.testbed import readiness
from vnetbench.testbed.netns.context import context


class Driver(NetnsDriver):
    def update_security_groups(self, dep, ctx, groups):
        firewall.rules_updated(ctx, groups)

    def wire(self, ctx):
        netns.wire(ctx)
        if ctx.testbed.port_security:     # Neutron's OVS firewall driver, as the agent runs it
            firewall.start(ctx)

    def svi(self, ctx, ri, router):
        """The internal ports ``netns.switch_routing`` put on the integration bridge, one
        per vnet tagged with its local VLAN (the seed's Figure 4)."""
        l3agent.svi(ctx, router, [ctx.names.svi(ri, k) for k in range(len(router.ports))])

    def expire(self, dep, layers):
        if "datapath" in layers:
            for h in dep.testbed.hosts:
                dep.ovs_appctl(h.name, "dpctl/del-flows")

    def remove_vnet(self, dep, ctx, vnet):
        """Every port of the vnet leaves each host's integration bridge."""
        for host in dep.testbed.hosts:
            if vnet in dep.testbed.vnets_on(host.name):
                netns.OvsHost(ctx, host).unwire_vnet(vnet)

    def restart(self, dep, host):
        """``ovs-vswitchd`` stopped (SIGTERM) and started on the same database, as
        ``systemctl restart ovs-vswitchd`` would: ports come back from the database, OpenFlow
        flows do not (what programs them must put them back: ``_reprogrammed``)."""
        since = time.time()
        before = self._before_restart(dep, host)
        netns.restart_vswitchd(dep, host)
        self._reprogrammed(dep, host, since, before)

    def _before_restart(self, dep, host):
        """What ``_reprogrammed`` needs to know of the host before its restart."""
        return None

    def _reprogrammed(self, dep, host, since: float, before) -> None:
        """Wait until HOST's flows are back: the OVS agent replays its own at once; with
        security groups, its pipeline and the firewall driver's port filters too."""
        if dep.testbed.port_security:     # nothing passes the secure bridge until then
            ctx = context(dep)
            netns.OvsHost(ctx, host).pipeline_flows()
            firewall.ovs_restarted(ctx, host)

    def unplug(self, dep, host, port):
        netns.host_of(dep, host).vsctl("--if-exists", "del-port", dep.names.ovs_int, port)
        if self._neutron_firewall(dep):     # the agent saw the port go: its filter goes
            firewall.port_removed(dep, host, port)

    def _neutron_firewall(self, dep) -> bool:
        """Whether Neutron's OVS firewall driver filters this testbed's ports (a kind with
        its own realisation of security groups says no)."""
        return dep.testbed.port_security

    def port_plug(self, dep, host, port, vm):
        # an AF_PACKET port even where the VMs' are AF_XDP: an AF_XDP port holds tens of MiB
        # of ovs-vswitchd's memory (docs/ovs-ports.md), hundreds would exhaust the machine
        self.plug(dep, host, port, vm, 0, vm.nics[0], afxdp=False)

    def ports_ready(self, dep, host, ends):
        return self._ports_ready(netns.host_of(dep, host).vsctl, ends)

    def _ports_ready(self, vsctl, ends) -> dict:
        """The kind's readiness signal from HOST's database (VSCTL: its ovs-vsctl)."""
        return readiness.ovs_bound(vsctl("--format=json", "--", "--columns=name,tag", "list", "Port",
                                         "--", "--columns=name,ofport", "list", "Interface"), ends)

    def plug(self, dep, host, port, vm, k, nic, afxdp: bool | None = None):
        """``afxdp``: None, as the build made the VM ports; False, an AF_PACKET port
        whatever they are (a port without a VM: each AF_XDP port holds tens of MiB)."""
        with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
            links.up(ns, port)
        own = f"external_ids:vnetbench-run={dep.run_id}"
        filtered = self._neutron_firewall(dep)   # then the Port's columns the driver reads
        args = ["--", "--may-exist", "add-port", dep.names.ovs_int, port,
                *self._port_columns(dep, nic), own, *self._port_extra(dep, port, vm, k),
                *(firewall.plugged_columns(dep, host, port, vm, k, nic, _tag(dep, nic))
                  if filtered else ())]
        if afxdp is None:
            afxdp = dep.run.meta().get("ovs_ports") == "afxdp"
        if afxdp and not (nic.qos and not nic.qos.egress):
            args += ["--", "set", "Interface", port, "type=afxdp"]   # as the build made it
        netns.host_of(dep, host).vsctl(*args)
        if filtered:                        # Neutron's OVS agent on a new port
            firewall.port_added(dep, host, vm, k)

    @contextlib.contextmanager
    def kernel_egress(self, dep, host, port):
        """An AF_XDP port transmits below the qdiscs: for the block it is an AF_PACKET port
        (``type=system``; OVS keeps its OpenFlow port number), then AF_XDP again."""
        ovs = netns.host_of(dep, host)
        afxdp = ovs.vsctl("get", "Interface", port, "type").strip().strip('"') == "afxdp"
        if afxdp:
            ovs.vsctl("set", "Interface", port, "type=system")
        try:
            yield host.name, port
        finally:
            if afxdp:
                ovs.vsctl("set", "Interface", port, "type=afxdp")

    def _port_columns(self, dep, nic) -> list[str]:
        """A VM port is an access port tagged with its vnet's local VLAN."""
        return [f"tag={_tag(dep, nic)}"]

    def _port_extra(self, dep, port, vm, k) -> list[str]:
        return []


def _tag(dep, nic) -> int:
    tb = dep.testbed
    vi = [v.name for v in tb.vnets].index(nic.vnet)
    return netns.local_vlan(tb, tb.vnet(nic.vnet), vi)
