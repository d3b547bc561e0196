"""vSwitch CPU cost on the host side, over exactly a test's time window.

Attribution in the embedded testbed: an emulated host's vSwitch CPU is
(a) the CPU time of its own vSwitch processes (for OVS: ovsdb-server and every
ovs-vswitchd thread, grouped by thread class: main, handler, revalidator, pmd,
urcu), plus (b) the softirq time of the host's CPU set (kernel packet work:
Linux bridge, VXLAN, veth backlog). (b) is a machine-wide per-CPU counter, so
when VMs share their host's CPUs it also contains the VMs' own softirq work;
that is reported apart ("softirq") and never folded into (a). 100% = one CPU.

Sources are injected (``proc`` root) so this is tested against fake /proc trees.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

THREAD_CLASSES = (("handler", "handler"), ("revalidator", "revalidator"), ("pmd", "pmd"),
                  ("urcu", "urcu"))


def _hz() -> int:
    return os.sysconf("SC_CLK_TCK")


def thread_class(comm: str, process: str) -> str:
    for prefix, name in THREAD_CLASSES:
        if comm.startswith(prefix):
            return f"{process}/{name}"
    return f"{process}/main" if process == "ovs-vswitchd" else process


def _ticks_of(stat_text: str) -> tuple[str, int]:
    comm = stat_text[stat_text.index("(") + 1:stat_text.rindex(")")]
    fields = stat_text.rsplit(")", 1)[1].split()
    return comm, int(fields[11]) + int(fields[12])       # utime + stime


@dataclass(frozen=True)
class Sample:
    t: float
    components: dict          # component -> clock ticks
    softirq: int              # ticks over the host's CPUs


@dataclass
class HostCpu:
    """CPU accounting of one emulated host: its vSwitch pids and its CPU set."""
    host: str
    cpus: tuple
    pids: dict                               # process name -> pid
    proc: Path = field(default=Path("/proc"))

    def sample(self) -> Sample:
        comps: dict = {}
        for name, pid in self.pids.items():
            for task in sorted((self.proc / str(pid) / "task").glob("*")):
                try:
                    comm, ticks = _ticks_of((task / "stat").read_text())
                except (OSError, ValueError):
                    continue
                key = thread_class(comm, name)
                comps[key] = comps.get(key, 0) + ticks
        return Sample(t=time.monotonic(), components=comps, softirq=self._softirq())

    def _softirq(self) -> int:
        total = 0
        for line in (self.proc / "stat").read_text().splitlines():
            m = re.match(r"cpu(\d+)\s", line)
            if m and int(m.group(1)) in self.cpus:
                total += int(line.split()[7])               # user nice system idle iowait irq softirq
        return total


def percent(a: Sample, b: Sample, hz: int | None = None) -> dict:
    """CPU% per component between two samples; 'vswitch' sums the processes, 100% = one CPU."""
    hz = hz or _hz()
    secs = b.t - a.t
    if secs <= 0:
        raise ValueError("samples must be taken in order")
    pct = lambda ticks: 100.0 * ticks / hz / secs
    out = {k: pct(b.components.get(k, 0) - a.components.get(k, 0))
           for k in sorted(set(a.components) | set(b.components))}
    out["vswitch"] = sum(out.values())
    out["softirq"] = pct(b.softirq - a.softirq)
    return out


def meters(deployment) -> list[HostCpu]:
    """One meter per host of a deployment, with the daemons its run started."""
    return [HostCpu(host=h.name, cpus=tuple(h.cpus), pids=deployment.vswitch_pids(h.name))
            for h in deployment.testbed.hosts]


class Window:
    """CPU% of every host over a with-block: ``with Window(dep) as w: ...; w.result``."""

    def __init__(self, deployment):
        self.meters = meters(deployment)
        self.result: dict = {}

    def __enter__(self):
        self._start = [m.sample() for m in self.meters]
        return self

    def __exit__(self, *exc):
        end = [m.sample() for m in self.meters]
        self.result = {m.host: percent(a, b) for m, a, b in zip(self.meters, self._start, end)}
        return False

    def total(self, key="vswitch") -> float:
        return sum(h[key] for h in self.result.values())

    def metrics(self) -> dict:
        """The record's CPU fields: cpu_pct is the host-side data plane, vSwitch processes
        plus softirq of the hosts' CPUs; both parts are kept too."""
        procs, softirq = self.total("vswitch"), self.total("softirq")
        return {"cpu_pct": procs + softirq, "vswitch_proc_pct": procs, "softirq_pct": softirq}
