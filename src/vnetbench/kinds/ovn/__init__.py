"""``ovn``: real OVN (ovn-northd, NB/SB databases, ovn-controller per host) as neutron's
ML2/OVN drives it (``netns``: databases, northd instances, chassis; ``options``: the
``ovn:`` block)."""

from __future__ import annotations

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
    routers = "ovn"                   # logical routers (kinds/ovn/routers.py)
    switch_routing = ()               # Ovs's svi/stick wiring is in its own transaction
    firewall = ("OVN ACLs on port groups as Neutron's OVN driver writes them (allow-related, "
                "neutron_pg_drop; conntrack in the userspace datapath)")
    port_ready_signal = "ovn-installed on the OVS Interface (set by ovn-controller)"

    def netns_port_reserved(self, testbed, vnet):
        from vnetbench.kinds.ovn.netns import dhcp_servers
        return {dhcp_servers(testbed).get(vnet, ("",))[0]}       # OVN's DHCP server's

    def netns_port_plug(self, dep, host, port, vm):
        """Neutron's port create on ML2/OVN first (the logical switch port with its
        addresses), then the plug with the VM's iface-id, as os-vif does."""
        from vnetbench.kinds.ovn import netns
        nic = vm.nics[0]
        lsp, addr = netns.port_name(vm.name, 0), f"{nic.mac} {nic.ip}"
        netns.Central(dep).nbctl("--", "lsp-add", nic.vnet, lsp, "--", "lsp-set-addresses", lsp, addr,
                                 "--", "lsp-set-port-security", lsp, addr,
                                 "--", "set", "Logical_Switch_Port", lsp,
                                 f"external_ids:vnetbench-run={dep.run_id}")
        super().netns_port_plug(dep, host, port, vm)

    def netns_port_unplug(self, dep, host, port, name):
        from vnetbench.kinds.ovn import netns
        super().netns_port_unplug(dep, host, port, name)
        netns.Central(dep).nbctl("--if-exists", "lsp-del", netns.port_name(name, 0))

    def _ports_ready(self, vsctl, ends):
        from vnetbench.testbed import readiness
        return readiness.ovn_installed(vsctl("--format=json", "--columns=name,external_ids",
                                             "list", "Interface"), ends)

    def why_not_security_groups(self, caps):
        from vnetbench.kinds import neutron_sg
        return neutron_sg.neutron_python_missing()

    def netns_update_security_groups(self, dep, ctx, groups):
        """The groups' ACLs replaced in the NB database; as Neutron's API, this returns
        when the NB transaction commits (northd and ovn-controller follow)."""
        from vnetbench.kinds.ovn import acls
        from vnetbench.kinds.ovn.netns import Central
        Central(dep).nbctl(*acls.update_transaction(dep.testbed, dep.run_id, groups))

    def why_not(self, caps, ntype, datapath):
        if ntype is NetType.GRE:
            return "OVN has no GRE encapsulation (ovn-encap-type takes geneve, vxlan or stt)"
        return super().why_not(caps, ntype, datapath)

    def netns_wire(self, ctx):
        from vnetbench.kinds.ovn import netns
        netns.wire(ctx)

    def netns_remove_vnet(self, dep, ctx, vnet):
        """The logical switch is deleted in the NB database (``ls-del``) and ovn-controller
        takes its flows away."""
        from vnetbench.kinds.ovn.netns import Central
        Central(dep).nbctl("ls-del", vnet.name)

    def netns_routers(self, ctx):
        """Logical routers in the NB database (``routers``); back when every chassis has
        them."""
        from vnetbench.kinds.ovn import routers
        from vnetbench.kinds.ovn.netns import Central
        central = Central(ctx)
        central.nbctl(*routers.transaction(ctx.testbed, ctx.run.run_id))
        central.nbctl("--wait=hv", "sync", timeout=30)

    def netns_remove_router_interface(self, dep, router, vnet):
        from vnetbench.kinds.ovn import routers
        from vnetbench.kinds.ovn.netns import Central
        Central(dep).nbctl("--wait=hv", *routers.remove_interface(router.name, vnet), timeout=30)

    def _before_restart(self, dep, host):
        from vnetbench.kinds.ovn import netns
        return netns.flow_count(dep, host.name)

    def _reprogrammed(self, dep, host, since, before):
        """ovn-controller programs the restarted switch again."""
        from vnetbench.kinds.ovn import netns
        netns.wait_programmed(dep, host.name, before)
        if dep.testbed.network.type.is_tunnel:
            netns.tunnel_neighbours(dep, on=[host.name])

    def _port_columns(self, dep, nic):
        return []

    def _neutron_firewall(self, dep) -> bool:
        return False                    # its security groups are its own (docs/security-groups.md)

    def _port_extra(self, dep, port, vm, k):
        from vnetbench.kinds.ovn import netns
        return ["--", "set", "Interface", port, f"external_ids:iface-id={netns.port_name(vm.name, k)}"]

    def control(self):
        from vnetbench.kinds.ovn import netns
        return {"components": lambda dep: list(netns.fault_targets(dep.testbed)),
                "stop": netns.stop, "start": netns.start, "active": netns.active, "sync": netns.sync}


KIND = Ovn()
