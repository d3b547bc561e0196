"""What every backend's Deployment does alike: it is a run plus the Testbed its meta
holds, re-attached from the state alone, and torn down by the one journal unwinder."""

from __future__ import annotations

import contextlib

import subprocess

from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.inputs import excerpt
from vnetbench.state import Run, find_run
from vnetbench.testbed import deployment
from vnetbench.testbed.codec import from_dict
from vnetbench.testbed.model import Testbed


class RunDeployment:
    """The backend-independent members of vnetbench.testbed.deployment.Deployment."""

    run: Run
    testbed: Testbed

    def __init__(self, run: Run, testbed: Testbed):
        self.run, self.testbed = run, testbed

    def link_popen(self, host: str, link: str, argv_of, **kwargs):
        """A capture of HOST's LINK runs on HOST's side (its kernel sees the link)."""
        return self.host_popen(host, argv_of(link), **kwargs)

    def shaped_port(self, vm: str, nic: int = 0):
        """The VM's port, whose host-side qdiscs see its traffic as it is."""
        return contextlib.nullcontext(self.vm_port(vm, nic))

    @classmethod
    def attach(cls, ref: str | None = None):
        return cls.of(find_run(ref))

    @classmethod
    def of(cls, run: Run):
        """The deployment of a run; a damaged run directory is a one-line error that
        points at cleanup (which needs only the journal)."""
        problem = run.describe()
        if not problem:
            try:
                return cls(run, from_dict(run.meta()["testbed"]))
            except (KeyError, TypeError, ValueError) as exc:
                problem = f"meta.json holds no usable testbed ({excerpt(str(exc))})"
        raise VnetbenchError(f"run {run.run_id}: {problem}; remove what it made with "
                             f"'vnetbench cleanup --run {run.run_id}'")

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def ip(self, vm: str, vnet: str | None = None) -> str:
        """A VM NIC's address (the first NIC's, or VNET's); an external host's address."""
        outside = self.testbed.external_host(vm)
        if outside is not None:
            return str(outside.ip)
        v = self.testbed.vm(vm)
        return str(v.nic(vnet).ip if vnet else v.nics[0].ip)

    def reach(self, src: str, dst: str) -> str:
        """The address SRC sends to to reach DST: from outside the cloud (an external host)
        a VM's floating IP, where it has one (its router DNATs it to the fixed address the
        VM's own tools bind to, ``ip``); else DST's own address."""
        if self.testbed.external_host(src) is not None:
            fip = next((f for f in self.testbed.floating_ips if f.vm == dst), None)
            if fip is not None:
                return str(fip.ip)
        return self.ip(dst)

    def _spawn(self, full, argv, kwargs, **where) -> subprocess.Popen:
        """FULL (ARGV as run where it runs, on this machine) in the background, in a session
        of its own, journaled with WHERE so teardown stops it."""
        from vnetbench.linux import proc
        p = subprocess.Popen(full, start_new_session=True, **kwargs)
        self.run.record("process", pid=p.pid, starttime=proc.starttime(p.pid), **where,
                        argv=list(map(str, argv)))
        return p

    def exec(self, vm: str, argv, timeout: float | None = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.vm_argv(vm, argv), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def settle(self, timeout: float = 5.0) -> float:
        """Nothing the backend can see queues (a cloud's or a remote hypervisor's agents)."""
        return 0.0

    def restart_vswitch(self, host: str) -> None:
        """A backend whose hosts are not its own (a cloud's, a remote hypervisor's) says so."""
        raise UnsupportedError(f"{self.run.meta().get('backend', 'this backend')}: no vSwitch "
                               f"restart of {host} (run {self.run_id})")

    def set_mgmt_link(self, host: str, up: bool) -> None:
        """A backend without the embedded management network says so."""
        raise UnsupportedError(f"{self.run.meta().get('backend', 'this backend')}: no management "
                               f"link of {host} to cut or heal (run {self.run_id})")

    def remove_router_interface(self, router: str, vnet: str) -> None:
        """A backend without routers says so."""
        raise UnsupportedError(f"{self.run.meta().get('backend', 'this backend')} has no routers to "
                               f"change (run {self.run_id})")

    def update_security_groups(self, groups) -> float:
        """A backend that does not change security groups on a running testbed says so."""
        raise UnsupportedError(f"{self.run.meta().get('backend', 'this backend')} cannot change "
                               f"security-group rules on a running testbed (run {self.run_id})")

    no_ports = "not implemented"            # why a backend does not add ports

    def add_port(self, host: str, vnet: str) -> dict:
        """A backend that does not add ports to a running testbed says so, and why."""
        from vnetbench.errors import UnsupportedError
        raise UnsupportedError(f"{self.run.meta().get('backend', 'this backend')}: no ports without "
                               f"a VM: {self.no_ports}")

    def remove_port(self, name: str) -> None:
        self.add_port("", "")                                # refuses

    def added_ports(self) -> dict:
        """The ports added to the running testbed: name -> its record (add_port's)."""
        return {}

    def ports_ready(self, host: str, names) -> dict:
        return self.add_port(host, "")                       # refuses

    def port_popen(self, name: str, argv, **kwargs):
        return self.add_port("", "")                         # refuses

    no_migration = "not implemented"        # why a backend does not migrate VMs

    def migration_target(self, vm: str, to_host: str) -> str:
        """A backend that does not migrate VMs says so, and why."""
        raise UnsupportedError(f"{self.run.meta().get('backend', 'this backend')}: no VM migration: "
                               f"{self.no_migration}")

    def migrate_vm(self, vm: str, to_host: str, live: bool) -> dict:
        return self.migration_target(vm, to_host)           # refuses

    def vm_moved(self, vm: str, to_host: str, **meta) -> None:
        """The run's testbed (and this object's) says VM runs on TO_HOST now, on its CPUs;
        META is written beside it, in the same write."""
        import dataclasses

        from vnetbench.testbed.codec import to_dict
        tb = self.testbed
        v, dst = tb.vm(vm), tb.host(to_host)
        moved = dataclasses.replace(v, host=dst.name, cpus=dst.cpus)
        new_tb = dataclasses.replace(tb, vms=tuple(moved if x is v else x for x in tb.vms))
        self.run.write_meta(testbed=to_dict(new_tb), **meta)
        self.testbed = new_tb

    def down(self) -> list[str]:
        return deployment.teardown(self.run)
