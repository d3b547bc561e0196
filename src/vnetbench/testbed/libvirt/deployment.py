"""A libvirt testbed: the netns backend's hosts and vSwitches, VMs that are QEMU guests
reached over SSH (vnetbench.image.channel). Implements vnetbench.testbed.deployment."""

from __future__ import annotations

from pathlib import Path

from vnetbench.image.channel import Ssh
from vnetbench.linux.libvirtd import URI, connect
from vnetbench.testbed.base import RunDeployment
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.netns.deployment import Deployment as NetnsDeployment
from vnetbench.testbed.sshguests import SshGuests

PIDFILES = Path("/run/libvirt/qemu")      # the system libvirtd's <domain>.pid per guest


NO_MIGRATION = ("the libvirt backend does not migrate domains (virDomainMigrate between two "
                "hypervisors is not implemented; one local libvirtd cannot migrate to itself)")


class LibvirtDeployment(SshGuests, NetnsDeployment):
    backend = "libvirt"
    no_migration = NO_MIGRATION
    # not the namespaces' re-plug: a guest is a QEMU process
    migration_target = RunDeployment.migration_target
    migrate_vm = RunDeployment.migrate_vm
    # a port's readiness is the kind's, but its probe would be a guest's: ports here would
    # be a namespace's, not what the backend measures (QEMU guests)
    no_ports = ("a libvirt testbed's ports are its guests' NICs; measure port readiness on the "
                "netns backend (backend: netns)")
    add_port = RunDeployment.add_port
    remove_port = RunDeployment.remove_port
    added_ports = RunDeployment.added_ports
    ports_ready = RunDeployment.ports_ready
    port_popen = RunDeployment.port_popen

    @classmethod
    def of(cls, run):
        """A run on a remote hypervisor has no local hosts: its own Deployment class."""
        if cls is LibvirtDeployment and not run.describe() and run.meta().get("remote"):
            from vnetbench.testbed.libvirt.remote_deployment import RemoteLibvirtDeployment
            return RemoteLibvirtDeployment.of(run)
        return super().of(run)

    def ssh(self, vm: str) -> Ssh:
        vm_i = [v.name for v in self.testbed.vms].index(vm)
        n = dom.Names(self.run_id)
        address = f"{dom.link_local(dom.mgmt_mac(self.run_id, vm_i))}%{dom.MGMT_BRIDGE}"
        return Ssh(address, self.run.dir / "guest-key", Path(f"/tmp/vnbmux-{self.run_id}"),
                   netns=n.mgmt_ns)

    def vm_pidfiles(self, host: str) -> list[Path]:
        n = dom.Names(self.run_id)
        return [PIDFILES / f"{n.domain(v.name)}.pid" for v in self.testbed.vms if v.host == host]

    def uri(self, host: str) -> str:
        """The libvirt URI of HOST's hypervisor (runs from before URIs were kept: local)."""
        return self.run.meta().get("libvirt_uris", {}).get(host, URI)

    def status(self) -> dict:
        st = super().status()
        names = {}
        for uri in dict.fromkeys(self.uri(h.name) for h in self.testbed.hosts):
            conn = connect(uri)
            try:
                names.update({d.name(): d.isActive() for d in conn.listAllDomains()})
            finally:
                conn.close()
        for vm in st["vms"]:
            name = dom.Names(self.run_id).domain(vm["name"])
            vm.update(domain=name, present=bool(names.get(name)), uri=self.uri(vm["host"]))
        st["backend"] = self.backend
        return st
