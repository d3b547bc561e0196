"""``ovn``: real OVN (ovn-northd, NB/SB databases, ovn-controller per host) as neutron's
ML2/OVN drives it (``netns``: databases, northd instances, chassis; ``driver``: the netns
backend's; ``options``: the ``ovn:`` block)."""

from __future__ import annotations

from vnetbench.kinds.neutron import sg as neutron_sg
from vnetbench.kinds.ovs import Ovs
from vnetbench.kinds.ovn import options
from vnetbench.testbed.model import NetType


class Ovn(Ovs):
    name = "ovn"
    summary = "OVN: ovn-northd, NB/SB databases, ovn-controller on every host"
    controlled = True
    host_daemons = Ovs.host_daemons + ("ovn-controller",)
    programs = Ovs.programs + ("ovn-northd", "ovn-controller", "ovn-nbctl")
    options_key, options, options_schema = options.KEY, options.Ovn, options.SCHEMA
    redundant_options = {"northd": 2}
    # OVN's Geneve carries an 8-byte option (the logical ports): 58 bytes (REFERENCE §3)
    overhead = {NetType.GENEVE: 58}
    dpctl_counters = False
    remote_bridges = None             # its controller is not built on a remote hypervisor
    openstack_environment = "ml2-ovn"
    demo = True
    light_chassis = True              # the chassis: block (kinds/ovn/chassis.py)
    switch_routing = ()               # Ovs's svi/stick wiring is in its own transaction
    firewall = ("OVN ACLs on port groups as Neutron's OVN driver writes them (allow-related, "
                "neutron_pg_drop; conntrack in the userspace datapath)")
    port_ready_signal = "ovn-installed on the OVS Interface (set by ovn-controller)"

    def why_not_security_groups(self, caps):
        return neutron_sg.neutron_python_missing()

    def why_not(self, caps, ntype, datapath):
        if ntype is NetType.GRE:
            return "OVN has no GRE encapsulation (ovn-encap-type takes geneve, vxlan or stt)"
        return super().why_not(caps, ntype, datapath)


KIND = Ovn()
