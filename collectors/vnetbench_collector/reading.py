"""Readings for the attribution: daemon threads' scheduler runtime from /proc,
interrupt times from the probe's snapshots (interpolated at the reading's
instant) or, without a probe, from /proc/stat. Several scopes (hosts) can be
read at one instant from the same pair of snapshots."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from . import attribution as attr
from . import probe, procfs


@dataclass(frozen=True)
class Scope:
    """What one reading covers: daemon threads (key -> (component, class, tid,
    runtime s, role)) and CPUs."""
    threads: dict
    cpus: frozenset


def daemon_threads(proc: Path, processes: dict[int, str], hz: int, role: str = "") -> dict:
    """(pid, pstart, tid, tstart) -> (component, thread class, tid, runtime s, role) of
    every live thread of ``processes`` (pid -> component); role "" = by component."""
    out = {}
    for pid, name in sorted(processes.items()):
        whole = procfs.process_cpu(proc, pid, hz)
        if whole is None:
            continue
        for t, runtime in procfs.thread_runtimes(proc, pid, hz):
            out[(pid, whole.start, t.tid, t.start)] = (name, procfs.thread_class(t.comm, name),
                                                       t.tid, runtime, role)
    return out


def _probe_values(snap: probe.Snapshot, scope: Scope, ksoftirqd: frozenset) -> dict:
    """Every probe-derived quantity a reading needs, in seconds, from one snapshot."""
    tids = {v[2] for v in scope.threads.values()}
    v = {("sirq", tid): 0.0 for tid in tids} | {("hirq", tid): 0.0 for tid in tids}
    for name, table in (("sirq", snap.softirq), ("hirq", snap.hardirq)):
        for (cpu, tid), ns in table.items():
            if tid in tids:
                v[(name, tid)] += ns / 1e9
                if cpu in scope.cpus:
                    v[(name, "own")] = v.get((name, "own"), 0.0) + ns / 1e9
            elif cpu in scope.cpus and name == "sirq" and (tid == 0 or tid in ksoftirqd):
                ctx = "idle" if tid == 0 else "ksoftirqd"
                v[(name, ctx)] = v.get((name, ctx), 0.0) + ns / 1e9
    v[("sirq", "all")] = sum(ns for c, ns in snap.softirq_cpu.items() if c in scope.cpus) / 1e9
    v[("hirq", "all")] = sum(ns for c, ns in snap.hardirq_cpu.items() if c in scope.cpus) / 1e9
    return v


def samples_at(w: float, cpus: frozenset, lo: probe.Snapshot,
               hi: probe.Snapshot) -> attr.Samples | None:
    """The router sampler's counts on ``cpus`` interpolated at weight ``w`` between two
    snapshots (the error bound: the router count's uncertainty between them); None when
    the probe does not sample."""
    if not hi.profile_hz or lo.profile_hz != hi.profile_hz:
        return None
    count = lambda d: sum(n for c, n in d.items() if c in cpus)
    total = attr.interpolate(count(lo.samples_cpu), count(hi.samples_cpu), w)[0]
    router, err = attr.interpolate(count(lo.router_samples_cpu), count(hi.router_samples_cpu), w)
    return attr.Samples(hz=hi.profile_hz, total=total, router=router, err=err)


def probe_reading(t_ns: int, scope: Scope, lo: probe.Snapshot, hi: probe.Snapshot,
                  irq_in_task: bool, ksoftirqd: frozenset = frozenset()) -> attr.Reading:
    """A ``bpf`` reading at kernel time ``t_ns``: probe counters interpolated between
    ``lo`` (before) and ``hi`` (after)."""
    span = hi.t_ns - lo.t_ns
    w = 1.0 if span <= 0 else min(1.0, max(0.0, (t_ns - lo.t_ns) / span))
    a, b = _probe_values(lo, scope, ksoftirqd), _probe_values(hi, scope, ksoftirqd)
    at = {k: attr.interpolate(a.get(k, 0.0), b.get(k, 0.0), w) for k in a.keys() | b.keys()}
    val = lambda k: at.get(k, (0.0, 0.0))[0]
    threads = {key: attr.ThreadTime(comp, cls, runtime, val(("sirq", tid)), val(("hirq", tid)), role)
               for key, (comp, cls, tid, runtime, role) in scope.threads.items()}
    other_lo = (a.get(("sirq", "all"), 0.0) - a.get(("sirq", "own"), 0.0)
                + a.get(("hirq", "all"), 0.0) - a.get(("hirq", "own"), 0.0))
    other_hi = (b.get(("sirq", "all"), 0.0) - b.get(("sirq", "own"), 0.0)
                + b.get(("hirq", "all"), 0.0) - b.get(("hirq", "own"), 0.0))
    return attr.Reading(
        t=t_ns / 1e9, method=attr.BPF, irq_in_task=irq_in_task, threads=threads,
        ncpus=len(scope.cpus), softirq_s=val(("sirq", "all")), hardirq_s=val(("hirq", "all")),
        own_softirq_s=val(("sirq", "own")), own_hardirq_s=val(("hirq", "own")),
        contexts={"idle": val(("sirq", "idle")), "ksoftirqd": val(("sirq", "ksoftirqd"))},
        err_s=attr.interpolate(other_lo, other_hi, w)[1], resolution_s=lo.interval_ns / 1e9,
        samples=samples_at(w, scope.cpus, lo, hi))


def stat_reading(t_ns: int, scope: Scope, stat: dict, irq_in_task: bool, hz: int) -> attr.Reading:
    """An ``irqtime`` or ``tick`` reading: interrupt times from /proc/stat (every
    softirq vector), not split by context."""
    cpus = [stat[c] for c in scope.cpus if c in stat]
    threads = {key: attr.ThreadTime(comp, cls, runtime, role=role)
               for key, (comp, cls, _, runtime, role) in scope.threads.items()}
    return attr.Reading(
        t=t_ns / 1e9, method=attr.TICK if irq_in_task else attr.IRQTIME, irq_in_task=irq_in_task,
        threads=threads, ncpus=len(scope.cpus), softirq_s=sum(c["softirq"] for c in cpus),
        hardirq_s=sum(c["irq"] for c in cpus), err_s=2 * len(cpus) / hz, resolution_s=1 / hz)


def read(proc: Path, scopes, probe_file: Path | None, irq_in_task: bool, hz: int,
         ksoftirqd: frozenset = frozenset()) -> list[attr.Reading]:
    """One reading per scope at one instant; ``scopes()`` lists them, reading the
    daemons' runtimes right after the instant is taken. With a probe file, waits
    for the probe's next snapshot (about one interval); a ``bpf`` reading keeps the
    /proc/stat one as its ``fallback``, and without a snapshot that is the reading."""
    lo = probe.fresh(probe.read_snapshot(probe_file)) if probe_file else None   # dead: no wait
    t_ns = time.monotonic_ns()
    listed = scopes()
    stat = procfs.cpu_times(proc, hz)
    hi = probe.following(probe_file, lo, t_ns) if lo is not None else None
    out = []
    for s in listed:
        fallback = stat_reading(t_ns, s, stat, irq_in_task, hz)
        out.append(fallback if hi is None else dataclasses.replace(
            probe_reading(t_ns, s, lo, hi, irq_in_task, ksoftirqd), fallback=fallback))
    return out
