"""A built testbed: run commands in its VMs and hosts, report status, tear it down."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pyroute2 import netns

from vnetbench import kinds
from vnetbench.linux import proc
from vnetbench.state import Run
from vnetbench.testbed.base import RunDeployment
from vnetbench.testbed.deployment import CONTROLLER_DIR
from vnetbench.testbed.model import ROUTER, SVI, Testbed
from vnetbench.testbed.netns import mgmt, ports, veths
from vnetbench.testbed.netns.names import Names



class Deployment(RunDeployment):
    """What the netns backend built; everything it needs is in the run's state.
    Implements vnetbench.testbed.deployment.Deployment."""

    backend = "netns"

    def __init__(self, run: Run, testbed: Testbed):
        super().__init__(run, testbed)
        self.names = Names(run.run_id)

    def vm_argv(self, vm: str, argv) -> list[str]:
        """argv run inside the VM, pinned to the VM's CPUs (as a pinned guest would be).
        A router's or an external host's name runs it there (a router on its host's CPUs;
        an external host, outside the cloud, on none in particular)."""
        tb = self.testbed
        if any(r.name == vm for r in tb.routers):       # an L3 switch is its host itself
            r = tb.router(vm)
            ns = self.names.host_ns(r.host) if r.routing == SVI else self.names.vm_ns(vm)
            return proc.in_netns(ns, argv, tb.host(r.host).cpus)
        if tb.external_host(vm) is not None:
            return proc.in_netns(self.names.external_ns(vm), argv)
        v = tb.vm(vm)
        return proc.in_netns(self.names.vm_ns(v.name), argv, v.cpus)

    def host_argv(self, host: str, argv) -> list[str]:
        h = self.testbed.host(host)
        return proc.in_netns(self.names.host_ns(h.name), argv, h.cpus)

    def popen(self, vm: str, argv, **kwargs) -> subprocess.Popen:
        """A background process in a VM, journaled so teardown stops it."""
        return self._spawn(self.vm_argv(vm, argv), argv, kwargs, vm=vm)

    def host_popen(self, host: str, argv, **kwargs) -> subprocess.Popen:
        """A background process on a host's side (e.g. a capture on its underlay), journaled."""
        return self._spawn(self.host_argv(host, argv), argv, kwargs, host=host)

    def link_popen(self, host: str, link: str, argv_of, **kwargs) -> subprocess.Popen:
        """On the host's side; with AF_XDP ports at the veth's other end (the fabric's
        'switch port' of an underlay cable, a VM's NIC): OVS reads and writes an AF_XDP
        port below the host's kernel, whose captures then see none of its frames (a DPDK
        port hides them alike). Both ends of a veth carry the same frames."""
        far = self._far_end(host, link) if self.run.meta().get("ovs_ports") == "afxdp" else None
        if far is None:
            return self.host_popen(host, argv_of(link), **kwargs)
        ns, dev = far
        argv = argv_of(dev)
        return self._spawn(proc.in_netns(ns, argv, self.testbed.host(host).cpus), argv, kwargs, host=host)

    def _far_end(self, host: str, link: str) -> tuple[str, str] | None:
        """(namespace, interface) of the other end of HOST's veth LINK (its uplink, a
        physnet, a VM's port); None for another link."""
        ends = {v.name: (v.peer_ns, v.peer) for v in veths.host_veths(self.testbed, self.names, host)}
        return ends.get(link)

    def shaped_port(self, vm: str, nic: int = 0):
        """The kind keeps the port's transmit in the kernel for the block (an AF_XDP port
        becomes an AF_PACKET one: AF_XDP transmits below the qdiscs)."""
        host, port = self.vm_port(vm, nic)
        return kinds.netns_driver(self.testbed).kernel_egress(self, self.testbed.host(host), port)

    def vm_port(self, vm: str, nic: int = 0) -> tuple[str, str]:
        v = self.testbed.vm(vm)
        return v.host, self.names.vm_port(self.testbed.vms.index(v), nic)

    def host_file(self, host: str, name: str) -> Path:
        """A file of ``host``'s run directory: its daemons' pidfiles, unixctl sockets, logs."""
        return self.run.dir / self.testbed.host(host).name / name

    def vswitch_pids(self, host: str) -> dict:
        """{program: pid} of the vSwitch daemons this run started on ``host`` (none for
        kernel-only vSwitches), from the pidfiles in the host's run directory."""
        pids = {}
        for prog in kinds.of(self.testbed).host_daemons:
            try:
                pids[prog] = int(self.host_file(host, f"{prog}.pid").read_text())
            except (OSError, ValueError):
                continue
        return pids

    def vm_pidfiles(self, host: str) -> list[Path]:
        return []                       # a VM is a namespace, not a process

    def controller_pids(self) -> dict:
        """{name: pid} of the run's controller daemons (none for kinds without one),
        from the pidfiles of the controller directory."""
        pids = {}
        for pidfile in sorted((self.run.dir / CONTROLLER_DIR).glob("*.pid")):
            try:
                pids[pidfile.stem] = int(pidfile.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return pids

    def ovs_appctl(self, host: str, *args, timeout: float = 10) -> str:
        """ovs-appctl against this run's ovs-vswitchd of ``host``."""
        ctl = self.host_file(host, "ovs-vswitchd.ctl")
        return proc.run(["ovs-appctl", "-t", str(ctl), *args], timeout=timeout,
                        what=f"ovs-appctl on {host}")

    def expire_flows(self, layers=None) -> None:
        """Empty the flow state of LAYERS (vnetbench.testbed.flowstate: "datapath",
        "controller", "agent"; None: every layer the kind has) on every host, the way the
        kind holds it (``NetnsDriver.expire``)."""
        from vnetbench.testbed import flowstate
        layers = {s.layer for s in flowstate.layers(self.testbed)} if layers is None else set(layers)
        kinds.netns_driver(self.testbed).expire(self, layers)

    def settle(self, timeout: float = 5.0) -> float:
        """The kind's own idea of idle (``NetnsDriver.settle``)."""
        return kinds.netns_driver(self.testbed).settle(self, timeout)

    def cpu_probe(self, wait: bool = True) -> Path | None:
        from vnetbench.testbed.netns import cpuprobe
        return cpuprobe.ensure(self, wait=wait)

    def restart_vswitch(self, host: str) -> None:
        """The kind's restart of HOST's vSwitch (``NetnsDriver.restart``)."""
        kinds.netns_driver(self.testbed).restart(self, self.testbed.host(host))

    def set_mgmt_link(self, host: str, up: bool) -> None:
        mgmt.set_link(self, host, up=up)

    def remove_vnet(self, vnet: str) -> None:
        """Deprovision ``vnet`` from the running testbed (``deprovision``): it stops being
        switched; its VMs stay, unplugged. Journaled first; recorded in the run's meta."""
        from vnetbench.testbed.netns import deprovision
        v = self.testbed.vnet(vnet)
        self.run.record("deprovision", vnet=v.name)
        deprovision.remove(self, v)
        self.run.write_meta(removed_vnets=sorted({*self.removed_vnets, v.name}))

    def remove_router_interface(self, router: str, vnet: str) -> None:
        """Remove ROUTER's interface on VNET from the running testbed, as Neutron's L3 agent
        does (``l3.remove_interface``); journaled first, recorded in the run's meta."""
        r = self.testbed.router(router)
        r.port(vnet)                                  # KeyError naming both, before any change
        if r.routing != ROUTER:
            from vnetbench.errors import UnsupportedError
            raise UnsupportedError(f"router {r.name!r} (routing: {r.routing}): removing an interface applies "
                                   "to the kind's own router (routing: router)")
        in_use = [f for f in self.testbed.floating_ips if f.vnet == vnet]
        if in_use:                                    # Neutron: RouterInterfaceInUseByFloatingIP
            from vnetbench.errors import VnetbenchError
            raise VnetbenchError(f"router {r.name!r}: its interface on vnet {vnet!r} is needed by floating "
                                 f"IP {in_use[0].ip} of VM {in_use[0].vm!r} (Neutron refuses to remove it); "
                                 "remove another interface")
        self.run.record("router_interface_removed", router=r.name, vnet=vnet)
        kinds.netns_driver(self.testbed).remove_router_interface(self, r, vnet)
        removed = self.run.meta().get("removed_router_interfaces", [])
        self.run.write_meta(removed_router_interfaces=[*removed, [r.name, vnet]])

    def update_security_groups(self, groups) -> float:
        """New rules for the testbed's groups, applied by the kind's agents; the testbed
        in the run's meta follows, so a later attach sees them."""
        import time

        from vnetbench.testbed.codec import to_dict
        from vnetbench.testbed.netns.context import context
        from vnetbench.testbed.secgroups import replaced
        before = self.testbed
        self.testbed, changed = replaced(before, groups, self.run_id)
        t0 = time.monotonic()
        try:
            kinds.netns_driver(self.testbed).update_security_groups(self, context(self), changed)
        except BaseException:
            self.testbed = before
            raise
        took = time.monotonic() - t0
        self.run.write_meta(testbed=to_dict(self.testbed))
        return took

    def migration_target(self, vm: str, to_host: str) -> str:
        from vnetbench.testbed.netns import migrate
        migrate.check(self, vm, to_host)
        return to_host

    def migrate_vm(self, vm: str, to_host: str, live: bool) -> dict:
        """The VM's NICs re-plugged into TO_HOST's vSwitch (``netns.migrate``)."""
        from vnetbench.testbed.netns import migrate
        return migrate.migrate(self, vm, to_host, live)

    def add_port(self, host: str, vnet: str) -> dict:
        return ports.add(self, host, vnet)

    def remove_port(self, name: str) -> None:
        ports.remove(self, name)

    def added_ports(self) -> dict:
        return self.run.meta().get("ports", {})

    def ports_ready(self, host: str, names) -> dict:
        return ports.ready(self, host, names)

    def port_popen(self, name: str, argv, **kwargs) -> subprocess.Popen:
        return self._spawn(ports.ns_argv(self, name, argv), argv, kwargs, port=name)

    @property
    def removed_vnets(self) -> list[str]:
        return self.run.meta().get("removed_vnets", [])

    def status(self) -> dict:
        meta = self.run.meta()
        present = set(netns.listnetns())
        tb = self.testbed
        return {
            "run_id": self.run_id, "name": tb.name, "status": meta.get("status"),
            "vswitch": tb.vswitch.kind.value, "network": tb.network.type.value,
            "ovs_datapath": meta.get("ovs_datapath"), "ovs_ports": meta.get("ovs_ports"),
            "underlay_mtu": tb.network.underlay_mtu, "tenant_mtu": tb.network.tenant_mtu,
            "up_seconds": meta.get("up_seconds"),
            "hosts": [{"name": h.name, "cpus": list(h.cpus), "underlay_ip": str(h.underlay_ip),
                       "netns": self.names.host_ns(h.name),
                       "present": self.names.host_ns(h.name) in present} for h in tb.hosts],
            "vms": [{"name": v.name, "host": v.host, "cpus": list(v.cpus),
                     "netns": self.names.vm_ns(v.name), "present": self.names.vm_ns(v.name) in present,
                     "nics": [{"vnet": n.vnet, "ip": str(n.ip), "mac": n.mac} for n in v.nics]}
                    for v in tb.vms],
            "removed_vnets": meta.get("removed_vnets", []),
            "ports": [{k: p[k] for k in ("name", "host", "vnet", "ip", "netns")}
                      for p in meta.get("ports", {}).values()],
            "controller": self._controller_status(present),
            "errors": meta.get("errors", []),
        }

    def _controller_status(self, present) -> dict | None:
        """The controller namespace and its daemons (journaled, so a stopped one is
        listed too) with their pids, None when stopped; None without a controller."""
        ns, ctl_dir = self.names.ctl_ns, self.run.dir / CONTROLLER_DIR
        names = [Path(e["pidfile"]).stem for e in self.run.entries()
                 if e["kind"] == "daemon" and Path(e.get("pidfile", "")).parent == ctl_dir]
        if ns not in present and not names:
            return None
        running = {n: pid for n, pid in self.controller_pids().items() if proc.cmdline(pid)}
        return {"netns": ns, "present": ns in present,
                "daemons": {n: running.get(n) for n in dict.fromkeys(names)}}
