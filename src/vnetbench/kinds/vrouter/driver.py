"""``vrouter`` on the netns backend: the control node, every host's agent and its bridge
(``netns``), on the OVS driver's plugging without a local VLAN tag. A vnet's removal is
the OVS driver's: the VM ports leave each host's bridge, whose agent deletes their entries
and withdraws their routes through the control node; the GRE ports are shared by every
vnet and stay."""

from __future__ import annotations

from vnetbench.kinds.ovs.driver import Driver as OvsDriver
from vnetbench.kinds.vrouter import netns
from vnetbench.testbed.netns.context import context


class Driver(OvsDriver):
    start = staticmethod(netns.start)       # its controller, while the rest is built
    wire = staticmethod(netns.wire)

    def update_security_groups(self, dep, ctx, groups):
        """The rules go to the control node, which sends them to every agent; as
        Neutron's API (and OVN's NB commit), this returns once the node has them."""
        netns.push_security(dep)

    def settle(self, dep, timeout):
        """Until no agent has set a flow up for ``netns.QUIET_S`` (its status file is
        rewritten within 50 ms of each change of its counters)."""
        return netns.wait_quiet(dep.run.dir, dep.testbed, timeout)

    def expire(self, dep, layers):
        """The agent's flows, with the datapath cache that is part of its one flow table."""
        if "agent" in layers:
            netns.expire_flows(dep)
            layers = {*layers, "datapath"}
        super().expire(dep, layers)

    def routers(self, ctx):
        """Nothing to build: the control node leaks routes between the VRFs of each
        router's vnets from its start (``control_node.leaked``), and bring-up waited until
        every agent held them (``netns.expected_routes``); north-south (the public VRF,
        floating IPs, the SDN gateway, the SNAT service instances) was wired with the
        vRouters (``netns.wire``, ``northsouth``)."""

    def remove_router_interface(self, dep, router, vnet):
        """The control node stops leaking between VNET and the router's other vnets and
        withdraws those routes; back once every agent has."""
        netns.remove_router_interface(dep, router, vnet)

    def _reprogrammed(self, dep, host, since, before):
        """The agent programs the restarted switch again; then the Controller row's
        settings are put in force again (a new ovs-vswitchd starts at OVS's defaults:
        ``OvsHost.controller_settings_in_force``)."""
        netns.tunnel_neighbours(dep, on=[host.name])
        netns.wait_converged(dep.run.dir, dep.testbed, since=since, key="programmed",
                             hosts=[host.name])
        netns.VRouterHost(context(dep), host).controller_settings_in_force()

    def _neutron_firewall(self, dep) -> bool:
        return False                    # its security groups are its own (docs/security-groups.md)

    def _port_columns(self, dep, nic):
        return []

    def control(self):
        return {"components": netns.components, "stop": netns.stop, "start": netns.start_node}
