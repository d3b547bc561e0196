"""The libvirt backend on the embedded testbed: the netns backend builds the hosts, their
vSwitches and one namespace per VM; each VM then becomes a libvirt/QEMU guest booted from
the project's image, plugged the way Neutron's hybrid plugging does it: the guest's tap
and the vSwitch port's veth meet on a small Linux bridge in the VM's namespace (Neutron's
``qbr``). So every host-side object (vSwitch port, QoS, OVN iface-id, controller view) is
the one the netns backend made, and the guest keeps the testbed's MACs and addresses.

A management NIC per guest (last NIC) joins a bridge in a namespace of the run; the
command channel is SSH to the guest's IPv6 link-local address there: no address to plan,
no route to anything else.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from pyroute2 import IPRoute, NetNS, netns

from vnetbench.errors import BuildError, VnetbenchError
from vnetbench.image import qemu, recipe
from vnetbench.image.build import boot_files
from vnetbench.linux import links, proc
from vnetbench.linux.libvirtd import URI, connect
from vnetbench.state import Run
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.deployment import LibvirtDeployment
from vnetbench.testbed.libvirt.remote import is_remote
from vnetbench.testbed.netns import builder as netns_builder
from vnetbench.testbed.netns.names import Names as NetnsNames
from vnetbench.testbed.unwind import teardown

READY_TIMEOUT_S = 180          # TCG boots of several guests at once on 2 CPUs


def host_uris(testbed, uris) -> dict[str, str]:
    """{host: libvirt URI}: URIS is None (local qemu:///system), one URI for every host,
    or {host: URI} (hosts not named stay local). An unknown host is a one-line error."""
    if uris is None or isinstance(uris, str):
        return {h.name: uris or URI for h in testbed.hosts}
    names = [h.name for h in testbed.hosts]
    bad = sorted(set(uris) - set(names))
    if bad:
        raise VnetbenchError(f"libvirt URI for host {bad[0]!r}: the testbed has no such host; "
                             f"use one of {', '.join(names)}")
    return {h: uris.get(h, URI) for h in names}


def up(testbed, image_dir: Path, memory_mib: int = 256, caps=None, uris=None,
       progress=lambda msg: None) -> LibvirtDeployment:
    """URIS: the hypervisor of each host (``host_uris``). A ``qemu+ssh://`` URI to this
    machine (loopback) drives its libvirtd for guests on the emulated hosts' vSwitches;
    one to another machine puts the testbed on that remote KVM host
    (vnetbench.testbed.libvirt.remote_builder)."""
    if testbed.port_security:        # guests' taps are not the ports the kinds' firewalls know
        from vnetbench.errors import UnsupportedError
        raise UnsupportedError(f"{testbed.source}: security groups on libvirt guests are not realised "
                               "yet; use the netns backend (or remove security_groups)")
    if testbed.routers or testbed.external:
        from vnetbench.errors import UnsupportedError
        raise UnsupportedError(f"{testbed.source}: routers and floating IPs are realised on the netns "
                               "backend only yet (docs/routers.md); use it, or remove routers")
    kernel, initrd = boot_files(Path(image_dir))
    uris = host_uris(testbed, uris)
    remote = [u for u in uris.values() if is_remote(u)]
    if remote:
        from vnetbench.testbed.libvirt import remote_builder
        remote_builder.check(testbed, uris)
        dtype = "kvm" if os.environ.get("VNETBENCH_LIBVIRT_KVM") == "1" else "qemu"
        return remote_builder.up(testbed, kernel, initrd, memory_mib, uris, dtype, guest_key,
                                 _check_pinning, progress)
    conns = {}
    try:
        for uri in dict.fromkeys(uris.values()):
            conns[uri] = connect(uri)
    except BaseException:
        for c in conns.values():
            c.close()
        raise
    domain_type = "kvm" if _kvm_usable() else "qemu"
    if domain_type == "qemu":
        progress("libvirt: no usable KVM here, guests run under TCG (slow but real)")
    try:
        dep = netns_builder.up(testbed, caps=caps, progress=progress)
    except BaseException:
        for c in conns.values():
            c.close()
        raise
    run = dep.run
    run.write_meta(backend="libvirt", image={"kernel": str(kernel), "initrd": str(initrd)},
                   memory_mib=memory_mib, domain_type=domain_type, libvirt_uris=uris)
    try:
        _Guests(run, testbed, {h: conns[u] for h, u in uris.items()}, uris, kernel, initrd,
                memory_mib, domain_type).build(progress)
    except BaseException as exc:
        errors = teardown(run)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        left = f"; teardown also failed, run 'vnetbench cleanup --run {run.run_id}'" if errors else ""
        detail = str(exc) if isinstance(exc, VnetbenchError) else f"{type(exc).__name__}: {exc}"
        raise BuildError(f"{testbed.source}: libvirt guests of run {run.run_id} failed and the run "
                         f"was unwound: {detail}{left}") from exc
    finally:
        for c in conns.values():
            c.close()
    return LibvirtDeployment(run, testbed)


def _kvm_usable() -> bool:
    """KVM only where the host can boot a stock guest: this machine class's /dev/kvm runs
    PVM guests only (REFERENCE §4), so KVM is opt-in through VNETBENCH_LIBVIRT_KVM=1."""
    return os.environ.get("VNETBENCH_LIBVIRT_KVM") == "1" and os.path.exists("/dev/kvm")


class _Guests:
    def __init__(self, run: Run, testbed, conns, uris, kernel, initrd, memory_mib, domain_type):
        self.run, self.tb, self.conns, self.uris = run, testbed, conns, uris
        self.kernel, self.initrd, self.memory, self.dtype = kernel, initrd, memory_mib, domain_type
        self.n, self.nn = dom.Names(run.run_id), NetnsNames(run.run_id)

    def build(self, progress) -> None:
        t0 = time.monotonic()
        key = self._key()
        self._mgmt()
        consoles = {}
        for vm_i, vm in enumerate(self.tb.vms):
            self._hybrid_plug(vm_i, vm)
            consoles[vm.name] = self._boot(vm_i, vm, key)
        progress(f"{len(consoles)} guests started ({time.monotonic() - t0:.1f} s)")
        for name, console in consoles.items():
            _wait_ready(name, self.n.domain(name), console, READY_TIMEOUT_S)
        progress(f"guests ready ({time.monotonic() - t0:.1f} s)")
        dep = LibvirtDeployment(self.run, self.tb)
        for vm in self.tb.vms:          # one master connection per guest, owned by the run
            master = dep.ssh(vm.name).open(timeout_s=120)   # TCG guests on a busy machine
            self.run.record("process", pid=master.pid, starttime=proc.starttime(master.pid),
                            vm=vm.name, argv=["ssh", "master"])
        self.run.write_meta(guests_ready_s=round(time.monotonic() - t0, 2))

    def _key(self) -> str:
        return guest_key(self.run)

    def _mgmt(self) -> None:
        self.run.record("netns", name=self.n.mgmt_ns)
        netns.create(self.n.mgmt_ns)
        with NetNS(self.n.mgmt_ns) as ns:
            links.up(ns, "lo")
            links.bridge(ns, dom.MGMT_BRIDGE, 1500, self.n.alias("guest management"))
        mux = Path(f"/tmp/vnbmux-{self.run.run_id}")
        self.run.record("muxdir", path=str(mux))
        mux.mkdir(mode=0o700, exist_ok=True)

    def _hybrid_plug(self, vm_i, vm) -> None:
        """The VM namespace's NICs become ports of a qbr bridge each: no address, a MAC of
        their own (the guest's MAC must not be the bridge's), no IPv6 chatter."""
        mtu = self.tb.network.tenant_mtu
        with NetNS(self.nn.vm_ns(vm.name)) as ns:
            for k, _ in enumerate(vm.nics):
                eth = self.nn.vm_nic(k)
                idx = links.index(ns, eth)
                ns.flush_addr(index=idx)
                ns.link("set", index=idx, address=_side_mac(self.run.run_id, vm_i, k, 1))
                links.bridge(ns, f"qbr{k}", mtu, self.n.alias(f"hybrid plug vm={vm.name} nic={k}"))
                ns.link("set", index=links.index(ns, f"qbr{k}"),
                        address=_side_mac(self.run.run_id, vm_i, k, 2))
                links.up(ns, eth, master=f"qbr{k}")
        subprocess.run(["ip", "netns", "exec", self.nn.vm_ns(vm.name), "sysctl", "-q", "-w",
                        "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
                       check=True, capture_output=True)

    def _boot(self, vm_i, vm, key) -> Path:
        taps = [(self.n.tap(vm_i, k), nic.mac) for k, nic in enumerate(vm.nics)]
        mgmt = (self.n.mgmt_tap(vm_i), dom.mgmt_mac(self.run.run_id, vm_i))
        for tap, _ in [*taps, mgmt]:
            self.run.record("tap", name=tap)
            _tap(tap, self.tb.network.tenant_mtu, self.n.alias(f"tap vm={vm.name}"))
        console = self.run.dir / f"console-{vm.name}.log"
        nics = tuple(recipe.GuestNic(i, cidr, mtu) for i, cidr, mtu in dom.guest_nics(self.tb, vm))
        guest = dom.Guest(name=self.n.domain(vm.name), run_id=self.run.run_id, vcpus=vm.cpus,
                          memory_mib=self.memory, kernel=str(self.kernel), initrd=str(self.initrd),
                          cmdline=recipe.cmdline(nics, key=key, mgmt=len(taps)),
                          nics=(*taps, mgmt), console=str(console), domain_type=self.dtype)
        self.run.record("domain", name=guest.name, uri=self.uris[vm.host])
        d = _create(self.conns[vm.host], guest, console, remote=is_remote(self.uris[vm.host]))
        _check_pinning(d, vm)
        vns = self.nn.vm_ns(vm.name)
        for k, (tap, _) in enumerate(taps):
            _move(tap, vns, f"qbr{k}")
        _move(mgmt[0], self.n.mgmt_ns, dom.MGMT_BRIDGE)
        return console


def guest_key(run: Run) -> str:
    """A key pair of the run's (in its directory) for its guests' command channel."""
    path = run.dir / "guest-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"vnetbench-{run.run_id}",
                    "-f", str(path)], check=True, capture_output=True)
    return path.with_suffix(".pub").read_text()


def _side_mac(rid: str, vm_i: int, nic: int, which: int) -> str:
    b = bytes.fromhex(rid)
    return "0e:%02x:%02x:%02x:%02x:%02x" % (b[1], b[2], vm_i & 0xFF, nic, which)


def _tap(name: str, mtu: int, alias: str) -> None:
    """A tap in the root namespace (where libvirt's QEMU opens it), moved away after boot."""
    with IPRoute() as ip:
        ip.link("add", ifname=name, kind="tuntap", mode="tap")
        idx = ip.link_lookup(ifname=name)[0]
        ip.link("set", index=idx, mtu=mtu, ifalias=alias, state="up")


def _move(tap: str, ns_name: str, bridge: str) -> None:
    with IPRoute() as ip:
        ip.link("set", index=ip.link_lookup(ifname=tap)[0], net_ns_fd=ns_name)
    with NetNS(ns_name) as ns:
        links.up(ns, tap, master=bridge)


def _check_pinning(d, vm) -> None:
    """A pinning libvirt did not apply is an error, not a warning."""
    live = dom.pinning(d.XMLDesc(0))
    want = {i: str(c) for i, c in enumerate(vm.cpus)}
    if live != want:
        raise BuildError(f"VM {vm.name}: libvirt pinned vCPUs {live}, the testbed asks {want}")
    for i, cpumap in enumerate(d.vcpuPinInfo(0)):
        cpus = {c for c, on in enumerate(cpumap) if on}
        if cpus != {vm.cpus[i]}:
            raise BuildError(f"VM {vm.name}: vCPU {i} may run on CPUs {sorted(cpus)}, "
                             f"not only {vm.cpus[i]}")


def _create(conn, guest, console: Path, remote: bool):
    """Start the domain; libvirt's error names the failing step, QEMU's own words are in
    libvirtd's log of the domain (here, unless the hypervisor is remote) and the console."""
    import libvirt
    try:
        return conn.createXML(dom.domain_xml(guest), 0)
    except libvirt.libvirtError as exc:
        log = "on the remote hypervisor" if remote else qemu.libvirt_log(guest.name)
        raise BuildError(f"libvirt could not start guest {guest.name}: {exc}; QEMU's log "
                         f"({qemu.LIBVIRT_LOGS}/{guest.name}.log): {log}; "
                         f"console: {qemu.tail_file(console)}") from None


def _wait_ready(name: str, domain: str, console: Path, timeout_s: float) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if recipe.READY in console.read_text(errors="replace"):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise BuildError(f"guest {name} not ready after {timeout_s:.0f} s; console {console}: "
                     f"{qemu.tail_file(console)}; QEMU's log: {qemu.libvirt_log(domain, 4)}")
