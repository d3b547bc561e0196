"""A libvirt testbed: the netns backend's hosts and vSwitches, VMs that are QEMU guests
reached over SSH (vnetbench.image.channel). Implements vnetbench.testbed.deployment."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from vnetbench.errors import PrerequisiteError
from vnetbench.image.channel import Ssh
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.netns.deployment import Deployment as NetnsDeployment

URI = "qemu:///system"
# the remote command dies with the SSH session: a killed background process must not
# keep running in the guest (a stale iperf3 server would hold its port)
_TIED = 'exec 3<&0; "$@" & p=$!; (read x <&3; kill $p) >/dev/null 2>&1 & exec 3<&-; wait $p'


def connect(uri: str = URI):
    """A libvirt connection. Where no systemd starts libvirtd (this machine class), root
    starts virtlogd and libvirtd once: system services, not objects of a run."""
    try:
        import libvirt
    except ImportError:
        raise PrerequisiteError("libvirt-python is not installed; run 'make install'") from None
    libvirt.registerErrorHandler(lambda ctx, err: None, None)   # errors arrive as exceptions
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        first = str(exc).splitlines()[0]
    if uri == URI and os.geteuid() == 0 and not os.path.isdir("/run/systemd/system"):
        for daemon in ("virtlogd", "libvirtd"):
            subprocess.run([daemon, "-d"], capture_output=True, timeout=30)
        for _ in range(50):
            try:
                return libvirt.open(uri)
            except libvirt.libvirtError:
                time.sleep(0.1)
    raise PrerequisiteError(f"libvirt at {uri}: {first}; start the daemons (without systemd: "
                            "'virtlogd -d; libvirtd -d')")


def _by_name(argv) -> list[str]:
    argv = list(map(str, argv))
    if argv and argv[0].startswith("/"):
        argv[0] = argv[0].rsplit("/", 1)[1]
    return argv


class LibvirtDeployment(NetnsDeployment):
    backend = "libvirt"

    def ssh(self, vm: str) -> Ssh:
        vm_i = [v.name for v in self.testbed.vms].index(vm)
        n = dom.Names(self.run_id)
        address = f"{dom.link_local(dom.mgmt_mac(self.run_id, vm_i))}%{dom.MGMT_BRIDGE}"
        return Ssh(address, self.run.dir / "guest-key", Path(f"/tmp/vnbmux-{self.run_id}"),
                   netns=n.mgmt_ns)

    def vm_argv(self, vm: str, argv) -> list[str]:
        """argv run in the guest (its vCPUs are pinned by libvirt). Tools run by name: an
        absolute path on the runner's machine (e.g. .venv/bin/vnetbench-flowgen) means
        nothing in the guest, whose image has them on PATH."""
        return self.ssh(self.testbed.vm(vm).name).argv(_by_name(argv))

    def exec(self, vm: str, argv, timeout: float | None = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.vm_argv(vm, argv), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, vm: str, argv, **kwargs) -> subprocess.Popen:
        kwargs.pop("stdin", None)       # the session's stdin ties the guest process to it
        tied = ["sh", "-c", _TIED, "sh", *_by_name(argv)]
        p = subprocess.Popen(self.ssh(vm).argv(tied), stdin=subprocess.PIPE, start_new_session=True,
                             **kwargs)
        from vnetbench.testbed.netns import proc
        self.run.record("process", pid=p.pid, starttime=proc.starttime(p.pid), vm=vm,
                        argv=list(map(str, argv)))
        return p

    def status(self) -> dict:
        st = super().status()
        conn = connect()
        try:
            names = {d.name(): d.isActive() for d in conn.listAllDomains()}
        finally:
            conn.close()
        for vm in st["vms"]:
            name = dom.Names(self.run_id).domain(vm["name"])
            vm.update(domain=name, present=bool(names.get(name)))
        st["backend"] = self.backend
        return st
