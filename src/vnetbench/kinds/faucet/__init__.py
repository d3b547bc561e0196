"""``faucet``: Faucet, a production OpenFlow controller (faucet.nz; Apache 2.0, on
os-ken), over every host's userspace OVS. Proactive, where ``ovs-openflow`` models a
reactive controller: on connection it installs its whole L2 pipeline; hosts are learned
from packet-ins of unknown sources while their frames are flooded in the datapath, never
held for a per-flow set-up. A VLAN per vnet; hosts meet over the underlay as a VLAN trunk
(``vlan``) or one physnet per vnet (``flat``): Faucet builds no VXLAN/GRE/Geneve tunnels.
(``config``: faucet.yaml from the testbed; ``netns``: the process and the bridges;
``driver``: the netns backend's.)"""

from __future__ import annotations

from vnetbench.kinds.faucet import install
from vnetbench.kinds.faucet.config import LEARN_TIMEOUT_S
from vnetbench.kinds.ovs import Ovs
from vnetbench.testbed.flowstate import FlowState
from vnetbench.testbed.model import NetType

SUPPORTED = (NetType.VLAN, NetType.FLAT)


class Faucet(Ovs):
    name = "faucet"
    port_ready_signal = ""              # ports without a VM: not wired for this kind
    summary = "Faucet 1.10 (production OpenFlow controller, proactive L2) over OVS"
    controlled = True
    preferred_network = NetType.VLAN
    remote_bridges = None             # its controller is not built on a remote hypervisor
    no_cloud = ("Faucet has no Neutron mechanism driver in Debian's OpenStack; its clouds "
                "configure it beside Neutron, which this backend does not model")
    demo = False
    switch_routing = ("svi",)         # Faucet's own inter-VLAN routing (faucet_vips)
    no_routers = ("Faucet routes between VLANs only as an L3 switch (a router with routing: svi: "
                  "faucet_vips); it has no tenant router of Neutron's kind and does not NAT")
    firewall = ""                     # not Neutron's OVS agent: its firewall is not inherited

    def why_not_security_groups(self, caps):
        return ("faucet: no real system realises Neutron's security groups with Faucet: its ACLs "
                "are static faucet.yaml rules with no connection state of their own (stateful "
                "rules would be hand-written ct actions per port) and no Neutron driver writes "
                "them; modelling one would be a new firewall, not Faucet's")

    def why_not(self, caps, ntype, datapath):
        if ntype not in SUPPORTED:
            return (f"Faucet switches VLANs and builds no {ntype} tunnels (its tunnel ACLs ride "
                    f"stack links); use network type vlan (the underlay as a VLAN trunk) or flat")
        if not install.manager().exists():
            return (f"Faucet is not installed at {install.venv()} ('make faucet' installs it there: "
                    f"it pins os-ken 3.1.0, which vnetbench's own os-ken apps cannot share)")
        return super().why_not(caps, ntype, datapath)

    def why_not_egress(self, caps):
        return ("an egress bandwidth limit would be a meter in a Faucet ACL on the port; "
                "the faucet kind does not generate ACLs yet")

    def flow_layers(self, testbed):
        return (FlowState("controller", LEARN_TIMEOUT_S, "Faucet learned hosts, dp timeout 300 s"),
                *super().flow_layers(testbed))


KIND = Faucet()
