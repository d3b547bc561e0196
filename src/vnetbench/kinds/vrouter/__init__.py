"""``vrouter``: OpenContrail's vRouter (2013 model): an L3 overlay, MPLS over GRE, with a
per-host agent setting up flows and a control node distributing routes (``logic``: the
agent's decisions; ``app``/``agent``: the agent process; ``control_node``; ``dhcp``;
``netns``: processes and bridges; ``driver``: the netns backend's; ``options``: the
``vrouter:`` block)."""

from __future__ import annotations

import math

from vnetbench.kinds.ovs import Ovs
from vnetbench.kinds.ovs_openflow import osken_missing
from vnetbench.kinds.vrouter import northsouth, options
from vnetbench.results.bound import Emulated
from vnetbench.testbed.flowstate import FlowState
from vnetbench.testbed.model import NetType


class VRouter(Ovs):
    name = "vrouter"
    port_ready_signal = ""              # ports without a VM: not wired for this kind
    summary = "OpenContrail/Tungsten Fabric vRouter model: L3, MPLS over GRE, agent + control node"
    controlled = True
    l3 = True
    host_daemons = Ovs.host_daemons + ("contrail-vrouter-agent",)
    options_key, options, options_schema = options.KEY, options.VRouter, options.SCHEMA
    # MPLS over GRE: outer IP 20 + GRE 4 + MPLS 4, no inner Ethernet (an L3 overlay)
    overhead = {NetType.GRE: 28}
    wire = {"gre": "MPLSoGRE"}
    emulated = Ovs.emulated + (
        Emulated("contrail-vrouter-agent", "",
                 "the vRouter model's agent (Python) sets up each flow; the real vRouter does "
                 "it in its kernel module and its C++ agent"),
        Emulated("contrail-control", "", "the control-node model (Python); the real control node is C++"))
    preferred_network = NetType.GRE
    remote_bridges = None             # its controller is not built on a remote hypervisor
    openstack_environment = "tungsten-fabric"
    demo = False
    switch_routing = ()               # Ovs's svi/stick wiring is in its own transaction
    firewall = ("Contrail security groups in the vRouter agent: rules evaluated at each flow's "
                "set-up (forward and reverse entries pass or drop), flows re-evaluated on a change")

    def why_not_north_south(self, testbed):
        """The public VN, floating IPs in the vRouters, the SNAT service instances and one
        SDN gateway (``northsouth``): refused only where the routers' gateways would need
        more than one gateway host."""
        return northsouth.why_not(testbed)

    def why_not_security_groups(self, caps):
        return None              # the agent evaluates them (os-ken: checked by why_not)

    def why_not(self, caps, ntype, datapath):
        if ntype is not NetType.GRE:
            return (f"vrouter emulates OpenContrail's MPLS over GRE only; use network type gre "
                    f"(it means MPLSoGRE for this kind), not {ntype}")
        missing = osken_missing()
        if missing:
            return missing
        if datapath == "system":
            return ("vrouter needs OVS's userspace datapath (L3 GRE ports, MPLS); use datapath "
                    "'netdev' or 'auto'")
        return super().why_not(caps, ntype, datapath)

    def datapath(self, requested, caps):
        return "netdev"               # L3 GRE ports and MPLS: userspace only

    def flow_layers(self, testbed):
        # one flow table in the real vRouter (its kernel module); the emulation's OVS cache
        # belongs to it and ages with it. flow_setup: datapath holds it in the connection
        # tracker, whose zones age it with the same idle timeout (netns.flow_aging)
        idle = testbed.vswitch.options.flow_idle_timeout or math.inf
        return (FlowState("agent", idle, "Contrail vRouter flow aging (vrouter.flow_idle_timeout)"),)


KIND = VRouter()
