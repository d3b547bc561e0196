"""``ovs-openflow`` on the netns backend: the reactive controller's processes and bridges
(``netns``) on the OVS driver's plugging, without a local VLAN tag (the controller tags)."""

from __future__ import annotations

from vnetbench.kinds.ovs.driver import Driver as OvsDriver
from vnetbench.kinds.ovs_openflow import netns
from vnetbench.testbed.netns.context import context


class Driver(OvsDriver):
    start = staticmethod(netns.start)       # its controller, while the rest is built
    wire = staticmethod(netns.wire)

    def expire(self, dep, layers):
        if "controller" in layers:
            netns.expire_flows(dep)
        super().expire(dep, layers)

    def remove_vnet(self, dep, ctx, vnet):
        """The controller deletes the network (VNF forgets its MACs, the flows to and from
        them go), then the ports leave as on ovs."""
        netns.remove_vnet(dep, vnet.name)
        super().remove_vnet(dep, ctx, vnet)

    def _reprogrammed(self, dep, host, since, before):
        """The controller sets the bridge up again when it reconnects; then the Controller
        rows' settings are put in force again (a new ovs-vswitchd starts at OVS's defaults:
        ``OvsHost.controller_settings_in_force``)."""
        netns.wait_ready(dep.run.dir, [netns.dpid(dep.testbed.hosts.index(host))], since=since)
        netns.OpenFlowHost(context(dep), host).controller_settings_in_force()

    def _port_columns(self, dep, nic):
        return []                   # the controller tags, not the port

    def control(self):
        return {"components": netns.instances, "stop": netns.stop_instance,
                "start": netns.start_instance}
