"""``vrouter``: OpenContrail's vRouter (2013 model): an L3 overlay, MPLS over GRE, with a
per-host agent setting up flows and a control node distributing routes (``logic``: the
agent's decisions; ``app``/``agent``: the agent process; ``control_node``; ``dhcp``;
``netns``: processes and bridges; ``options``: the ``vrouter:`` block)."""

from __future__ import annotations

import math

from vnetbench.kinds.ovs import Ovs
from vnetbench.kinds.ovs_openflow import osken_missing
from vnetbench.kinds.vrouter import options
from vnetbench.results.bound import Emulated
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
    routers = "vrouter"               # inter-VN routing in every host's vRouter (route leaking)
    switch_routing = ()               # Ovs's svi/stick wiring is in its own transaction
    firewall = ("Contrail security groups in the vRouter agent: rules evaluated at each flow's "
                "set-up (forward and reverse entries pass or drop), flows re-evaluated on a change")

    def why_not_north_south(self, testbed):
        """The public VN, floating IPs in the vRouters, the SNAT service instances and one
        SDN gateway (``northsouth``): refused only where the routers' gateways would need
        more than one gateway host."""
        from vnetbench.kinds.vrouter import northsouth
        return northsouth.why_not(testbed)

    def why_not_security_groups(self, caps):
        return None              # the agent evaluates them (os-ken: checked by why_not)

    def netns_update_security_groups(self, dep, ctx, groups):
        """The rules go to the control node, which sends them to every agent; as
        Neutron's API (and OVN's NB commit), this returns once the node has them."""
        from vnetbench.kinds.vrouter import netns
        netns.push_security(dep)

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
        from vnetbench.testbed.flowstate import FlowState
        idle = testbed.vswitch.options.flow_idle_timeout or math.inf
        return (FlowState("agent", idle, "Contrail vRouter flow aging (vrouter.flow_idle_timeout)"),)

    def netns_start(self, ctx):
        from vnetbench.kinds.vrouter import netns
        netns.start(ctx)

    def netns_wire(self, ctx):
        from vnetbench.kinds.vrouter import netns
        netns.wire(ctx)

    def netns_settle(self, dep, timeout):
        """Until no agent has set a flow up for ``netns.QUIET_S`` (its status file is
        rewritten within 50 ms of each change of its counters)."""
        from vnetbench.kinds.vrouter import netns
        return netns.wait_quiet(dep.run.dir, dep.testbed, timeout)

    def netns_expire(self, dep, layers):
        """The agent's flows, with the datapath cache that is part of its one flow table."""
        if "agent" in layers:
            from vnetbench.kinds.vrouter import netns
            netns.expire_flows(dep)
            layers = {*layers, "datapath"}
        super().netns_expire(dep, layers)

    def netns_routers(self, ctx):
        """Nothing to build: the control node leaks routes between the VRFs of each
        router's vnets from its start (``control_node.leaked``), and bring-up waited until
        every agent held them (``netns.expected_routes``); north-south (the public VRF,
        floating IPs, the SDN gateway, the SNAT service instances) was wired with the
        vRouters (``netns.wire``, ``northsouth``)."""

    def netns_remove_router_interface(self, dep, router, vnet):
        """The control node stops leaking between VNET and the router's other vnets and
        withdraws those routes; back once every agent has."""
        from vnetbench.kinds.vrouter import netns
        netns.remove_router_interface(dep, router, vnet)

    # netns_remove_vnet: the VM ports leave each host's bridge (as on ovs), whose agent
    # deletes their entries and withdraws their routes through the control node; the GRE
    # ports are shared by every vnet and stay

    def _reprogrammed(self, dep, host, since, before):
        """The agent programs the restarted switch again; then the Controller row's
        settings are put in force again (a new ovs-vswitchd starts at OVS's defaults:
        ``OvsHost.controller_settings_in_force``)."""
        from vnetbench.kinds.vrouter import netns
        from vnetbench.testbed.netns.context import context
        netns.tunnel_neighbours(dep, on=[host.name])
        netns.wait_converged(dep.run.dir, dep.testbed, since=since, key="programmed",
                             hosts=[host.name])
        netns.VRouterHost(context(dep), host).controller_settings_in_force()

    def _neutron_firewall(self, dep) -> bool:
        return False                    # its security groups are its own (docs/security-groups.md)

    def _port_columns(self, dep, nic):
        return []

    def control(self):
        from vnetbench.kinds.vrouter import netns
        return {"components": netns.components, "stop": netns.stop, "start": netns.start_node}


KIND = VRouter()
