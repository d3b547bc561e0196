"""``faucet``: Faucet, a production OpenFlow controller (faucet.nz; Apache 2.0, on
os-ken), over every host's userspace OVS. Proactive, where ``ovs-openflow`` models a
reactive controller: on connection it installs its whole L2 pipeline; hosts are learned
from packet-ins of unknown sources while their frames are flooded in the datapath, never
held for a per-flow set-up. A VLAN per vnet; hosts meet over the underlay as a VLAN trunk
(``vlan``) or one physnet per vnet (``flat``): Faucet builds no VXLAN/GRE/Geneve tunnels.
(``config``: faucet.yaml from the testbed; ``netns``: the process and the bridges.)"""

from __future__ import annotations

from vnetbench.kinds.ovs import Ovs
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
    routers = ""
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
        from vnetbench.kinds.faucet import netns
        if not netns.manager().exists():
            return (f"Faucet is not installed at {netns.venv()} ('make faucet' installs it there: "
                    f"it pins os-ken 3.1.0, which vnetbench's own os-ken apps cannot share)")
        return super().why_not(caps, ntype, datapath)

    def why_not_egress(self, caps):
        return ("an egress bandwidth limit would be a meter in a Faucet ACL on the port; "
                "the faucet kind does not generate ACLs yet")

    def flow_layers(self, testbed):
        from vnetbench.kinds.faucet.config import LEARN_TIMEOUT_S
        from vnetbench.testbed.flowstate import FlowState
        return (FlowState("controller", LEARN_TIMEOUT_S, "Faucet learned hosts, dp timeout 300 s"),
                *super().flow_layers(testbed))

    def netns_svi(self, ctx, ri, router):
        """Nothing to add on the host: faucet.yaml already gives the router's VLANs their
        ``faucet_vips`` and its ``routers`` entry (``config.faucet_yaml``), and Faucet
        answers ARP for the addresses and routes between the VLANs in its own flows."""

    def netns_start(self, ctx):
        from vnetbench.kinds.faucet import netns
        netns.start(ctx)

    def netns_wire(self, ctx):
        from vnetbench.kinds.faucet import netns
        netns.wire(ctx)

    def netns_expire(self, dep, layers):
        if "controller" in layers:
            from vnetbench.errors import UnsupportedError
            raise UnsupportedError("faucet: its learned hosts age after 300 s of silence in "
                                   "Faucet itself; vnetbench cannot make it forget them sooner")
        super().netns_expire(dep, layers)

    def netns_remove_vnet(self, dep, ctx, vnet):
        """The VLAN leaves faucet.yaml and Faucet is told to reload (SIGHUP; it deletes the
        VLAN's flows 0.6-1.4 s later here), and the VM ports leave the bridges as on ovs:
        unplugged at once, as every kind's deprovisioning leaves its VMs."""
        from vnetbench.kinds.faucet import netns
        netns.remove_vnet(dep, vnet)
        super().netns_remove_vnet(dep, ctx, vnet)

    def _reprogrammed(self, dep, host, since, before):
        """Faucet programs the restarted bridge when it reconnects (the new ovs-vswitchd
        starts without flows); then the Controller's 1 s backoff is put in force again
        (``netns.apply_controller_settings``: a new ovs-vswitchd starts at OVS's 8 s)."""
        from vnetbench.kinds.faucet import netns
        from vnetbench.testbed.netns.context import context
        ctx = context(dep)
        o = netns.FaucetHost(ctx, host)
        netns.wait_ready(ctx, [o])
        netns.apply_controller_settings([o])

    def _port_columns(self, dep, nic):
        return []                     # Faucet's VLAN table tags, not the port

    def _port_extra(self, dep, port, vm, k):
        """At the number faucet.yaml names the VM's port by (the same on every host)."""
        from vnetbench.kinds.faucet import netns
        return ["--", "set", "Interface", port, f"ofport_request={netns.port_number(dep.testbed, vm, k)}"]

    def netns_plug(self, dep, host, port, vm, k, nic):
        """Plugged as on ovs, at its number; then faucet.yaml moves the port to this
        host's datapath and Faucet reloads."""
        from vnetbench.kinds.faucet import netns
        super().netns_plug(dep, host, port, vm, k, nic)
        netns.plugged(dep, host, port, vm, k)

    def control(self):
        from vnetbench.kinds.faucet import netns
        return {"components": netns.components, "stop": netns.stop, "start": netns.start_again}


KIND = Faucet()
