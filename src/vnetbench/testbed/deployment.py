"""The one interface every backend implements (netns, libvirt, OpenStack).

The battery, the Rally scenarios, the CPU windows, the monitor and the functional suite
use only this: they never import a backend. ``attach`` finds a run's backend in its
state (``meta.json``: ``backend``; runs from before the key existed are netns).
"""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

from vnetbench.errors import VnetbenchError
from vnetbench.state import Run, find_run
from vnetbench.testbed import unwind as _unwinder
from vnetbench.testbed.model import Testbed

# backend name -> "module:class" of its Deployment
BACKENDS = {"netns": "vnetbench.testbed.netns.deployment:Deployment",
            "libvirt": "vnetbench.testbed.libvirt.deployment:LibvirtDeployment",
            "openstack": "vnetbench.testbed.openstack.deployment:OpenstackDeployment"}
DEFAULT_BACKEND = "netns"
# backend name -> "module:function" that builds a Testbed and returns its Deployment
BUILDERS = {"netns": "vnetbench.testbed.netns.builder:up",
            "libvirt": "vnetbench.testbed.libvirt.builder:up",
            "openstack": "vnetbench.testbed.openstack.builder:up"}
# The run directory's subdirectory for the controller's daemons (SDN controllers, OVN
# databases and northd): they belong to no emulated host.
CONTROLLER_DIR = "controller"


@runtime_checkable
class Deployment(Protocol):
    """What a backend built from a Testbed, re-attachable from the run's state alone."""

    backend: str
    testbed: Testbed
    run: Run                            # the run's journal and meta (vnetbench.state)

    @property
    def run_id(self) -> str: ...

    def ip(self, vm: str, vnet: str | None = None) -> str:
        """The VM's address on VNET (its first NIC by default)."""

    def reach(self, src: str, dst: str) -> str:
        """The address SRC sends to to reach DST (from outside the cloud: its floating IP)."""

    def vm_argv(self, vm: str, argv: Sequence[str]) -> list[str]:
        """ARGV as run in the VM (for a caller that runs it itself: ``testbed exec``)."""

    def exec(self, vm: str, argv: Sequence[str], timeout: float | None = 60) -> subprocess.CompletedProcess:
        """Run ARGV in the VM (pinned to its CPUs) and wait; text output captured."""

    def popen(self, vm: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ARGV in the VM in the background, journaled so teardown stops it."""

    def host_argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """ARGV as run on HOST's side (its vSwitch's namespace or machine)."""

    def host_popen(self, host: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ARGV on HOST's side in the background, journaled so teardown stops it."""

    def link_popen(self, host: str, link: str, argv_of, **kwargs) -> subprocess.Popen:
        """Start ``argv_of(interface)`` (a capture) where HOST's LINK (an underlay link or a
        VM's port) is seen as a wire is: on HOST's side, unless a backend's datapath hides
        the link's frames from HOST's kernel; journaled like ``host_popen``."""

    def vm_port(self, vm: str, nic: int = 0) -> tuple[str, str]:
        """(host, port name) of the VM NIC's port on its host's vSwitch (where a host-side
        qdisc (``shaped_port``) or capture (``link_popen``) goes)."""

    def shaped_port(self, vm: str, nic: int = 0):
        """Context manager: ``vm_port``, through which what reaches the VM passes the host
        kernel's qdiscs for the block (a vSwitch may transmit below them otherwise)."""

    def host_file(self, host: str, name: str) -> Path:
        """A file of HOST's run directory (daemon pidfiles, unixctl sockets)."""

    def vswitch_pids(self, host: str) -> dict:
        """{program: pid} of the vSwitch daemons this run started on HOST."""

    def vm_pidfiles(self, host: str) -> list[Path]:
        """Pidfiles of the host-side processes that are HOST's VMs (QEMU), for its
        collector; none where a VM is no process (a namespace)."""

    def controller_pids(self) -> dict:
        """{name: pid} of the run's controller daemons (none for kinds without one)."""

    def ovs_appctl(self, host: str, *args, timeout: float = 10) -> str:
        """ovs-appctl against HOST's ovs-vswitchd (datapath facts, flow cache)."""

    def expire_flows(self, layers=None) -> None:
        """Empty the per-flow state of LAYERS (vnetbench.testbed.flowstate: "datapath",
        "controller", "agent"; None: all the kind has): the state those layers' idle
        timeouts leave, so the next packet takes the path it takes after that much time."""

    def settle(self, timeout: float = 5.0) -> float:
        """Return once the data plane has finished with the previous load -- a reactive
        kind's agent still setting up flows queued during it -- or after ``timeout``:
        the seconds waited. A measurement starts after it (``battery.common.repeat``),
        so none runs beside the last one's backlog. 0 where nothing is queued, or where
        the backend cannot see it."""

    def cpu_probe(self, wait: bool = True) -> Path | None:
        """The snapshot file of the run's interrupt-time probe (docs/metrics.md, method
        bpf), started on first use and owned by the run; None where it is not needed
        or cannot run (the CPU split then uses /proc/stat). ``wait``: until its first
        snapshot."""

    def restart_vswitch(self, host: str) -> None:
        """Restart HOST's vSwitch the way an operator restarts that kind (OVS kinds:
        ``ovs-vswitchd`` on the same database; a Linux bridge: down and up); returns once
        the host forwards again. UnsupportedError where the backend cannot."""

    def set_mgmt_link(self, host: str, up: bool) -> None:
        """Cut (``up=False``) or heal HOST's management link at the controller's bridge;
        the tenant underlay is untouched. UnsupportedError where the backend cannot."""

    def remove_vnet(self, vnet: str) -> None:
        """Deprovision VNET from the running testbed as the kind's cloud does; journaled.
        UnsupportedError (before anything changes) where the backend cannot."""

    def remove_router_interface(self, router: str, vnet: str) -> None:
        """Remove ROUTER's interface on VNET as the kind's cloud does (Neutron's
        remove_router_interface): the vnet's VMs lose their route through it; journaled.
        UnsupportedError (before anything changes) where the backend cannot."""

    def update_security_groups(self, groups) -> float:
        """Replace the rules of the testbed's security groups (the same group names; the
        ports keep theirs) as the cloud's API would, and return once the kind applied
        them: the seconds that took. UnsupportedError (before anything changes) where the
        backend or kind cannot."""

    def migration_target(self, vm: str, to_host: str) -> str:
        """Where VM would run on TO_HOST (the host's name, or the cloud's compute node that
        testbed host stands for); refuses -- UnsupportedError for what the backend or the
        credentials cannot do, VnetbenchError for a move that makes no sense -- before
        anything changes."""

    def migrate_vm(self, vm: str, to_host: str, live: bool) -> dict:
        """Move VM to testbed host TO_HOST as its hypervisors do: live (the VM keeps running)
        or cold (shut down, moved, booted); returns once it runs there (cold: booted, its
        command channel answering), with ``move_s`` and what else the backend measured
        (a cloud's cold move: ``outage_s``). The run's testbed then says the new host.
        Refuses as ``migration_target`` does, before anything changes. The fault API
        (vnetbench.faults) measures the downtime around it."""

    def add_port(self, host: str, vnet: str) -> dict:
        """Plug a new port (no VM) on HOST's vSwitch on VNET, as the kind's agent or os-vif
        plugs a VM's NIC, with just enough behind it to answer a probe; its record (name,
        host, vnet, ip, mac). Owned and journaled. UnsupportedError (before anything
        changes) where the backend or kind cannot."""

    def remove_port(self, name: str) -> None:
        """Unplug and remove an added port."""

    def ports_ready(self, host: str, names) -> dict:
        """Of HOST's added ports NAMES, those the kind's own readiness signal calls
        programmed: name -> the wall-clock time the system says it was (None where it
        does not say; vnetbench.testbed.readiness); one query per call."""

    def port_popen(self, name: str, argv, **kwargs) -> subprocess.Popen:
        """Start ARGV behind added port NAME (its namespace), journaled like ``popen``."""

    def status(self) -> dict: ...

    def down(self) -> list[str]:
        """Tear everything down from the state; the errors of steps that failed."""


def backend_class(name: str):
    try:
        module, cls = BACKENDS[name].split(":")
    except KeyError:
        raise VnetbenchError(f"backend {name!r} is not available; use one of "
                             f"{', '.join(sorted(BACKENDS))}") from None
    return getattr(importlib.import_module(module), cls)


def build(backend: str, testbed: Testbed, **options) -> Deployment:
    """Realise TESTBED with BACKEND (options are the backend's own: caps, image_dir, ...)."""
    if backend not in BUILDERS:
        raise VnetbenchError(f"backend {backend!r} is not available; use one of "
                             f"{', '.join(sorted(BUILDERS))}")
    module, func = BUILDERS[backend].split(":")
    return getattr(importlib.import_module(module), func)(testbed, **options)


def attach(ref: str | None = None) -> Deployment:
    """The deployment of run REF (id or testbed name; the only run when None)."""
    return of(find_run(ref))


def of(run: Run) -> Deployment:
    """The deployment of RUN, by the backend its meta names; a damaged run directory is
    a one-line error pointing at cleanup."""
    return backend_class(run.meta().get("backend", DEFAULT_BACKEND)).of(run)


def teardown(run: Run, **options) -> list[str]:
    """Undo everything RUN's journal records, whatever built it (``down`` on a damaged
    run, ``cleanup``); the errors of steps that failed."""
    return _unwinder.teardown(run, **options)


def unwind(run: Run, exc: BaseException, source: str) -> None:
    """Tear a failed or interrupted bring-up of RUN down, then raise what the caller
    should see (a BuildError naming SOURCE, or the interrupt)."""
    _unwinder.unwind(run, exc, source)


def remove_stale(dirs) -> list:
    """Remove state directories of runs that died before journaling anything."""
    return _unwinder.remove_stale(dirs)


def missing(cls) -> list[str]:
    """Protocol members CLS lacks: methods, and attributes it neither defines nor
    declares (a backend annotates what its __init__ sets)."""
    members = {n for n in dir(Deployment) if not n.startswith("_")} | set(Deployment.__annotations__)
    declared = {n for k in cls.__mro__ for n in getattr(k, "__annotations__", {})}
    return sorted(n for n in members if not hasattr(cls, n) and n not in declared)
