"""prometheus_client custom collector: vSwitch CPU per component and thread class,
softirq time/counts per CPU and OVS datapath counters, read at every scrape.

No double counting among the kernel metrics: softirq time per CPU comes from
/proc/stat and already contains ksoftirqd's time, so ``ksoftirqd`` is exported as
a separate metric documented as a part of it, never as a vSwitch component.
Task and softirq time can still overlap on kernels without
CONFIG_IRQ_TIME_ACCOUNTING (exported as ``vnetbench_irq_time_accounting``): a
tick that lands in softirq while a vSwitch thread runs is charged to both.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from . import attribution, procfs, reading

CPU_SECONDS = "vnetbench_vswitch_cpu_seconds"
PROCESSES = "vnetbench_vswitch_processes"
SOFTIRQ_SECONDS = "vnetbench_softirq_cpu_seconds"
SOFTIRQS = "vnetbench_softirqs"
KSOFTIRQD_SECONDS = "vnetbench_ksoftirqd_cpu_seconds"
DP_LOOKUPS = "vnetbench_datapath_lookups"
DP_FLOWS = "vnetbench_datapath_flows"
IRQ_TIME = "vnetbench_irq_time_accounting"
DATAPLANE_SECONDS = "vnetbench_dataplane_cpu_seconds"
CPU_METHOD = "vnetbench_cpu_method"
CPU_RESOLUTION = "vnetbench_cpu_resolution_seconds"
ROUTER_SECONDS = "vnetbench_router_cpu_seconds"


class VSwitchCollector:
    """Register in a registry of your own: ``CollectorRegistry().register(VSwitchCollector(...))``.

    host, vswitch: values of the ``host`` and ``vswitch`` labels (e.g. "compute-1", "ovs").
    proc: the /proc root to read.
    pid_source: if given, the processes are exactly these pids (e.g. those of one
        emulated host's pidfiles), named after their executable, qualified by the
        pidfile stem when it returns a {pid: stem} mapping (``procfs.qualified``:
        ovsdb-server-nb, ovsdb-server-sb); called at every scrape, and nothing is
        looked up by name.
    names: executable names to look for; extra_names are added to them.
    extra_pids: pids always exported (component = their exe/comm name; a
        {pid: pidfile stem} mapping qualifies it as for pid_source).
    cpus: if given, the softirq families cover only these CPUs.
    datapaths: a callable returning ``datapath.Datapath`` records (e.g.
        ``datapath.ovs_source(ctl)``), called at every scrape.
    qemu: also export QEMU processes (vCPU, vhost worker and other threads) and
        their old-style vhost kernel threads.
    probe_file: the interrupt-time probe's snapshot file (``probe.py``): the
        data-plane split is then exact (method ``bpf``); without it, or while it
        has no snapshot, the split falls back to /proc/stat (``irqtime`` or ``tick``).
    controller: every process is an SDN controller/agent (part ``controller``),
        e.g. the daemons of an OVN or OpenFlow controller node; otherwise each
        process's part follows its name (``attribution.role``).
    rescan_s: a scrape reads only the processes and kernel threads found by the last
        full /proc scan; the next full scan is at most this much later (sooner if
        one of them is gone), so a scrape's cost does not grow with the node's
        process count and a new daemon or VM is found within rescan_s.
    """

    def __init__(self, host: str, vswitch: str, proc: Path | str = Path("/proc"),
                 pid_source: Callable[[], Iterable[int]] | None = None,
                 names: Iterable[str] = procfs.VSWITCH_PROCESSES,
                 extra_names: Iterable[str] = (), extra_pids: Iterable[int] = (),
                 cpus: Iterable[int] | None = None, hz: int | None = None,
                 datapaths: Callable[[], list] | None = None, qemu: bool = True,
                 rescan_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 probe_file: Path | str | None = None, controller: bool = False):
        self.host, self.vswitch, self.proc = host, vswitch, Path(proc)
        self.datapaths, self.qemu = datapaths, qemu
        self.irq_time_accounting = procfs.irq_time_accounting(self.proc)
        self.probe_file = Path(probe_file) if probe_file else None
        self.role = attribution.TASK_PARTS[1] if controller else ""
        self._reading: attribution.Reading | None = None   # the last scrape's
        self._split: dict = {}       # (part, component, class) -> seconds since the first scrape
        self._router: float | None = None   # sampled router seconds; None: the probe does not sample
        self.pid_source = pid_source
        self.rescan_s, self.clock = rescan_s, clock
        self._found: dict | None = None      # last scan: pid -> (component, start ticks)
        self._kpids: list[int] = []          # last scan: ksoftirqd and vhost kernel threads
        self._next_scan = 0.0
        self.names = tuple(dict.fromkeys((*names, *extra_names)))
        self.extra_pids = dict(extra_pids) if isinstance(extra_pids, dict) else tuple(extra_pids)
        self.cpus = None if cpus is None else frozenset(cpus)
        self.hz = hz or procfs.clk_tck()
        self._lock = threading.Lock()
        # Threads that exit keep their last seen time in their class, so a class's
        # counter does not go down while its process lives.
        self._last: dict = {}       # (pid, pstart) -> {(tid, tstart): (component, class, s)}
        self._retired: dict = {}    # (pid, pstart) -> {(component, class): seconds}

    def _families(self):
        return (
            CounterMetricFamily(CPU_SECONDS, "CPU time (user+system) of vSwitch processes, "
                                "by component (process name) and thread class",
                                labels=["host", "vswitch", "component", "thread_class"]),
            GaugeMetricFamily(PROCESSES, "Processes found per vSwitch component",
                              labels=["host", "vswitch", "component"]),
            CounterMetricFamily(SOFTIRQ_SECONDS, "Softirq CPU time per CPU (from /proc/stat)",
                                labels=["host", "cpu"]),
            CounterMetricFamily(SOFTIRQS, "Softirqs handled per CPU and type (from /proc/softirqs)",
                                labels=["host", "cpu", "type"]),
            CounterMetricFamily(KSOFTIRQD_SECONDS, "CPU time of ksoftirqd/CPU; already "
                                "included in vnetbench_softirq_cpu_seconds_total, never add them",
                                labels=["host", "cpu"]),
            CounterMetricFamily(DP_LOOKUPS, "OVS datapath lookups by result (hit, missed = "
                                "upcalls, lost = upcalls dropped)",
                                labels=["host", "vswitch", "datapath", "result"]),
            GaugeMetricFamily(DP_FLOWS, "Flows in the OVS datapath",
                              labels=["host", "vswitch", "datapath"]),
            GaugeMetricFamily(IRQ_TIME, "1 if the kernel has CONFIG_IRQ_TIME_ACCOUNTING (task "
                              "and softirq CPU time are disjoint), 0 if not (they overlap)",
                              labels=["host"]),
            CounterMetricFamily(DATAPLANE_SECONDS, "Data-plane CPU time split into disjoint "
                                "parts (vswitch, controller, softirq_in_vswitch, softirq_other, "
                                "hardirq) by component or context; the sum is the data-plane CPU",
                                labels=["host", "vswitch", "part", "component", "thread_class"]),
            GaugeMetricFamily(CPU_METHOD, "1 for the method of the data-plane split: bpf "
                              "(exact), irqtime (exact, softirq not split by context) or tick "
                              "(parts overlap: an upper bound)", labels=["host", "method"]),
            GaugeMetricFamily(CPU_RESOLUTION, "Time resolution of the interrupt parts of the "
                              "split (probe interval, or one tick)", labels=["host"]),
        )

    def describe(self):
        return list(self._families())

    def _discover(self) -> tuple[dict[int, str], list]:
        """pid -> component, and the kernel threads of interest: from a full /proc scan
        when due, else from the pids the last one found."""
        if self._found is None or self.clock() >= self._next_scan or not self._unchanged():
            entries = procfs.scan(self.proc, self.hz)
            named = self._by_name(entries)
            self._found = {t.tid: (named[t.tid], t.start) for t in entries if t.tid in named}
            self._kpids = [t.tid for t in procfs.kernel_threads(entries)
                           if t.comm.startswith(("ksoftirqd/", "vhost-"))]
            self._next_scan = self.clock() + self.rescan_s
        kthreads = [t for t in (procfs.process_cpu(self.proc, pid, self.hz) for pid in self._kpids) if t]
        found = {pid: name for pid, (name, _) in self._found.items()}
        if self.pid_source is not None:
            found.update(procfs.find_processes(self.proc, (), self.pid_source()))
        for pid, name in procfs.find_processes(self.proc, (), self.extra_pids).items():
            found.setdefault(pid, name)
        return found, kthreads

    def _by_name(self, entries) -> dict[int, str]:
        names = () if self.pid_source is not None else self.names
        found = procfs.find_processes(self.proc, names, entries=entries)
        if self.qemu:
            found.update({pid: procfs.QEMU for pid in procfs.find_processes(
                self.proc, procfs.QEMU_PROCESSES, entries=entries)})
        return found

    def _unchanged(self) -> bool:
        """Every process and kernel thread of the last scan is still there (same start)."""
        for pid, (_, start) in self._found.items():
            t = procfs.process_cpu(self.proc, pid, self.hz)
            if t is None or t.start != start:
                return False
        return all((self.proc / str(pid)).is_dir() for pid in self._kpids)

    def _cpu_seconds(self, processes: dict[int, str]) -> dict[tuple, float]:
        totals: dict = {}
        live_procs = {}
        for pid, name in sorted(processes.items()):
            proc_stat = procfs.process_cpu(self.proc, pid, self.hz)
            if proc_stat is None:
                continue
            key = (pid, proc_stat.start)
            threads = {(t.tid, t.start): (name, procfs.thread_class(t.comm, name), t.seconds)
                       for t in procfs.thread_cpu(self.proc, pid, self.hz)}
            retired = self._retired.setdefault(key, {})
            for tkey, (comp, cls, secs) in self._last.get(key, {}).items():
                if tkey not in threads:
                    retired[(comp, cls)] = retired.get((comp, cls), 0.0) + secs
            live_procs[key] = threads
            for (comp, cls), secs in retired.items():
                totals[(comp, cls)] = totals.get((comp, cls), 0.0) + secs
            for comp, cls, secs in threads.values():
                totals[(comp, cls)] = totals.get((comp, cls), 0.0) + secs
        self._last = live_procs
        self._retired = {k: v for k, v in self._retired.items() if k in live_procs}
        return totals

    def _kernel(self, processes: dict[int, str], kthreads: list, totals: dict) -> dict[int, float]:
        """Add the old-style vhost kernel threads of the QEMU processes to ``totals``;
        return ksoftirqd seconds per CPU."""
        qemus = [pid for pid, name in processes.items() if name == procfs.QEMU]
        vhost = sum(procfs.vhost_kthreads(kthreads, qemus).values())
        if vhost:
            totals[("vhost", "kernel")] = vhost
        return procfs.ksoftirqd_seconds(kthreads)

    def _mine(self, cpu_id: int) -> bool:
        return self.cpus is None or cpu_id in self.cpus

    def processes(self) -> tuple[dict[int, str], list]:
        """pid -> component of the processes found now, and the kernel threads of interest."""
        with self._lock:
            return self._discover()

    def reading(self) -> attribution.Reading:
        """This host's data-plane reading, now (``reading.read``; waits for the
        probe's next snapshot when there is a probe)."""
        return self._read(*self.processes())

    def cpu_set(self) -> frozenset:
        """The CPUs whose interrupts belong to this host: ``cpus``, else all of them."""
        if self.cpus is not None:
            return self.cpus
        return frozenset(procfs.cpu_times(self.proc, self.hz))

    def daemons(self, processes: dict[int, str]) -> dict[int, str]:
        """The processes whose threads are split (QEMU is the VMs' own CPU, not the data plane's)."""
        return {pid: name for pid, name in processes.items() if name != procfs.QEMU}

    def threads(self, daemons: dict[int, str]) -> dict:
        """The daemons' threads now, for a ``reading.Scope``."""
        return reading.daemon_threads(self.proc, daemons, self.hz, self.role)

    def _read(self, processes: dict[int, str], kthreads: list) -> attribution.Reading:
        ksoftirqd = frozenset(t.tid for t in kthreads if t.comm.startswith("ksoftirqd/"))
        daemons, cpus = self.daemons(processes), self.cpu_set()
        scopes = lambda: [reading.Scope(self.threads(daemons), cpus)]
        return reading.read(self.proc, scopes, self.probe_file, self.irq_time_accounting is not True,
                            self.hz, ksoftirqd)[0]

    def _accumulate(self, r: attribution.Reading) -> dict:
        """Add the split since the last scrape to the counters; returns them."""
        with self._lock:
            prev, self._reading = self._reading, r
            if prev is None:                 # the first scrape: every series, at 0
                prev = dataclasses.replace(r, t=r.t - 1.0)
            if r.t > prev.t:
                try:
                    done = attribution.split(prev, r)
                except ValueError:
                    done = None
                for key, secs in (done.components.items() if done else ()):
                    self._split[key] = self._split.get(key, 0.0) + secs
                if done is not None and done.router is not None:
                    self._router = (self._router or 0.0) + done.router.seconds
            return dict(self._split)

    def _router_family(self):
        """The router's sampled CPU on this host's CPUs (inside the softirq parts: never add
        it to them), once the probe samples kernel stacks; nothing before."""
        with self._lock:
            secs = self._router
        if secs is None:
            return []
        fam = CounterMetricFamily(ROUTER_SECONDS, "CPU time of the kernel's IP forwarding on the "
                                  "host's CPUs, sampled (part of the softirq parts, not an extra part)",
                                  labels=["host"])
        fam.add_metric([self.host], secs)
        return [fam]

    def _split_families(self, r: attribution.Reading, split: dict):
        parts, method, resolution = self._families()[8:]
        for (part, comp, cls), secs in sorted(split.items()):
            parts.add_metric([self.host, self.vswitch, part, comp, cls], secs)
        method.add_metric([self.host, r.method], 1)
        resolution.add_metric([self.host], r.resolution_s)
        return parts, method, resolution

    def collect(self):
        cpu, nprocs, sirq_s, sirqs, ksirqd, lookups, flows, irqtime = self._families()[:8]
        with self._lock:
            processes, kthreads = self._discover()
            totals = self._cpu_seconds(processes)
        r = self._read(processes, kthreads)
        split = self._accumulate(r)
        ksoftirqd = self._kernel(processes, kthreads, totals)
        for (comp, cls), secs in sorted(totals.items()):
            cpu.add_metric([self.host, self.vswitch, comp, cls], secs)
        counts = {name: 0 for name in self.names}
        for name in processes.values():
            counts[name] = counts.get(name, 0) + 1
        for name, n in counts.items():
            nprocs.add_metric([self.host, self.vswitch, name], n)
        for cpu_id, secs in sorted(procfs.softirq_seconds(self.proc, self.hz).items()):
            if self._mine(cpu_id):
                sirq_s.add_metric([self.host, str(cpu_id)], secs)
        for cpu_id, secs in sorted(ksoftirqd.items()):
            if self._mine(cpu_id):
                ksirqd.add_metric([self.host, str(cpu_id)], secs)
        for kind, per_cpu in sorted(procfs.softirq_counts(self.proc).items()):
            for cpu_id, n in sorted(per_cpu.items()):
                if self._mine(cpu_id):
                    sirqs.add_metric([self.host, str(cpu_id), kind], n)
        for dp in self.datapaths() if self.datapaths else ():
            for result in ("hit", "missed", "lost"):
                lookups.add_metric([self.host, self.vswitch, dp.name, result], getattr(dp, result))
            flows.add_metric([self.host, self.vswitch, dp.name], dp.flows)
        if self.irq_time_accounting is not None:
            irqtime.add_metric([self.host], int(self.irq_time_accounting))
        yield from (cpu, nprocs, sirq_s, sirqs, ksirqd, lookups, flows, irqtime)
        yield from self._split_families(r, split)
        yield from self._router_family()
