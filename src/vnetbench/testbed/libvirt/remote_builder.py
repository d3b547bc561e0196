"""Guests on a remote KVM host (a ``qemu+ssh://`` URI to another machine): nothing of the
testbed is built on this machine. On the hypervisor, over SSH, the run makes its own
bridge in that host's Open vSwitch (one access VLAN per vnet; the datapath the host's
bridges use) or one Linux bridge per vnet, a management bridge, and a directory with the
image; libvirt there makes each guest's taps and plugs them, as Nova's libvirt driver
does. The command channel is SSH to the guest's link-local address on the management
bridge, proxied through the hypervisor. Every object carries the run id and is journaled
before it exists; teardown and cleanup remove it on the hypervisor.

One host per testbed: tunnels between remote hypervisors are not built."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from vnetbench import kinds, signals
from vnetbench.errors import VnetbenchError
from vnetbench.image import qemu, recipe
from vnetbench.linux import proc
from vnetbench.linux.libvirtd import connect
from vnetbench.state import Run, new_run_id, state_root
from vnetbench.testbed.codec import to_dict
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.remote import REMOTE_ROOT, Hypervisor
from vnetbench.testbed.libvirt.remote_deployment import RemoteLibvirtDeployment, bridge_names
from vnetbench.testbed.deployment import unwind



def check(testbed, uris: dict[str, str]) -> None:
    """What a remote hypervisor can host today: one line naming the fix otherwise."""
    if len(testbed.hosts) != 1:
        raise VnetbenchError(f"{testbed.source}: a testbed on a remote hypervisor ({uris}) has one "
                             f"host for now (tunnels between hypervisors are not built); it has "
                             f"{len(testbed.hosts)}: give it one host")
    if kinds.of(testbed).remote_bridges is None:
        able = [k.name for k in kinds.all_kinds() if k.remote_bridges]
        raise VnetbenchError(f"{testbed.source}: vswitch.kind {testbed.vswitch.kind.value} on a remote "
                             f"hypervisor: use one of {', '.join(able)}")


def up(testbed, kernel: Path, initrd: Path, memory_mib: int, uris: dict[str, str], domain_type: str,
       guest_key, check_pinning, progress=lambda msg: None) -> RemoteLibvirtDeployment:
    check(testbed, uris)
    for uri in dict.fromkeys(uris.values()):
        Hypervisor.of(uri).reach()
    run = Run(new_run_id(), state_root())
    run.create(status="building", name=testbed.name, backend="libvirt", created=time.time(),
               builder_pid=os.getpid(), testbed=to_dict(testbed), remote=True, libvirt_uris=uris,
               memory_mib=memory_mib, domain_type=domain_type)
    try:
        with signals.deferred():
            try:
                _Remote(run, testbed, uris, guest_key, check_pinning).build(
                    kernel, initrd, memory_mib, domain_type, progress)
                signals.checkpoint()
            except BaseException as exc:
                unwind(run, exc, testbed.source)
    finally:
        run.unlock()
    return RemoteLibvirtDeployment(run, testbed)


class _Remote:
    def __init__(self, run: Run, testbed, uris, guest_key, check_pinning):
        self.run, self.tb = run, testbed
        self.host = testbed.hosts[0].name
        self.uri = uris[self.host]
        self.hv = Hypervisor.of(self.uri)
        self.mux = Path(f"/tmp/vnbmux-{run.run_id}")
        self.rdir = f"{REMOTE_ROOT}/vnb-{run.run_id}"
        self.n = dom.Names(run.run_id)
        self.bridges = bridge_names(run.run_id, testbed)
        self.guest_key, self.check_pinning = guest_key, check_pinning

    def sh(self, command: str, **kw):
        return self.hv.run(self.mux, command, **kw)

    def build(self, kernel, initrd, memory_mib, domain_type, progress) -> None:
        t0 = time.monotonic()
        self.run.record("muxdir", path=str(self.mux))
        self.mux.mkdir(mode=0o700, exist_ok=True)
        self.run.record("remote_dir", uri=self.uri, path=self.rdir)
        self.sh(f"mkdir -m 700 {self.rdir}")
        for f in (kernel, initrd):
            self.hv.upload(self.mux, f, f"{self.rdir}/{f.name}")
        progress(f"image on {self.hv.host} ({time.monotonic() - t0:.1f} s)")
        self._bridges()
        key = self.guest_key(self.run)
        conn = connect(self.uri)
        try:
            for vm_i, vm in enumerate(self.tb.vms):
                self._boot(conn, vm_i, vm, key, (kernel.name, initrd.name), memory_mib, domain_type)
        finally:
            conn.close()
        progress(f"{len(self.tb.vms)} guests started on {self.hv.host} ({time.monotonic() - t0:.1f} s)")
        self._wait_ready(t0)
        dep = RemoteLibvirtDeployment(self.run, self.tb)
        for vm in self.tb.vms:
            master = dep.ssh(vm.name).open(timeout_s=120)
            self.run.record("process", pid=master.pid, starttime=proc.starttime(master.pid),
                            vm=vm.name, argv=["ssh", "master"])
        progress(f"guests ready ({time.monotonic() - t0:.1f} s)")
        self.run.write_meta(status="up", guests_ready_s=round(time.monotonic() - t0, 2),
                            up_seconds=time.monotonic() - t0,
                            pinning={vm.name: list(vm.cpus) for vm in self.tb.vms})

    def _bridges(self) -> None:
        """The run's own bridges on the hypervisor, stamped with the run id."""
        rid, mtu = self.run.run_id, self.tb.network.tenant_mtu
        if self.bridges["ovs"]:
            br = self.bridges["ovs"]
            out = self.sh("ovs-vsctl --bare --columns=datapath_type list bridge").stdout.decode()
            dp = next((t for t in out.split() if t), "system")   # the host's bridges' datapath
            self.run.record("remote_bridge", uri=self.uri, name=br, ovs=True)
            self.sh(f"ovs-vsctl -- add-br {br} -- set bridge {br} datapath_type={dp} "
                    f"external_ids:vnetbench-run={rid}")
            self.sh(f"ip link set {br} mtu {mtu} up")
        for name, what in self.bridges["linux"]:
            self.run.record("remote_bridge", uri=self.uri, name=name, ovs=False)
            alias = shlex.quote(self.n.alias(what))
            self.sh(f"ip link add {name} type bridge && ip link set {name} alias {alias} "
                    f"mtu {1500 if what == 'guest management' else mtu} up")

    def _plug(self, nic) -> dom.Plug:
        vi = [v.name for v in self.tb.vnets].index(nic.vnet)
        if self.bridges["ovs"]:
            return dom.Plug(self.bridges["ovs"], ovs=True, vlan=vi + 1)
        return dom.Plug(self.bridges["linux"][vi][0])

    def _boot(self, conn, vm_i, vm, key, boot, memory_mib, domain_type) -> None:
        nics = [(self.n.tap(vm_i, k), nic.mac, self._plug(nic)) for k, nic in enumerate(vm.nics)]
        mgmt = (self.n.mgmt_tap(vm_i), dom.mgmt_mac(self.run.run_id, vm_i),
                dom.Plug(self.bridges["mgmt"]))
        guest_nics = tuple(recipe.GuestNic(i, cidr, mtu) for i, cidr, mtu in dom.guest_nics(self.tb, vm))
        guest = dom.Guest(name=self.n.domain(vm.name), run_id=self.run.run_id, vcpus=vm.cpus,
                          memory_mib=memory_mib, kernel=f"{self.rdir}/{boot[0]}",
                          initrd=f"{self.rdir}/{boot[1]}",
                          cmdline=recipe.cmdline(guest_nics, key=key, mgmt=len(nics)),
                          nics=(*nics, mgmt), console=f"{self.rdir}/console-{vm.name}.log",
                          domain_type=domain_type)
        self.run.record("domain", name=guest.name, uri=self.uri)
        import libvirt
        try:
            d = conn.createXML(dom.domain_xml(guest), 0)
        except libvirt.libvirtError as exc:
            raise VnetbenchError(f"libvirt on {self.hv.host} could not start guest {guest.name}: {exc}; "
                                 f"{self._qemu_words(guest.name, vm.name)}") from None
        self.check_pinning(d, vm)

    def _qemu_words(self, domain: str, vm: str) -> str:
        """The end of libvirtd's log of DOMAIN and of VM's console, read on the hypervisor."""
        log, console = f"{qemu.LIBVIRT_LOGS}/{domain}.log", f"{self.rdir}/console-{vm}.log"
        words = [f"{what} ({path}): " + (qemu.tail(self.sh(f"tail -n 12 {shlex.quote(path)} 2>&1; true").stdout)
                                        or "empty")
                 for what, path in (("QEMU's log", log), ("console", console))]
        return "; ".join(words)

    def _wait_ready(self, t0, timeout_s: float = 180) -> None:
        consoles = " ".join(f"{self.rdir}/console-{vm.name}.log" for vm in self.tb.vms)
        want = len(self.tb.vms)
        while time.monotonic() - t0 < timeout_s:
            done = self.sh(f"grep -l {shlex.quote(recipe.READY)} {consoles} 2>/dev/null; true")
            if len(done.stdout.split()) == want:
                return
            time.sleep(1)
        late = [vm.name for vm in self.tb.vms
                if recipe.READY not in self.sh(f"cat {self.rdir}/console-{vm.name}.log 2>/dev/null; true").stdout]
        raise VnetbenchError(f"guests on {self.hv.host} not ready after {timeout_s:.0f} s: "
                             + "; ".join(f"{vm}: {self._qemu_words(self.n.domain(vm), vm)}" for vm in late))
