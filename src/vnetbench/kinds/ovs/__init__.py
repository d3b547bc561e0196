"""``ovs``: Open vSwitch as neutron's OVS agent wires it (``netns``: one private
ovsdb-server + ovs-vswitchd per emulated host; ``agent``: the host's agent that puts back
what a restart loses). The other OVS-based kinds (``ovs-openflow``, ``ovn``, ``vrouter``)
subclass ``Ovs``: they share its daemons and datapath choice (their drivers subclass
``driver.Driver``: its restart and port plugging), and change what they program."""

from __future__ import annotations

import shutil

from vnetbench.kinds.base import COMMON_PROGRAMS, Kind
from vnetbench.kinds.neutron import sg as neutron_sg
from vnetbench.results.bound import Emulated
from vnetbench.testbed.flowstate import OVS_MAX_IDLE_S, FlowState
from vnetbench.testbed.wiring import wires

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

    def why_not_security_groups(self, caps):
        """What this machine lacks to run Neutron's OVS firewall driver on a host's OVS."""
        if not shutil.which("ovs-ofctl"):
            return "ovs-ofctl not found on PATH (Debian package openvswitch-switch)"
        return neutron_sg.neutron_python_missing()


def veth_ports(testbed, host: str) -> int:
    """The veths an OVS-based kind may attach at HOST: VM NICs, a physnet per vnet on a
    flat network, the uplink."""
    return len(wires(testbed, host))


def datapath_flows():
    return FlowState("datapath", OVS_MAX_IDLE_S,
                     "OVS datapath flows, other_config:max-idle 10 s")


KIND = Ovs()
