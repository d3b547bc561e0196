"""A libvirt testbed on a remote hypervisor (vnetbench.testbed.libvirt.remote_builder):
guests reached over SSH through the hypervisor, host-side work (captures, qdiscs,
ovs-appctl) run there over SSH. Implements vnetbench.testbed.deployment."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from vnetbench import kinds
from vnetbench.errors import UnsupportedError
from vnetbench.image.channel import Ssh
from vnetbench.testbed.base import RunDeployment
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.deployment import NO_MIGRATION
from vnetbench.testbed.libvirt.remote import Hypervisor
from vnetbench.testbed.sshguests import SshGuests, tied_popen


def bridge_names(rid: str, testbed) -> dict:
    """The run's bridges on a hypervisor (<= 15 characters): {"ovs": name or None,
    "linux": [(name, what)], "mgmt": name}; the management bridge is a Linux bridge."""
    mgmt, style = f"vnb{rid}m", kinds.of(testbed).remote_bridges
    linux = [(f"vnb{rid}v{i}", f"vnet={v.name}") for i, v in enumerate(testbed.vnets)] \
        if style == "linux-per-vnet" else []
    ovs = f"vnb{rid}" if style == "ovs-vlan" else None
    return {"ovs": ovs, "linux": [*linux, (mgmt, "guest management")], "mgmt": mgmt}


class RemoteLibvirtDeployment(SshGuests, RunDeployment):
    backend = "libvirt"
    no_migration = NO_MIGRATION

    @property
    def mux(self) -> Path:
        return Path(f"/tmp/vnbmux-{self.run_id}")

    def hypervisor(self, host: str) -> Hypervisor:
        return Hypervisor.of(self.run.meta()["libvirt_uris"][host])

    def uri(self, host: str) -> str:
        return self.hypervisor(host).uri

    def ssh(self, vm: str) -> Ssh:
        vm_i = [v.name for v in self.testbed.vms].index(vm)
        mgmt = bridge_names(self.run_id, self.testbed)["mgmt"]
        address = f"{dom.link_local(dom.mgmt_mac(self.run_id, vm_i))}%{mgmt}"
        return Ssh(address, self.run.dir / "guest-key", self.mux,
                   proxy=self.hypervisor(self.testbed.vm(vm).host).proxy())

    def host_argv(self, host: str, argv) -> list[str]:
        return self.hypervisor(host).ssh(self.mux).argv(list(map(str, argv)))

    def host_popen(self, host: str, argv, **kwargs) -> subprocess.Popen:
        return tied_popen(self.run, self.hypervisor(host).ssh(self.mux), argv, {"host": host}, **kwargs)

    def vm_port(self, vm: str, nic: int = 0) -> tuple[str, str]:
        """The guest's tap on the hypervisor (libvirt made and plugged it)."""
        vm_i = [v.name for v in self.testbed.vms].index(vm)
        return self.testbed.vm(vm).host, dom.Names(self.run_id).tap(vm_i, nic)

    def host_file(self, host: str, name: str) -> Path:
        raise UnsupportedError(f"host {host} is a remote hypervisor: its files are not on this machine")

    def vswitch_pids(self, host: str) -> dict:
        return {}                # the hypervisor's own vSwitch: this run started none

    def vm_pidfiles(self, host: str) -> list[Path]:
        return []                # QEMU runs on the hypervisor: no local pidfile to read

    def remote_collectors(self, mon) -> list[str]:
        """A watched run's collectors run on the hypervisors (their vSwitch, QEMU and
        softirq time is there); Prometheus targets in the monitor's namespace."""
        from vnetbench.testbed.libvirt import remote_collector
        return [remote_collector.start(self, h, mon) for h in self.testbed.hosts]

    @property
    def cpu_source(self) -> dict:
        """Host CPU of the hypervisors: their collectors through the monitor's Prometheus
        (none until the run is watched: then the windows say so, never a local figure)."""
        return {"monitor": self.run.meta().get("monitor") or "", "prometheus": "",
                "hosts": [h.name for h in self.testbed.hosts], "labels": {"run_id": self.run_id},
                "why_not": "the testbed is on a remote hypervisor and not watched: its host CPU "
                           "comes from the collector a monitor starts there (vnetbench watch, or "
                           "compare/Rally with a monitor)"}

    def controller_pids(self) -> dict:
        return {}

    def ovs_appctl(self, host: str, *args, timeout: float = 10) -> str:
        if kinds.of(self.testbed).remote_bridges != "ovs-vlan":
            raise UnsupportedError(f"host {host}: ovs-appctl on a {self.testbed.vswitch.kind.value} host")
        return self.hypervisor(host).run(self.mux, shlex.join(["ovs-appctl", *map(str, args)]),
                                         timeout_s=timeout).stdout.decode()

    def expire_flows(self, layers=None) -> None:
        if kinds.of(self.testbed).remote_bridges == "ovs-vlan" and (layers is None or "datapath" in layers):
            for h in self.testbed.hosts:
                self.ovs_appctl(h.name, "revalidator/purge")

    def cpu_probe(self, wait: bool = True) -> Path | None:
        return None

    def remove_vnet(self, vnet: str) -> None:
        raise UnsupportedError("remove_vnet on a remote hypervisor is not built")

    def status(self) -> dict:
        from vnetbench.linux.libvirtd import connect
        meta, tb = self.run.meta(), self.testbed
        names = {}
        for uri in dict.fromkeys(meta["libvirt_uris"].values()):
            conn = connect(uri)
            try:
                names.update({d.name(): d.isActive() for d in conn.listAllDomains()})
            finally:
                conn.close()
        return {
            "run_id": self.run_id, "name": tb.name, "status": meta.get("status"), "backend": self.backend,
            "vswitch": tb.vswitch.kind.value, "network": tb.network.type.value, "remote": True,
            "up_seconds": meta.get("up_seconds"),
            "hosts": [{"name": h.name, "cpus": list(h.cpus), "uri": self.uri(h.name)} for h in tb.hosts],
            "vms": [{"name": v.name, "host": v.host, "cpus": list(v.cpus), "uri": self.uri(v.host),
                     "domain": dom.Names(self.run_id).domain(v.name),
                     "present": bool(names.get(dom.Names(self.run_id).domain(v.name))),
                     "nics": [{"vnet": n.vnet, "ip": str(n.ip), "mac": n.mac} for n in v.nics]}
                    for v in tb.vms],
            "errors": meta.get("errors", []),
        }
