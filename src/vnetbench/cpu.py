"""Data-plane CPU on the host side over exactly a test's time window, split into
disjoint parts by the same code that the collector's Prometheus counters use
(``vnetbench_collector.attribution``; definitions in docs/metrics.md):

    cpu_pct = vswitch + controller + softirq_in_vswitch + softirq_other + hardirq

over the testbed's hosts (their daemons, and the interrupts of the union of their
CPU sets, so a CPU shared by two hosts is counted once) and its controller
namespace (OVN northd and databases, an SDN controller: all of it ``controller``;
its CPUs are the hosts', so it adds no interrupts of its own). 100% = one CPU; the sum
never exceeds 100% x the CPUs in use, except by the stated uncertainty.

Daemon time is scheduler runtime (ns); interrupt time comes from the testbed's
interrupt-time probe (eBPF, ``Deployment.cpu_probe``) when the kernel lacks
IRQ time accounting, which makes the parts disjoint and splits softirq by the
context it ran in. Without a probe the method is ``irqtime`` or ``tick`` (an
upper bound), and every record says which (``cpu_method``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from vnetbench_collector import attribution, reading
from vnetbench_collector import collector as vc
from vnetbench_collector import probe, procfs

# record metric -> split part (cpu_pct itself is the sum)
PART_METRICS = {f"cpu_{p}_pct": p for p in attribution.PARTS}
# "of which router": inside the softirq parts, never added to cpu_pct (docs/metrics.md)
ROUTER_METRICS = ("cpu_router_pct", "cpu_router_pct_err")
METRICS = ("cpu_pct", "cpu_pct_err", *PART_METRICS, *ROUTER_METRICS)
DEFINITION = "docs/metrics.md#data-plane-cpu"
CONTROLLER = "controller"     # the result key of the controller namespace's processes


def fields(res: dict | None) -> dict:
    """The CPU fields of a window's metrics (None each when there was no window)."""
    return {k: (res or {}).get(k) for k in METRICS}


def host_collector(deployment, host, proc: Path = Path("/proc"),
                   probe_file: Path | None = None) -> vc.VSwitchCollector:
    """The collector of one emulated host: its own daemons (by pidfile) and CPUs."""
    return _collector(host.name, deployment.testbed.vswitch.kind.value, host_daemons(deployment, host),
                      tuple(host.cpus), proc, probe_file)


def controller_collector(deployment, proc: Path = Path("/proc"),
                         probe_file: Path | None = None) -> vc.VSwitchCollector | None:
    """The controller namespace's daemons (OVN databases and northd, an SDN controller),
    host "controller", no CPUs of its own (they are the hosts'); None without them."""
    daemons = controller_daemons(deployment)
    if not daemons:
        return None
    return _collector(CONTROLLER, deployment.testbed.vswitch.kind.value, daemons, (), proc,
                      probe_file, controller=True)


def host_daemons(deployment, host) -> tuple:
    """The pids of HOST's own daemons, from the run's pidfiles (never found by name):
    what its collector splits, and what vnetbench.memory reads."""
    return tuple(sorted(set(deployment.vswitch_pids(host.name).values())))


def controller_daemons(deployment) -> tuple:
    """(pid, pidfile stem) of the controller namespace's daemons: OVN's NB and SB
    ovsdb-servers are told apart by their pidfiles (``procfs.qualified``)."""
    return tuple(sorted({pid: name for name, pid in deployment.controller_pids().items()}.items()))


@functools.lru_cache(maxsize=64)
def _collector(host: str, vswitch: str, daemons: tuple, cpus: tuple, proc: Path,
               probe_file, controller: bool = False) -> vc.VSwitchCollector:
    """One collector per (host, daemons) for every window: it reads the kernel config
    and finds ksoftirqd once, not at every repetition."""
    pids = dict(daemons) if daemons and isinstance(daemons[0], tuple) else daemons
    return vc.VSwitchCollector(host=host, vswitch=vswitch, proc=proc, names=(),
                               extra_pids=pids,
                               cpus=cpus, qemu=False, probe_file=probe_file,
                               controller=controller)


def read(collectors: list) -> tuple[dict, attribution.Reading]:
    """{host: Reading} and the testbed's Reading (all daemons, union of CPUs), at one
    instant and from one pair of probe snapshots."""
    found = [(c, *c.processes()) for c in collectors]
    ksoftirqd = frozenset(t.tid for _, _, kthreads in found for t in kthreads
                          if t.comm.startswith("ksoftirqd/"))

    def scopes():
        hosts = [reading.Scope(c.threads(c.daemons(p)), c.cpu_set()) for c, p, _ in found]
        union = reading.Scope({k: v for s in hosts for k, v in s.threads.items()},
                              frozenset().union(*(s.cpus for s in hosts)))
        return hosts + [union]
    first = collectors[0]
    readings = reading.read(first.proc, scopes, first.probe_file,
                            first.irq_time_accounting is not True, first.hz, ksoftirqd)
    return {c.host: r for c, r in zip(collectors, readings)}, readings[-1]


def metrics(split: attribution.Split) -> dict:
    """A record's CPU fields: cpu_pct (the data-plane headline), its uncertainty, each part,
    and the router's share of it when the sampler ran (cpu_router_pct, its 2 sigma)."""
    pct = split.percent()
    return {"cpu_pct": pct["dataplane"], "cpu_pct_err": pct["dataplane_err"],
            **{m: pct[p] for m, p in PART_METRICS.items()},
            **({"cpu_router_pct": pct["router"], "cpu_router_pct_err": pct["router_err"]}
               if "router" in pct else {})}


def daemon_metrics(split: attribution.Split) -> dict:
    """``cpu_<daemon>_pct`` per daemon over the window (ovn-northd, ovsdb-server-sb,
    ovn-controller summed over the hosts ...): a breakdown of the window's own parts
    (a thread's task, softirq and hardirq time are disjoint), not time added to them."""
    out: dict = {}
    for (part, component, _), s in split.components.items():
        if part != "softirq_other" and component != "other":
            key = f"cpu_{component.replace('-', '_')}_pct"
            out[key] = out.get(key, 0.0) + 100.0 * s / split.seconds
    return out


def describe(split: attribution.Split) -> dict:
    """How a window was measured: method, whether exact, resolution, CPUs, per component."""
    out = {"method": split.method, "exact": split.exact, "resolution_s": split.resolution_s,
           "seconds": split.seconds, "cpus": split.ncpus,
           "components": {"/".join(k): 100.0 * s / split.seconds
                          for k, s in sorted(split.components.items()) if s}}
    if split.router is not None:
        r = split.router
        out["router"] = {"method": "sampled", "hz": round(r.expected / (split.seconds * split.ncpus)),
                         "resolution_s": r.resolution_s, "samples": round(r.samples),
                         "expected_samples": round(r.expected), "router_samples": round(r.router_samples),
                         "pct": 100.0 * r.seconds / split.seconds,
                         "err_pct": 100.0 * r.err_s / split.seconds}
    return out


def router_not_applicable(testbed) -> str | None:
    """Why a testbed's windows carry no router CPU (None: its routers forward in the
    kernel, where the sampler sees them). A router inside the vSwitch's own pipeline
    (OVN's logical router, the vRouter, Faucet's inter-VLAN routing) is the vSwitch's
    time: not separable, said so rather than shown as 0."""
    from vnetbench import kinds
    from vnetbench.testbed import model
    if not testbed.routers:
        return "no router in the testbed"
    kind = kinds.of(testbed)
    # a kind whose own routers are namespaces (kinds.Kind.routers) makes seed 000's L3
    # switch with IP forwarding in the switch host's namespace too: the kernel either way
    in_ns = kind.routers in model.NAMESPACE_ROUTERS
    kernel = [r for r in testbed.routers
              if r.routing == model.STICK or (r.routing in (model.ROUTER, model.SVI) and in_ns)]
    if not kernel:
        return (f"{kind.name} routes inside the vSwitch's own pipeline (ovs-vswitchd's userspace "
                "datapath here): the router's CPU is the vSwitch's, not separable")
    return None


class Window:
    """Data-plane CPU% over a with-block: ``with Window(dep) as w: ...; w.metrics()``."""

    def __new__(cls, deployment):
        source = getattr(deployment, "cpu_source", None)
        if source is not None:              # hosts are other machines: their collectors
            from vnetbench import promcpu
            return promcpu.Window(source)
        return super().__new__(cls)

    def __init__(self, deployment):
        probe_file = deployment.cpu_probe()
        self.router_na = router_not_applicable(deployment.testbed)
        self.collectors = [host_collector(deployment, h, probe_file=probe_file)
                           for h in deployment.testbed.hosts]
        ctl = controller_collector(deployment, probe_file=probe_file)
        self.collectors += [ctl] if ctl else []
        self.split: attribution.Split | None = None
        self.result: dict = {}

    def __enter__(self):
        self._start = read(self.collectors), procfs.cpu_times(Path("/proc"))
        return self

    def __exit__(self, *exc):
        ((hosts_a, all_a), times_a), (hosts_b, all_b) = self._start, read(self.collectors)
        times_b = procfs.cpu_times(Path("/proc"))
        self.split = attribution.split(all_a, all_b)
        self.result = {**describe(self.split), "hosts": {
            c.host: _host(attribution.split(hosts_a[c.host], hosts_b[c.host]), c.cpus, times_a, times_b)
            for c in self.collectors if c.host in hosts_b}, "machine": machine_busy(times_a, times_b)}
        if self.router_na or self.split.router is None:
            why = self.router_na or f"the router sampler did not run (CPU method {self.split.method})"
            self.result["router"] = {"not_applicable": why}
        return False

    def metrics(self) -> dict:
        """The window's CPU fields; cpu_router_pct None where the router's CPU is not
        measured (why: ``result["router"]["not_applicable"]``)."""
        out = metrics(self.split)
        if self.router_na or "cpu_router_pct" not in out:
            out.update(cpu_router_pct=None, cpu_router_pct_err=None)
        return out


def _host(split: attribution.Split, cpus, times_a: dict, times_b: dict) -> dict:
    """One host's window: its parts (%), its components by thread class (%: a component
    is summed over the testbed's hosts in the window's own components, so a saturated
    thread shows only here), and how busy its CPUs were with anything at all (% of one
    CPU, from /proc/stat: the guests' work included), which tells a CPU this machine ran
    out of from one the vSwitch left idle (vnetbench.results.bound)."""
    shares = [procfs.busy_share(times_a[c], times_b[c])
              for c in (cpus or ()) if c in times_a and c in times_b]
    out = {**split.percent(), "components": describe(split)["components"], "cpus": len(cpus or ())}
    if shares and None not in shares:
        # each CPU's busy share of its own /proc/stat time: the window's seconds come from
        # the collectors' snapshots, which a loaded machine can make stale (a 1-CPU host
        # read 132 % busy against them in a CI run with other work beside it)
        out["busy_pct"] = 100.0 * sum(shares)
    return out


def machine_busy(times_a: dict, times_b: dict) -> dict:
    """The whole machine over the window: its online CPUs busy with anything (% of one
    CPU, summed), beside each host's own CPUs: what ran beside the testbed shows as this
    total minus the testbed's own work (``vnetbench.capacity.verify``)."""
    shares = [procfs.busy_share(times_a[c], times_b[c]) for c in sorted(times_a) if c in times_b]
    shares = [s for s in shares if s is not None]
    return {"busy_pct": 100.0 * sum(shares) if shares else None, "cpus": len(shares)}


def provenance(deployment) -> dict:
    """What a record says about its CPU figures: the method the testbed's windows use
    now, the definition, and the kernel fact behind it."""
    if getattr(deployment, "cpu_source", None) is not None:
        return {"method": "prometheus", "exact": None, "source": deployment.cpu_source,
                "parts": list(attribution.PARTS), "definition": DEFINITION}
    irqtime = procfs.irq_time_accounting(Path("/proc"))
    path = deployment.cpu_probe(wait=False)
    running = probe.fresh(probe.read_snapshot(path)) if path else None
    method = attribution.BPF if running else (attribution.IRQTIME if irqtime else attribution.TICK)
    return {"method": method, "exact": method != attribution.TICK,
            "resolution_s": running.interval_ns / 1e9 if running else 1 / procfs.clk_tck(),
            "parts": list(attribution.PARTS), "definition": DEFINITION}
