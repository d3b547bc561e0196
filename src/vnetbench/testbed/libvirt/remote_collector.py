"""A remote hypervisor's collector, and the monitor's way to scrape it.

A remote host's CPU is measured there (its ovs-vswitchd and ovsdb-server, the run's QEMU
threads, its softirq time), so a watched run starts vnetbench-collector on the hypervisor,
and the monitor's Prometheus scrapes it through the run's SSH connection: the collector
binds the hypervisor's 127.0.0.1 (nothing new listens on its network), and a socat in
the monitor's namespace (which has no routes) relays each scrape over ``ssh -W`` on the
run's multiplexed connection to the hypervisor.

The collector goes there as a zipapp of the collector package and prometheus-client built
from this installation: the hypervisor needs Python >= 3.11 (Debian 12's) and no pip, no
index, no internet. Everything is journaled before it exists: the collector by its
pidfile and its run-owned zipapp path (killed only if its command line names that file),
the relay and the SSH master by pid.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
import zipapp
from pathlib import Path

from vnetbench.errors import BuildError
from vnetbench.linux import proc
from vnetbench.testbed.libvirt.remote import REMOTE_ROOT

# where a hypervisor's own Open vSwitch keeps its pidfiles (Debian's openvswitch-switch)
OVS_PIDFILES = ("/run/openvswitch/ovs-vswitchd.pid", "/run/openvswitch/ovsdb-server.pid")
# where libvirt's system daemon keeps a running domain's QEMU pid
QEMU_PIDFILE = "/run/libvirt/qemu/{domain}.pid"
PYZ = "collector.pyz"


def zipapp_of(dest: Path) -> Path:
    """The collector and prometheus-client as one runnable file (``python3 DEST``)."""
    import prometheus_client
    import vnetbench_collector
    with tempfile.TemporaryDirectory() as tmp:
        for pkg in (vnetbench_collector, prometheus_client):
            src = Path(pkg.__file__).parent
            shutil.copytree(src, Path(tmp) / src.name, ignore=shutil.ignore_patterns("__pycache__"))
        zipapp.create_archive(tmp, dest, interpreter="/usr/bin/env python3",
                              main="vnetbench_collector.__main__:main")
    return dest


def collector_argv(pyz: str, host, kind: str, domains: list[str], port_file: str) -> list[str]:
    """The hypervisor's collector for testbed host HOST: the host's own vSwitch daemons and
    the run's QEMU processes by pidfile (never other tenants' guests), softirq of HOST's
    CPUs, datapath counters from the host's ovs-vswitchd."""
    argv = ["python3", pyz, "--host", host.name, "--vswitch", kind, "--listen", "127.0.0.1:0",
            f"--port-file={port_file}", "--cpus", ",".join(map(str, host.cpus))]
    from vnetbench import kinds
    if kinds.get(kind).uses_ovs:
        argv += [f"--pidfile={p}" for p in OVS_PIDFILES]
    else:                       # a Linux bridge host: no daemons, its kernel's softirq time
        argv += ["--no-datapath", "--no-processes"]
    return argv + [f"--pidfile={QEMU_PIDFILE.format(domain=d)}" for d in domains]


def start(dep, host, mon, timeout: float = 20.0) -> str:
    """Start HOST's collector on its hypervisor and the monitor's relay to it; the target
    (``127.0.0.1:PORT`` in the monitor's namespace) that Prometheus scrapes."""
    from vnetbench.testbed.libvirt import domain as dom
    run, hv = dep.run, dep.hypervisor(host.name)
    rdir = f"{REMOTE_ROOT}/vnb-{run.run_id}"
    _open_master(dep, hv)
    pyz = zipapp_of(run.dir / PYZ)
    hv.upload(dep.mux, pyz, f"{rdir}/{PYZ}")
    names = dom.Names(run.run_id)
    domains = [names.domain(vm.name) for vm in dep.testbed.vms if vm.host == host.name]
    port_file, pidfile = f"{rdir}/collector-{host.name}.port", f"{rdir}/collector-{host.name}.pid"
    argv = collector_argv(f"{rdir}/{PYZ}", host, dep.testbed.vswitch.kind.value, domains, port_file)
    run.record("remote_process", uri=hv.uri, pidfile=pidfile, mark=f"{rdir}/{PYZ}")
    hv.run(dep.mux, f"cd {rdir} && {{ setsid {shlex.join(argv)} >collector-{host.name}.log 2>&1 "
                    f"</dev/null & echo $! >{pidfile}; }}")
    rport = _remote_port(dep, hv, rdir, host.name, timeout)
    lport = _relay(dep, hv, mon, host.name, rport, timeout)
    (run.dir / f"collector-{host.name}.port").write_text(f"{lport}\n")
    return f"127.0.0.1:{lport}"


def _open_master(dep, hv) -> None:
    """One SSH connection to the hypervisor for the run's relays (and its other commands)."""
    ssh = hv.ssh(dep.mux)
    if subprocess.run(ssh.check_argv(), capture_output=True, timeout=10).returncode == 0:
        return
    master = ssh.open(timeout_s=30)
    dep.run.record("process", pid=master.pid, starttime=proc.starttime(master.pid),
                   argv=["ssh", "master", hv.host])


def _remote_port(dep, hv, rdir: str, name: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        out = hv.run(dep.mux, f"cat {rdir}/collector-{name}.port 2>/dev/null; "
                              f"kill -0 $(cat {rdir}/collector-{name}.pid) 2>/dev/null || echo dead",
                     check=False).stdout.decode().split()
        if out and out[0].isdigit():
            return int(out[0])
        if "dead" in out or time.monotonic() > deadline:
            log = hv.run(dep.mux, f"tail -n 3 {rdir}/collector-{name}.log", check=False)
            tail = (log.stdout.decode().strip().splitlines() or ["no output"])[-1]
            raise BuildError(f"vnetbench-collector on {hv.host} did not listen within {timeout:.0f} s: "
                             f"{tail[:200]} (log: {hv.host}:{rdir}/collector-{name}.log)")
        time.sleep(0.2)


def _relay(dep, hv, mon, name: str, rport: int, timeout: float) -> int:
    """socat in the monitor's namespace: each connection becomes ``ssh -W`` to the
    collector over the run's SSH master; its port, found from its own socket."""
    run = dep.run
    script = run.dir / f"relay-{name}.sh"
    script.write_text("#!/bin/sh\nexec " + shlex.join(hv.ssh(dep.mux).forward_argv(
        f"127.0.0.1:{rport}")) + "\n")
    script.chmod(0o755)
    pidfile = run.dir / f"relay-{name}.pid"
    run.record("daemon", name="socat", host=name, pidfile=str(pidfile), argmark=f"EXEC:{script}")
    p = subprocess.Popen(mon.argv(["socat", "TCP-LISTEN:0,bind=127.0.0.1,reuseaddr,fork",
                                   f"EXEC:{script}"]),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    pidfile.write_text(f"{p.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        port = listening_port(p.pid)
        if port:
            return port
        if p.poll() is not None:
            raise BuildError(f"socat (relay to the collector on {hv.host}) exited with {p.returncode}")
        time.sleep(0.05)
    raise BuildError(f"socat (relay to the collector on {hv.host}) did not listen within {timeout:.0f} s")


def listening_port(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    """The TCP port PID listens on (the lowest, if several)."""
    return min(proc.listening_ports(pid, proc_root), default=None)
