"""vSwitch CPU cost on the host side, over exactly a test's time window, read
through the same collector that Prometheus scrapes (vnetbench-collector).

Attribution in the embedded testbed: an emulated host's vSwitch CPU is
(a) the CPU time of its own vSwitch processes (for OVS: ovsdb-server and every
ovs-vswitchd thread, grouped by thread class: main, handler, revalidator, pmd,
urcu), plus (b) the softirq time of the host's CPU set (kernel packet work:
Linux bridge, VXLAN, veth backlog). (b) is a machine-wide per-CPU counter, so
when VMs share their host's CPUs it also contains the VMs' own softirq work;
that is reported apart ("softirq") and never folded into (a). 100% = one CPU.

Without CONFIG_IRQ_TIME_ACCOUNTING the kernel charges a tick that lands in
softirq while a vSwitch thread runs to both (a) and (b); the record's provenance
says which kernel it was (``irq_time_accounting``), so a reader knows whether
cpu_pct = (a) + (b) can overlap.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench_collector import collector as vc

CONTROLLER = "controller"     # the result key of the controller namespace's processes


@dataclass(frozen=True)
class Sample:
    t: float
    components: dict          # "process/thread class" (or "process") -> CPU seconds
    softirq: float            # seconds over the host's CPUs


def component(process: str, thread_class: str) -> str:
    return process if thread_class == "all" else f"{process}/{thread_class}"


def host_collector(deployment, host, proc: Path = Path("/proc")) -> vc.VSwitchCollector:
    """The collector of one emulated host: its own daemons (by pidfile) and CPUs."""
    pids = tuple(sorted(set(deployment.vswitch_pids(host.name).values())))
    return _collector(host.name, deployment.testbed.vswitch.kind.value, pids, tuple(host.cpus), proc)


def controller_collector(deployment, proc: Path = Path("/proc")) -> vc.VSwitchCollector | None:
    """The controller namespace's daemons (OVN databases and northd, an SDN controller),
    host "controller", without softirq (its CPUs are the hosts'); None without them."""
    pids = tuple(sorted(set(deployment.controller_pids().values())))
    if not pids:
        return None
    return _collector(CONTROLLER, deployment.testbed.vswitch.kind.value, pids, (), proc)


@functools.lru_cache(maxsize=64)
def _collector(host: str, vswitch: str, pids: tuple, cpus: tuple, proc: Path) -> vc.VSwitchCollector:
    """One collector per (host, daemons) for every window: it reads the kernel config
    and finds ksoftirqd once, not at every repetition."""
    return vc.VSwitchCollector(host=host, vswitch=vswitch, proc=proc, names=(), extra_pids=pids,
                               cpus=cpus, qemu=False)


def sample(collector: vc.VSwitchCollector) -> Sample:
    comps, softirq = {}, 0.0
    for family in collector.collect():
        for s in family.samples:
            if family.name == vc.CPU_SECONDS:
                key = component(s.labels["component"], s.labels["thread_class"])
                comps[key] = comps.get(key, 0.0) + s.value
            elif family.name == vc.SOFTIRQ_SECONDS:
                softirq += s.value
    return Sample(t=time.monotonic(), components=comps, softirq=softirq)


def percent(a: Sample, b: Sample) -> dict:
    """CPU% per component between two samples; 'vswitch' sums the processes, 100% = one CPU."""
    secs = b.t - a.t
    if secs <= 0:
        raise ValueError("samples must be taken in order")
    pct = lambda s: 100.0 * s / secs
    out = {k: pct(b.components.get(k, 0.0) - a.components.get(k, 0.0))
           for k in sorted(set(a.components) | set(b.components))}
    out["vswitch"] = sum(out.values())
    out["softirq"] = pct(b.softirq - a.softirq)
    return out


class Window:
    """CPU% of every host over a with-block: ``with Window(dep) as w: ...; w.result``."""

    def __init__(self, deployment):
        self.collectors = [host_collector(deployment, h) for h in deployment.testbed.hosts]
        ctl = controller_collector(deployment)
        self.collectors += [ctl] if ctl else []
        self.result: dict = {}

    def __enter__(self):
        self._start = [sample(c) for c in self.collectors]
        return self

    def __exit__(self, *exc):
        end = [sample(c) for c in self.collectors]
        self.result = {c.host: percent(a, b) for c, a, b in zip(self.collectors, self._start, end)}
        return False

    def total(self, key="vswitch") -> float:
        return sum(h[key] for name, h in self.result.items() if name != CONTROLLER)

    def metrics(self) -> dict:
        """The record's CPU fields: cpu_pct is the host-side data plane, vSwitch processes
        plus softirq of the hosts' CPUs, plus the controller's processes where the kind
        has one (OVN northd and databases); every part is kept too."""
        procs, softirq = self.total("vswitch"), self.total("softirq")
        out = {"cpu_pct": procs + softirq, "vswitch_proc_pct": procs, "softirq_pct": softirq}
        if CONTROLLER in self.result:
            out["controller_pct"] = self.result[CONTROLLER]["vswitch"]
            out["cpu_pct"] += out["controller_pct"]
        return out
