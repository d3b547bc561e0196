"""``ovn`` on the netns backend: ML2/OVN's work (logical switches, ports, routers and ACLs
in the NB database; ovn-controller programs each chassis), on the OVS driver's plugging
with the VM's ``iface-id`` instead of a local VLAN tag."""

from __future__ import annotations

from vnetbench.kinds.ovn import acls, netns, routers
from vnetbench.kinds.ovs.driver import Driver as OvsDriver
from vnetbench.testbed import readiness


class Driver(OvsDriver):
    wire = staticmethod(netns.wire)

    def port_reserved(self, testbed, vnet):
        return {netns.dhcp_servers(testbed).get(vnet, ("",))[0]}       # OVN's DHCP server's

    def port_plug(self, dep, host, port, vm):
        """Neutron's port create on ML2/OVN first (the logical switch port with its
        addresses), then the plug with the VM's iface-id, as os-vif does."""
        nic = vm.nics[0]
        lsp, addr = netns.port_name(vm.name, 0), f"{nic.mac} {nic.ip}"
        netns.Central(dep).nbctl("--", "lsp-add", nic.vnet, lsp, "--", "lsp-set-addresses", lsp, addr,
                                 "--", "lsp-set-port-security", lsp, addr,
                                 "--", "set", "Logical_Switch_Port", lsp,
                                 f"external_ids:vnetbench-run={dep.run_id}")
        super().port_plug(dep, host, port, vm)

    def port_unplug(self, dep, host, port, name):
        super().port_unplug(dep, host, port, name)
        netns.Central(dep).nbctl("--if-exists", "lsp-del", netns.port_name(name, 0))

    def _ports_ready(self, vsctl, ends):
        return readiness.ovn_installed(vsctl("--format=json", "--columns=name,external_ids",
                                             "list", "Interface"), ends)

    def update_security_groups(self, dep, ctx, groups):
        """The groups' ACLs replaced in the NB database; as Neutron's API, this returns
        when the NB transaction commits (northd and ovn-controller follow)."""
        netns.Central(dep).nbctl(*acls.update_transaction(dep.testbed, dep.run_id, groups))

    def remove_vnet(self, dep, ctx, vnet):
        """The logical switch is deleted in the NB database (``ls-del``) and ovn-controller
        takes its flows away."""
        netns.Central(dep).nbctl("ls-del", vnet.name)

    def routers(self, ctx):
        """Logical routers in the NB database (``routers``); back when every chassis has
        them."""
        central = netns.Central(ctx)
        central.nbctl(*routers.transaction(ctx.testbed, ctx.run.run_id))
        central.nbctl("--wait=hv", "sync", timeout=30)

    def remove_router_interface(self, dep, router, vnet):
        netns.Central(dep).nbctl("--wait=hv", *routers.remove_interface(router.name, vnet), timeout=30)

    def _before_restart(self, dep, host):
        return netns.flow_count(dep, host.name)

    def _reprogrammed(self, dep, host, since, before):
        """ovn-controller programs the restarted switch again."""
        netns.wait_programmed(dep, host.name, before)
        if dep.testbed.network.type.is_tunnel:
            netns.tunnel_neighbours(dep, on=[host.name])

    def _port_columns(self, dep, nic):
        return []

    def _neutron_firewall(self, dep) -> bool:
        return False                    # its security groups are its own (docs/security-groups.md)

    def _port_extra(self, dep, port, vm, k):
        return ["--", "set", "Interface", port, f"external_ids:iface-id={netns.port_name(vm.name, k)}"]

    def control(self):
        return {"components": lambda dep: list(netns.fault_targets(dep.testbed)),
                "stop": netns.stop, "start": netns.start, "active": netns.active, "sync": netns.sync}
