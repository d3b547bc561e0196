"""``linuxbridge``: the kernel's bridge as neutron's linuxbridge agent wires it, one bridge
per vnet; no flow state, no controller (``netns``: the wiring; ``driver``: the netns
backend's)."""

from __future__ import annotations

from vnetbench.kinds.base import Kind
from vnetbench.kinds.linuxbridge import firewall
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
    switch_routing = ("svi",)
    firewall = "neutron iptables firewall (IptablesFirewallDriver, python3-neutron, in the host)"
    port_ready_signal = "bridge port state forwarding"

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

    def why_not_egress(self, caps):
        if caps.links.get("ifb"):
            return f"an egress limit needs IFB devices (CONFIG_IFB): {caps.links['ifb']}"
        return None

    def why_not_security_groups(self, caps):
        return firewall.why_not(caps)


KIND = LinuxBridge()
