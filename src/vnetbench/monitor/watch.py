"""Point a monitor at a testbed: one vnetbench-collector per emulated host, run in
the monitor's namespace (it reads the shared /proc; OVS is asked over its unixctl
socket), and a file-discovery target list that carries the testbed's run id.

The collectors and the target list belong to the *testbed* run: its journal
stops and removes them when the testbed goes down (or is cleaned up).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from vnetbench.errors import BuildError, VnetbenchError
from vnetbench.monitor.server import Monitor
from vnetbench.testbed.deployment import CONTROLLER_DIR

CONTROLLER = "controller"       # host label of the controller namespace's daemons


def _argv(host: str, kind: str, port_file: Path, cpus, probe_file: Path | None) -> list[str]:
    return [sys.executable, "-m", "vnetbench_collector", "--host", host, "--vswitch", kind,
            "--listen", "127.0.0.1:0", f"--port-file={port_file}", "--no-qemu",
            "--cpus", ",".join(map(str, cpus))] + (
                [f"--probe-file={probe_file}"] if probe_file else [])


def collector_argv(dep, host, port_file: Path, probe_file: Path | None = None) -> list[str]:
    """The collector of one emulated host: its own daemons (by pidfile), its CPUs,
    its ovs-vswitchd for datapath counters, the testbed's interrupt-time probe, its
    guests' QEMU processes where VMs are guests.
    A Linux bridge host has no daemons: only its kernel (softirq) metrics are exported."""
    argv = _argv(host.name, dep.testbed.vswitch.kind.value, port_file, host.cpus, probe_file)
    daemons = dep.vswitch_pids(host.name)
    if daemons:
        argv += [f"--pidfile={dep.host_file(host.name, prog + '.pid')}" for prog in daemons]
        argv += ["--ovs-target", str(dep.host_file(host.name, "ovs-vswitchd.ctl"))]
    else:
        argv += ["--no-processes", "--no-datapath"]
    # the host's guests (QEMU) by their pidfiles: vCPU, iothread and emulator threads,
    # never taken for the data plane; by pid, not by name (other users' VMs stay out)
    return argv + [f"--pidfile={path}" for path in dep.vm_pidfiles(host.name)]


def controller_argv(dep, port_file: Path, probe_file: Path | None = None) -> list[str] | None:
    """The collector of the controller namespace (OVN databases and northd, an SDN
    controller): its processes under host label "controller", all of them part
    "controller", no softirq (its CPUs are the hosts', already counted there); None
    when the kind has no controller."""
    names = dep.controller_pids()
    if not names:
        return None
    ctl = dep.run.dir / CONTROLLER_DIR
    return (_argv(CONTROLLER, dep.testbed.vswitch.kind.value, port_file, (), probe_file)
            + [f"--pidfile={ctl / (name + '.pid')}" for name in names]
            + ["--no-datapath", "--controller"])


def watch(dep, mon: Monitor, timeout: float = 10.0, scraped_within: float = 30.0) -> list[str]:
    """Start the collectors, publish their targets and wait until Prometheus has
    scraped every one (else a short-lived testbed's CPU may never reach the
    dashboards); returns the targets. Hosts that are other machines (a remote
    hypervisor) get their collector there, never one here."""
    remote = getattr(dep, "remote_collectors", None)
    targets = remote(mon) if remote else _local_collectors(dep, mon, timeout)
    path = mon.targets_dir / f"{dep.run_id}.json"
    dep.run.record("file", path=str(path))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([{"targets": targets, "labels": {
        "run_id": dep.run_id, "testbed": dep.testbed.name}}]))
    tmp.replace(path)
    dep.run.write_meta(monitor=mon.id)
    wait_scraped(mon, dep.run_id, len(targets), after=0.0, timeout=scraped_within)
    return targets


def _local_collectors(dep, mon: Monitor, timeout: float) -> list[str]:
    """One collector per emulated host (and the controller's), in the monitor's namespace."""
    started = []
    probe_file = dep.cpu_probe(wait=False)     # collectors use /proc/stat until it is up
    jobs = [(h.name, lambda pf, h=h: collector_argv(dep, h, pf, probe_file))
            for h in dep.testbed.hosts]
    jobs += [(CONTROLLER, lambda pf: controller_argv(dep, pf, probe_file))]
    for name, make_argv in jobs:          # all start at once, then each is waited for
        port_file = dep.run.dir / f"collector-{name}.port"
        pidfile = dep.run.dir / f"collector-{name}.pid"
        argv = make_argv(port_file)
        if argv is None:
            continue
        dep.run.record("daemon", name="vnetbench-collector", host=name, pidfile=str(pidfile),
                       argmark=f"--port-file={port_file}")
        p = subprocess.Popen(mon.argv(argv),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        pidfile.write_text(f"{p.pid}\n")
        started.append((port_file, p))
    return [f"127.0.0.1:{_port(port_file, p, timeout)}" for port_file, p in started]


def _scraped(mon: Monitor, run_id: str, after: float) -> int:
    """How many of the run's targets Prometheus last scraped successfully at or after AFTER."""
    up = f'up{{run_id="{run_id}"}}'        # timestamp() of a selector: the scrape's own time
    got = mon.query(f"count(timestamp({up}) >= {after:.3f} and on(instance) {up} == 1)")
    return int(float(got[0]["value"][1])) if got else 0


def wait_scraped(mon: Monitor, run_id: str, n: int, after: float, timeout: float) -> None:
    """Until each of the run's N targets has a successful scrape at or after AFTER
    (a Unix time); BuildError naming the run and the count after TIMEOUT."""
    deadline, seen = time.monotonic() + timeout, 0
    while True:
        seen = _scraped(mon, run_id, after)
        if seen >= n:
            return
        if time.monotonic() > deadline:
            raise BuildError(f"run {run_id}: Prometheus scraped {seen} of its {n} collectors "
                             f"within {timeout:.0f} s (monitor {mon.id}: see its prometheus.log)")
        time.sleep(0.2)


def settle(dep, timeout: float = 5.0) -> None:
    """Before a monitored testbed goes down: wait for one more scrape of its collectors,
    so the counters' last values (the end of the last test) reach Prometheus. Best
    effort: a gone monitor or a slow scrape never stops the teardown."""
    from vnetbench.monitor import server
    mon_id = dep.run.meta().get("monitor")
    if not mon_id:
        return
    n = len(list(dep.run.dir.glob("collector-*.port")))
    try:
        wait_scraped(server.attach(mon_id), dep.run_id, n, time.time(), timeout)
    except (VnetbenchError, OSError, ValueError, KeyError):     # teardown goes on regardless
        pass


def _port(port_file: Path, p: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_file.exists():
            return int(port_file.read_text())
        if p.poll() is not None:
            raise BuildError(f"vnetbench-collector exited with {p.returncode} before listening "
                             f"(run it by hand: {' '.join(p.args)})")
        time.sleep(0.02)
    raise BuildError(f"vnetbench-collector did not listen within {timeout:.0f} s")


def up(testbed, mon: Monitor | None, backend: str = "netns", **build):
    """Build ``testbed`` with BACKEND and, with a monitor, attach it; a failed attach
    unwinds the build."""
    from vnetbench.testbed import deployment
    dep = deployment.build(backend, testbed, **build)
    if mon:
        try:
            watch(dep, mon)
        except BaseException:
            dep.down()
            raise
    return dep
