"""Data-plane CPU split into disjoint parts: the arithmetic, pure (readings in,
seconds out), shared by the collector's counters and the battery's windows.

Parts (docs/metrics.md defines them; their sum is the headline "data-plane CPU"):

- ``vswitch``    scheduler runtime of the vSwitch daemons' threads, minus the
                 interrupts that ran on their back (see below)
- ``controller`` the same for SDN controller/agent daemons (``CONTROLLERS``)
- ``softirq_in_vswitch`` network softirq (NET_RX, NET_TX) that ran in the
                 context of one of those threads (it interrupted them, or they ran
                 it when re-enabling bottom halves, e.g. AF_PACKET sends)
- ``softirq_other`` network softirq on the host's CPUs in any other context:
                 another task (a VM's), ksoftirqd, or the idle task
- ``hardirq``    hard interrupt handlers, in any context on the host's CPUs

Methods:

- ``bpf``: the probe (``probe.py``) measured every network softirq/hardirq from
  entry to exit and who it interrupted. On kernels without
  CONFIG_IRQ_TIME_ACCOUNTING a task's runtime contains the interrupts that ran
  on its back; they are taken out of it and counted once, in their own part.
- ``irqtime``: no probe, but the kernel keeps interrupt time out of task time;
  softirq (every vector) and hardirq come from /proc/stat and cannot be split
  by context (all of it is ``softirq_other``). Exact, tick-free only for tasks.
- ``tick``: no probe and no IRQ time accounting: softirq and hardirq from
  /proc/stat (tick-sampled) *overlap* the task times. An upper bound, never
  exact; the record says so.

Time resolution: task runtimes are in ns and read at the window's edges; probe
counters are interpolated between the probe's snapshots around each edge, so
each edge carries a bound (``err_s``) on the part of the headline that comes
from the probe alone; with ``tick``, /proc/stat carries one tick per CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PARTS = ("vswitch", "controller", "softirq_in_vswitch", "softirq_other", "hardirq")
TASK_PARTS = ("vswitch", "controller")
BPF, IRQTIME, TICK = "bpf", "irqtime", "tick"
METHODS = (BPF, IRQTIME, TICK)
# Daemons that are an SDN controller or agent rather than the switch itself, by
# component name (a Python controller names itself, e.g. osken-manager). A
# collector made with controller=True (a controller node, the embedded
# testbed's controller namespace) counts every process it exports here.
CONTROLLERS = ("ovn-controller", "ovn-northd", "osken-manager", "ryu-manager",
               "contrail-vrouter-agent", "contrail-control", "contrail-controller")
CONTEXTS = ("idle", "ksoftirqd", "task")     # components of softirq_other


def role(component: str) -> str:
    """The part a daemon's own time goes to: "controller" or "vswitch"."""
    return "controller" if component in CONTROLLERS else "vswitch"


@dataclass(frozen=True)
class ThreadTime:
    """One daemon thread at a reading. Interrupt times are those in its context,
    on any CPU (0 without the probe)."""
    component: str
    thread_class: str
    runtime_s: float
    softirq_s: float = 0.0
    hardirq_s: float = 0.0
    role: str = ""                    # "vswitch" or "controller"; "" = by component (``role``)


@dataclass(frozen=True)
class Reading:
    """Everything the split needs, at one instant, for one scope (a host, or
    several hosts together: then ``cpus`` is their union).

    softirq_s/hardirq_s: interrupt time on the scope's CPUs, every context;
    own_*: the part of it in the context of ``threads``; contexts: softirq_s by
    context (idle, ksoftirqd). err_s bounds the error of the interrupt time
    outside ``threads`` at this instant (interpolation or tick sampling)."""
    t: float
    method: str
    irq_in_task: bool                 # the kernel charges interrupts to the interrupted task
    threads: dict                     # (pid, pstart, tid, tstart) -> ThreadTime
    ncpus: int
    softirq_s: float = 0.0
    hardirq_s: float = 0.0
    own_softirq_s: float = 0.0
    own_hardirq_s: float = 0.0
    contexts: dict = field(default_factory=dict)
    err_s: float = 0.0
    resolution_s: float = 0.0
    fallback: "Reading | None" = None   # a bpf reading's /proc/stat twin
    samples: "Samples | None" = None    # the router sampler's counts on the scope's CPUs

    @property
    def exact(self) -> bool:
        """Parts disjoint (no interrupt counted in a task and in its own part)."""
        return self.method == BPF or not self.irq_in_task


@dataclass(frozen=True)
class Samples:
    """The router sampler's cumulative counts on a scope's CPUs at a reading: every
    sample, those in the kernel's IP forwarding, their rate per CPU, and a bound on the
    router count's interpolation error at this instant."""
    hz: int
    total: float
    router: float
    err: float = 0.0


@dataclass(frozen=True)
class RouterCpu:
    """The router's CPU over a window: the samples in IP forwarding over the rate. It lies
    inside the softirq parts (the forwarding runs in NET_RX softirq), so it is never added
    to the headline. ``err_s``: 2 sigma of the binomial count (k in forwarding of the
    window's sampling periods) plus the edges' interpolation bound; ``resolution_s``: one
    sample; ``expected``: rate x seconds x CPUs, the periods, of which ``samples`` came
    (an idle CPU is not sampled: fewer than expected on a partly idle machine)."""
    seconds: float
    err_s: float
    samples: float
    router_samples: float
    resolution_s: float
    expected: float


def router_cpu(a: Samples | None, b: Samples | None, seconds: float,
               ncpus: int) -> RouterCpu | None:
    """The router's CPU between two readings' samples, over ``seconds`` on ``ncpus`` CPUs;
    None without the sampler (or without CPUs). The count over the rate, not the share of
    the samples that came: the samples missing are an idle CPU's, never a forwarding one's,
    so the share would overstate the router by the idle time."""
    if a is None or b is None or not b.hz or a.hz != b.hz or not ncpus or seconds <= 0:
        return None
    n, k = max(0.0, b.total - a.total), max(0.0, b.router - a.router)
    periods = max(n, b.hz * seconds * ncpus)
    p = k / periods if periods else 0.0
    sigma = (periods * p * (1.0 - p)) ** 0.5
    return RouterCpu(seconds=k / b.hz, err_s=(2.0 * sigma + a.err + b.err) / b.hz, samples=n,
                     router_samples=k, resolution_s=1.0 / b.hz, expected=b.hz * seconds * ncpus)


@dataclass(frozen=True)
class Split:
    """CPU seconds per part over a window, and the same per (part, component, class)."""
    seconds: float                    # the window's length
    method: str
    exact: bool
    parts: dict                       # part -> CPU seconds
    components: dict                  # (part, component, thread_class) -> CPU seconds
    err_s: float                      # bound on the headline's error (CPU seconds)
    resolution_s: float
    ncpus: int
    router: RouterCpu | None = None   # "of which router": inside the softirq parts

    @property
    def dataplane_s(self) -> float:
        """The headline: the sum of the parts."""
        return sum(self.parts.values())

    def percent(self) -> dict:
        """{part: %, "dataplane": %, "dataplane_err": %}; 100% = one CPU busy."""
        pct = lambda s: 100.0 * s / self.seconds
        out = {p: pct(s) for p, s in self.parts.items()}
        out["dataplane"] = pct(self.dataplane_s)
        out["dataplane_err"] = pct(self.err_s)
        if self.router is not None:
            out["router"], out["router_err"] = pct(self.router.seconds), pct(self.router.err_s)
        return out


def _add(d: dict, key, value: float) -> None:
    d[key] = d.get(key, 0.0) + value


def split(a: Reading, b: Reading) -> Split:
    """The parts between two readings of the same scope. A thread present only in
    ``b`` started in the window (all its time counts); one gone by ``b`` is not
    counted (its last moments are lost). Negative differences (a counter read a
    few microseconds apart from the probe's) are clamped to 0."""
    if b.t <= a.t:
        raise ValueError("readings must be taken in order")
    if a.method != b.method:          # the probe started or stopped in between
        a, b = a.fallback or a, b.fallback or b
        if a.method != b.method:
            raise ValueError(f"readings by different methods ({a.method}, {b.method})")
    comps: dict = {}
    subtract = b.method == BPF and b.irq_in_task
    for key, th in b.threads.items():
        old = a.threads.get(key, ThreadTime(th.component, th.thread_class, 0.0))
        run = th.runtime_s - old.runtime_s
        sirq = max(0.0, th.softirq_s - old.softirq_s)
        hirq = max(0.0, th.hardirq_s - old.hardirq_s)
        task = max(0.0, run - sirq - hirq) if subtract else max(0.0, run)
        _add(comps, (th.role or role(th.component), th.component, th.thread_class), task)
        if b.method == BPF:
            _add(comps, ("softirq_in_vswitch", th.component, th.thread_class), sirq)
            _add(comps, ("hardirq", th.component, th.thread_class), hirq)
    other = max(0.0, (b.softirq_s - b.own_softirq_s) - (a.softirq_s - a.own_softirq_s))
    known = 0.0
    for ctx in CONTEXTS[:-1]:
        v = min(other - known, max(0.0, b.contexts.get(ctx, 0.0) - a.contexts.get(ctx, 0.0)))
        _add(comps, ("softirq_other", ctx, "all"), v)
        known += v
    _add(comps, ("softirq_other", "task", "all"), other - known)
    _add(comps, ("hardirq", "other", "all"),
         max(0.0, (b.hardirq_s - b.own_hardirq_s) - (a.hardirq_s - a.own_hardirq_s)))
    parts = {p: 0.0 for p in PARTS}
    for (part, _, _), s in comps.items():
        parts[part] += s
    return Split(seconds=b.t - a.t, method=b.method, exact=b.exact, parts=parts,
                 components=comps, err_s=a.err_s + b.err_s,
                 resolution_s=max(a.resolution_s, b.resolution_s), ncpus=b.ncpus,
                 router=router_cpu(a.samples, b.samples, b.t - a.t, b.ncpus) if b.method == BPF else None)


def interpolate(lo: float, hi: float, w: float) -> tuple[float, float]:
    """(value at weight w between lo and hi, bound of its error): a cumulative
    counter's true value lies in [lo, hi]."""
    return lo + w * (hi - lo), max(w, 1.0 - w) * (hi - lo)
