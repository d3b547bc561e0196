"""``ovs``: Open vSwitch as neutron's OVS agent wires it (``netns``: one private
ovsdb-server + ovs-vswitchd per emulated host; ``agent``: the host's agent that puts back
what a restart loses). The other OVS-based kinds (``ovs-openflow``, ``ovn``, ``vrouter``)
subclass ``Ovs``: they share its daemons, datapath choice, restart and port plugging,
and change what they program."""

from __future__ import annotations

import contextlib
import time

from vnetbench.kinds.base import COMMON_PROGRAMS, Kind
from vnetbench.results.bound import Emulated

OVS_PROGRAMS = ("ethtool", "ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl")
VSWITCHD = "ovs-vswitchd"
NETDEV = Emulated("ovs-vswitchd", "main",
                  "OVS's userspace datapath on AF_PACKET ports (no OVS kernel module here); "
                  "the modelled OVS forwards in its kernel module",
                  lambda prov: prov.get("ovs_datapath") == "netdev")
#: with AF_XDP ports the forwarding moves to the PMD thread(s); a PMD also polls, so its
#: CPU share under load is an upper figure of the work (pmd-maxsleep lets it sleep when idle)
PMD = Emulated("ovs-vswitchd", "pmd",
               "OVS's userspace datapath polling AF_XDP ports (no OVS kernel module here); "
               "the modelled OVS forwards in its kernel module",
               lambda prov: prov.get("ovs_datapath") == "netdev")
#: ``ports: auto`` takes AF_XDP only up to this many veth ports in the whole testbed (its
#: hosts share this machine): OVS gives each AF_XDP port its own UMEM, about 70 MB resident,
#: and sets it up in about 125 ms (bench/bench_bringup.py: 32 VMs on 8 hosts, 40 AF_XDP
#: ports, came up in 8.1 s against 0.8 s on AF_PACKET)
AFXDP_MAX_PORTS = 16


class Ovs(Kind):
    name = "ovs"
    summary = "Open vSwitch (neutron OVS agent): VLAN-tagged integration bridge, tunnel ports"
    uses_ovs = True
    host_daemons = ("ovs-vswitchd", "ovsdb-server")
    programs = COMMON_PROGRAMS + OVS_PROGRAMS
    dpctl_counters = True
    emulated = (NETDEV, PMD)
    openstack_environment = "ml2-ovs"
    demo = True
    remote_bridges = "ovs-vlan"
    routers = "l3-agent"
    switch_routing = ("svi", "stick")
    firewall = ("neutron openvswitch firewall (OVSFirewallDriver, python3-neutron, conntrack "
                "flows on the host's OVS)")
    port_ready_signal = "the Port's local VLAN tag and the Interface's OpenFlow port (ovs-vswitchd)"

    def why_not(self, caps, ntype, datapath):
        if datapath == "system" and not caps.ovs_kernel:
            return ("OVS datapath 'system' needs the openvswitch kernel module, which this "
                    "kernel lacks; use datapath 'netdev' or 'auto'")
        return None

    def datapath(self, requested, caps):
        return caps.ovs_datapath if requested == "auto" else requested

    def ports(self, testbed, caps):
        """AF_XDP where the kernel has XDP sockets and the testbed has no more veth ports
        than AFXDP_MAX_PORTS: measured here it wins on throughput and latency both
        (docs/ovs-ports.md, bench/bench_ovs_ports.py); otherwise AF_PACKET. Light chassis
        are AF_PACKET whatever this says (``OvsHost.apply``): not counted."""
        if self.datapath(testbed.vswitch.datapath, caps) != "netdev":
            return None
        if testbed.vswitch.ports != "auto":
            return testbed.vswitch.ports
        total = sum(veth_ports(testbed, h.name) for h in testbed.hosts if not h.light)
        return "afxdp" if caps.xdp_sockets and total <= AFXDP_MAX_PORTS else "afpacket"

    def flow_layers(self, testbed):
        return (datapath_flows(),)

    # -- netns ----------------------------------------------------------------------------

    def why_not_security_groups(self, caps):
        from vnetbench.kinds.ovs import firewall
        return firewall.why_not(caps)

    def netns_update_security_groups(self, dep, ctx, groups):
        from vnetbench.kinds.ovs import firewall
        firewall.rules_updated(ctx, groups)

    def netns_wire(self, ctx):
        from vnetbench.kinds.ovs import firewall, netns
        netns.wire(ctx)
        if ctx.testbed.port_security:     # Neutron's OVS firewall driver, as the agent runs it
            firewall.start(ctx)

    def netns_svi(self, ctx, ri, router):
        """The internal ports ``netns.switch_routing`` put on the integration bridge, one
        per vnet tagged with its local VLAN (the seed's Figure 4)."""
        from vnetbench.kinds import l3agent
        l3agent.svi(ctx, router, [ctx.names.svi(ri, k) for k in range(len(router.ports))])

    def netns_expire(self, dep, layers):
        if "datapath" in layers:
            for h in dep.testbed.hosts:
                dep.ovs_appctl(h.name, "dpctl/del-flows")

    def netns_remove_vnet(self, dep, ctx, vnet):
        """Every port of the vnet leaves each host's integration bridge."""
        from vnetbench.kinds.ovs.netns import OvsHost
        for host in dep.testbed.hosts:
            if vnet in dep.testbed.vnets_on(host.name):
                OvsHost(ctx, host).unwire_vnet(vnet)

    def netns_restart(self, dep, host):
        """``ovs-vswitchd`` stopped (SIGTERM) and started on the same database, as
        ``systemctl restart ovs-vswitchd`` would: ports come back from the database, OpenFlow
        flows do not (what programs them must put them back: ``_reprogrammed``)."""
        from vnetbench.kinds.ovs import netns
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
            from vnetbench.kinds.ovs import firewall, netns
            from vnetbench.testbed.netns.context import context
            ctx = context(dep)
            netns.OvsHost(ctx, host).pipeline_flows()
            firewall.ovs_restarted(ctx, host)

    def netns_unplug(self, dep, host, port):
        from vnetbench.kinds.ovs import netns
        netns.host_of(dep, host).vsctl("--if-exists", "del-port", dep.names.ovs_int, port)
        if self._neutron_firewall(dep):     # the agent saw the port go: its filter goes
            from vnetbench.kinds.ovs import firewall
            firewall.port_removed(dep, host, port)

    def _neutron_firewall(self, dep) -> bool:
        """Whether Neutron's OVS firewall driver filters this testbed's ports (a kind with
        its own realisation of security groups says no)."""
        return dep.testbed.port_security

    def netns_port_plug(self, dep, host, port, vm):
        # an AF_PACKET port even where the VMs' are AF_XDP: an AF_XDP port holds tens of MiB
        # of ovs-vswitchd's memory (docs/ovs-ports.md), hundreds would exhaust the machine
        self.netns_plug(dep, host, port, vm, 0, vm.nics[0], afxdp=False)

    def netns_ports_ready(self, dep, host, ends):
        from vnetbench.kinds.ovs import netns
        return self._ports_ready(netns.host_of(dep, host).vsctl, ends)

    def _ports_ready(self, vsctl, ends) -> dict:
        """The kind's readiness signal from HOST's database (VSCTL: its ovs-vsctl)."""
        from vnetbench.testbed import readiness
        return readiness.ovs_bound(vsctl("--format=json", "--", "--columns=name,tag", "list", "Port",
                                         "--", "--columns=name,ofport", "list", "Interface"), ends)

    def netns_plug(self, dep, host, port, vm, k, nic, afxdp: bool | None = None):
        """``afxdp``: None, as the build made the VM ports; False, an AF_PACKET port
        whatever they are (a port without a VM: each AF_XDP port holds tens of MiB)."""
        from vnetbench.kinds.ovs import firewall, netns
        from vnetbench.linux import links, nsops
        with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
            links.up(ns, port)
        own = f"external_ids:vnetbench-run={dep.run_id}"
        filtered = self._neutron_firewall(dep)   # then the Port's columns the driver reads
        args = ["--", "--may-exist", "add-port", dep.names.ovs_int, port,
                *self._port_columns(dep, nic), own, *self._port_extra(dep, port, vm, k),
                *(firewall.plugged_columns(dep, host, port, vm, k, nic, self._tag(dep, nic))
                  if filtered else ())]
        if afxdp is None:
            afxdp = dep.run.meta().get("ovs_ports") == "afxdp"
        if afxdp and not (nic.qos and not nic.qos.egress):
            args += ["--", "set", "Interface", port, "type=afxdp"]   # as the build made it
        netns.host_of(dep, host).vsctl(*args)
        if filtered:                        # Neutron's OVS agent on a new port
            firewall.port_added(dep, host, vm, k)

    @contextlib.contextmanager
    def netns_kernel_egress(self, dep, host, port):
        """An AF_XDP port transmits below the qdiscs: for the block it is an AF_PACKET port
        (``type=system``; OVS keeps its OpenFlow port number), then AF_XDP again."""
        from vnetbench.kinds.ovs import netns
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
        return [f"tag={self._tag(dep, nic)}"]

    @staticmethod
    def _tag(dep, nic) -> int:
        from vnetbench.kinds.ovs.netns import local_vlan
        tb = dep.testbed
        vi = [v.name for v in tb.vnets].index(nic.vnet)
        return local_vlan(tb, tb.vnet(nic.vnet), vi)

    def _port_extra(self, dep, port, vm, k) -> list[str]:
        return []


def veth_ports(testbed, host: str) -> int:
    """The veths an OVS-based kind may attach at HOST: VM NICs, a physnet per vnet on a
    flat network, the uplink."""
    from vnetbench.testbed.netns.veths import wires
    return len(wires(testbed, host))


def datapath_flows():
    from vnetbench.testbed.flowstate import OVS_MAX_IDLE_S, FlowState
    return FlowState("datapath", OVS_MAX_IDLE_S,
                     "OVS datapath flows, other_config:max-idle 10 s")


KIND = Ovs()
