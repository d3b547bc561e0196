"""The testbed's interrupt-time probe (``vnetbench_collector.probe``: bpftrace on
the softirq/hardirq tracepoints), owned by the testbed run like its daemons.

It is started on first use (a CPU window or a monitor's collectors), once per
run, only where it is needed and can work: a kernel without
CONFIG_IRQ_TIME_ACCOUNTING, bpftrace installed, not disabled by
``VNETBENCH_CPU_PROBE=off``. The runner and its bpftrace child are journaled as
daemons before they start (run-unique arguments: ``--out=FILE`` and FILE), so
teardown and ``vnetbench cleanup`` stop them, also after a crash.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from vnetbench.linux import proc
from vnetbench_collector import probe, procfs

SNAPSHOT = "cpuprobe.json"
INTERVAL_MS = 100
START_TIMEOUT_S = 30.0
ENV = "VNETBENCH_CPU_PROBE"
ROUTER_ENV = "VNETBENCH_ROUTER_SAMPLER"


def snapshot_path(dep) -> Path:
    return dep.run.dir / SNAPSHOT


def wanted() -> str | None:
    """Why the probe is not wanted or cannot run here; None when it should run."""
    if os.environ.get(ENV, "").lower() in ("0", "off", "no", "false"):
        return f"disabled by {ENV}"
    if procfs.irq_time_accounting(Path("/proc")):
        return "not needed: the kernel has CONFIG_IRQ_TIME_ACCOUNTING"
    if not shutil.which("bpftrace"):
        return "bpftrace is not installed (apt-get install bpftrace)"
    if os.geteuid() != 0:
        return "needs root (CAP_BPF, CAP_PERFMON)"
    return None


def running(dep) -> probe.Snapshot | None:
    """The probe's latest snapshot, if its runner is alive and the snapshot recent."""
    return probe.fresh(probe.read_snapshot(snapshot_path(dep)))


def ensure(dep, wait: bool = True, timeout_s: float = START_TIMEOUT_S) -> Path | None:
    """The probe's snapshot file, starting the probe if it is not running; None when
    it is not wanted or did not come up (the windows then say method irqtime/tick).
    ``wait=False`` returns at once: readers fall back to /proc/stat until the first
    snapshot (bpftrace takes a second or two to compile and attach)."""
    if wanted() is not None:
        return None
    out = snapshot_path(dep)
    if running(dep):
        return out
    with open(dep.run.dir / "cpuprobe.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one starter per run, across processes
        if not running(dep) and not _runner_alive(dep):
            _start(dep, out)
    if wait and not _wait(dep, out, timeout_s):
        return None
    return out


def _runner_alive(dep) -> bool:
    """The runner of this run is up (perhaps still starting bpftrace)."""
    try:
        pid = int((dep.run.dir / "cpuprobe.pid").read_text())
    except (OSError, ValueError):
        return False
    return f"--out={snapshot_path(dep)}" in proc.cmdline(pid).split()


_RUNNERS: dict = {}                # run id -> Popen of the runner this process started


def _start(dep, out: Path) -> subprocess.Popen:
    runner_pid, child_pid = dep.run.dir / "cpuprobe.pid", dep.run.dir / "cpuprobe-bpftrace.pid"
    for f in (out, runner_pid, child_pid):
        f.unlink(missing_ok=True)
    dep.run.record("daemon", name="cpuprobe", pidfile=str(runner_pid), argmark=f"--out={out}")
    dep.run.record("daemon", name="bpftrace", pidfile=str(child_pid), argmark=str(out))
    with open(dep.run.dir / "cpuprobe.log", "ab") as log:
        p = subprocess.Popen([sys.executable, "-m", "vnetbench_collector.probe_runner", f"--out={out}",
                              f"--child-pidfile={child_pid}", f"--interval-ms={INTERVAL_MS}",
                              f"--router-profile-hz={profile_hz(dep)}"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
    runner_pid.write_text(f"{p.pid}\n")
    _RUNNERS[dep.run_id] = p
    return p


def profile_hz(dep) -> int:
    """The router sampler's rate for this run: on only where routers forward in the kernel
    (``cpu.router_not_applicable``) and not disabled by VNETBENCH_ROUTER_SAMPLER=off; 0: off."""
    from vnetbench import cpu
    if os.environ.get(ROUTER_ENV, "").lower() in ("0", "off", "no", "false"):
        return 0
    return 0 if cpu.router_not_applicable(dep.testbed) else probe.DEFAULT_PROFILE_HZ


def _wait(dep, out: Path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe.read_snapshot(out) is not None:
            return True
        runner = _RUNNERS.get(dep.run_id)
        if runner is not None and runner.poll() is not None:
            return False                           # why: cpuprobe.log in the run directory
        if runner is None and not _runner_alive(dep):     # another process's runner
            return False
        time.sleep(0.05)
    return False


def stop(dep) -> None:
    """Stop the run's probe now (its journal entries stay: teardown is idempotent);
    only processes whose argv still holds the run-unique mark are signalled."""
    out = snapshot_path(dep)
    for pidfile, mark in ((dep.run.dir / "cpuprobe-bpftrace.pid", str(out)),
                          (dep.run.dir / "cpuprobe.pid", f"--out={out}")):
        try:
            pid = int(pidfile.read_text())
        except (OSError, ValueError):
            continue
        proc.stop(pid, lambda p, m=mark: m in proc.cmdline(p).split())
    runner = _RUNNERS.pop(dep.run_id, None)
    if runner is not None:
        runner.wait(timeout=5)
    out.unlink(missing_ok=True)
