"""``ovs-openflow``: a reactive OpenFlow controller (Floodlight v0.90 Forwarding +
VirtualNetworkFilter, behind IVS's packet-in limit) over OVS (``floodlight``: the os-ken
app; ``forwarding``: its decisions; ``netns``: controller processes and bridges;
``driver``: the netns backend's; ``options``: the ``openflow:`` block)."""

from __future__ import annotations

import math

from vnetbench.kinds.ovs import Ovs
from vnetbench.kinds.ovs_openflow import options
from vnetbench.results.bound import Emulated
from vnetbench.testbed.flowstate import FlowState


class OvsOpenFlow(Ovs):
    name = "ovs-openflow"
    port_ready_signal = ""              # ports without a VM: not wired for this kind
    summary = "reactive OpenFlow controller (Floodlight/IVS model) over OVS"
    controlled = True
    options_key, options, options_schema = options.KEY, options.OpenFlow, options.SCHEMA
    redundant_options = {"controllers": 2}
    emulated = Ovs.emulated + (Emulated("osken-", "", "the Floodlight model (an os-ken app, Python) "
                                        "handles every packet-in; Floodlight is compiled Java"),)
    # routers "external" (registry.ROUTERS): Floodlight v0.90's Forwarding has no L3, so
    # tenants route through a router outside the fabric, on a port; the same namespace
    # router as Neutron's agent's
    switch_routing = ()               # Ovs's svi/stick wiring is in its own transaction
    remote_bridges = None             # its controller is not built on a remote hypervisor
    openstack_environment = "openflow-controller"
    demo = False

    def why_not(self, caps, ntype, datapath):
        # every network type: the controller pushes/pops 802.1q tags on vlan
        return osken_missing() or super().why_not(caps, ntype, datapath)

    def why_not_egress(self, caps):
        return ("an egress bandwidth limit needs the flows to carry a meter, and the "
                "reactive controller (Floodlight v0.90 model) owns the flow table and "
                "meters nothing")

    def why_not_security_groups(self, caps):
        return ("security groups are stateful (the replies of an allowed connection pass) and "
                "Floodlight v0.90's Firewall module is not: it judges each packet-in against "
                "allow/deny rules by header with no connection state, so a Neutron group has no "
                "faithful realisation in this model (docs/security-groups.md)")

    def flow_layers(self, testbed):
        idle = testbed.vswitch.options.idle_timeout or math.inf
        return (FlowState("controller", idle,
                          "Floodlight FLOWMOD_DEFAULT_IDLE_TIMEOUT (openflow.idle_timeout)"),
                *super().flow_layers(testbed))


def osken_missing() -> str | None:
    try:
        import os_ken  # noqa: F401
    except ImportError:
        return "the os-ken Python package is missing; 'make install' installs it"
    return None


KIND = OvsOpenFlow()
