"""The data-plane CPU split on a real OVS VXLAN testbed (netns, root): bounded by
the CPUs' busy time from above and below, > 0 in a 1 s deferred-RTT window, and
the same figures from the collector's counters as from the battery's windows."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from vnetbench import cpu
from vnetbench.monitor import watch
from vnetbench.testbed.netns import cpuprobe
from vnetbench_collector import attribution, procfs
from vnetbench_collector.__main__ import build_registry, parser

REPO = Path(__file__).resolve().parents[2]
CPUACCT = Path("/sys/fs/cgroup/cpuacct/cpuacct.usage")
PORT = 5399


@pytest.fixture(scope="module")
def dep(caps, tmp_path_factory):
    from vnetbench.testbed.loader import load
    from vnetbench.testbed.model import NetType, VSwitchKind
    from vnetbench.testbed.netns import builder
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    why = cpuprobe.wanted()
    if why and not procfs.irq_time_accounting(Path("/proc")):
        pytest.skip(f"no exact CPU split on this kernel (no CONFIG_IRQ_TIME_ACCOUNTING): {why}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VNETBENCH_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        d = builder.up(load(REPO / "examples" / "ovs-vxlan.yaml"))
        try:
            yield d
        finally:
            assert d.down() == []


def cross(dep):
    return next(p for p in dep.testbed.pairs if p.placement == "cross-host")


def runtime_s(pids) -> float:
    """Scheduler runtime of every live thread of ``pids`` (ns-exact)."""
    return sum(r for pid in pids for _, r in procfs.thread_runtimes(Path("/proc"), pid))


def task_time(dep, vm_pids) -> dict:
    """What the lower bound needs, now: /proc/stat busy time of the testbed's CPUs, the
    kernel's runtime of every task (cpuacct), and that of the testbed's daemons and
    VM processes and of this test process."""
    stat = procfs.cpu_times(Path("/proc"))
    cpus = {c for h in dep.testbed.hosts for c in h.cpus}
    daemons = [pid for h in dep.testbed.hosts for pid in dep.vswitch_pids(h.name).values()]
    return {"t": time.monotonic(), "busy": sum(procfs.busy_seconds(stat[c]) for c in cpus),
            "all_tasks": int(CPUACCT.read_text()) / 1e9,
            "daemons": runtime_s(daemons), "vms": runtime_s(vm_pids),
            "self": runtime_s([os.getpid()])}


def steady_tcp(dep, seconds=8):
    """iperf3 across hosts (server, client) for ``seconds``; returns both Popens."""
    a, b = cross(dep).vms
    server = dep.popen(b, ["iperf3", "-s", "-1", "-p", str(PORT)], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    client = dep.popen(a, ["iperf3", "-c", dep.ip(b), "-p", str(PORT), "-t", str(seconds)],
                       stdout=subprocess.DEVNULL)
    time.sleep(1.5)                     # past slow start: the window sees a steady stream
    return server, client


def test_cross_host_tcp_parts_are_bounded_by_the_cpus_busy_time(dep):
    """Upper bound: the parts over both CPUs <= 200% + 2% (disjoint: nothing counted twice).
    Lower bound: >= busy time (/proc/stat) minus the time of every task that is not a
    vSwitch daemon (VM processes, this test, other users of the machine: the kernel's
    cpuacct runtime of all tasks minus the daemons') - 5%: nothing is missed. The
    VMs' time is subtracted whole (user and kernel: here the guest kernel is the
    host's), not only their user time."""
    if not CPUACCT.exists():
        pytest.skip(f"{CPUACCT} missing: no cgroup v1 cpuacct to measure other tasks' time")
    server, client = steady_tcp(dep)
    try:
        vm_pids = [server.pid, client.pid]
        with cpu.Window(dep) as w:
            a = task_time(dep, vm_pids)
            time.sleep(4)
            b = task_time(dep, vm_pids)
        client.wait(30)
        server.wait(30)
    finally:
        for p in (client, server):
            if p.poll() is None:
                p.kill()
                p.wait()
    split = w.split
    pct = split.percent()
    d = {k: 100 * (b[k] - a[k]) / (b["t"] - a["t"]) for k in a if k != "t"}
    others = d["all_tasks"] - d["daemons"]
    assert split.method == attribution.BPF or split.method == attribution.IRQTIME
    assert split.ncpus == 2 and pct["vswitch"] > 5 and pct["softirq_in_vswitch"] > 1, pct
    print("split", {k: round(v, 1) for k, v in pct.items()}, w.result["components"], "measured", {k: round(v, 1) for k, v in d.items()})
    assert pct["dataplane"] <= 200 + 2, pct
    assert pct["dataplane"] >= d["busy"] - others - 5, (pct, d)


def test_one_second_deferred_rtt_window_has_vswitch_cpu(dep):
    from vnetbench.battery import rtt
    # 10 single echoes 0.1 s apart: a window of about one second, whatever the load
    r = rtt.run(dep, cross(dep), mode="deferred", count=10, gap_s=0.1, repetitions=2)
    windows = [x["cpu"] for x in r.extra["repetitions"]]
    assert all(0.9 < w["seconds"] < 5 for w in windows), windows
    assert all(v > 0 for v in r.samples["cpu_vswitch_pct"]), r.samples
    assert all(e is not None and e >= 0 for e in r.samples["cpu_pct_err"])
    assert r.provenance["cpu"]["method"] in (attribution.BPF, attribution.IRQTIME)
    assert r.provenance["cpu"]["resolution_s"] <= 0.1


def scrape(registries) -> dict:
    """(part) -> seconds summed over the hosts' collectors, and when."""
    out = {}
    for reg in registries:
        for fam in reg.collect():
            if fam.name == "vnetbench_dataplane_cpu_seconds":
                for s in fam.samples:
                    if s.name.endswith("_total"):
                        out[s.labels["part"]] = out.get(s.labels["part"], 0.0) + s.value
    return {"t": time.monotonic(), "parts": out}


def test_collector_counters_agree_with_the_window(dep, tmp_path):
    """The exporter's counters (built from the argv the monitor runs it with) and a
    battery window over the same steady TCP stream give the same split within 5%."""
    probe_file = dep.cpu_probe()
    registries = []
    for host in dep.testbed.hosts:
        argv = watch.collector_argv(dep, host, tmp_path / f"{host.name}.port", probe_file)
        registries.append(build_registry(parser().parse_args(argv[3:])))
    server, client = steady_tcp(dep)
    try:
        scrape(registries)                       # the collectors' first reading: their zero
        with cpu.Window(dep) as w:
            s0 = scrape(registries)
            for _ in range(4):
                time.sleep(1)
                s1 = scrape(registries)          # scraped every second, as Prometheus does
    finally:
        for p in (client, server):
            p.wait(30)
    window = w.split.percent()
    secs = s1["t"] - s0["t"]
    collector = {p: 100 * (s1["parts"].get(p, 0) - s0["parts"].get(p, 0)) / secs
                 for p in attribution.PARTS}
    collector["dataplane"] = sum(collector.values())
    print("collector", collector, "window", window)
    for key in ("dataplane", "vswitch", "softirq_in_vswitch"):
        assert collector[key] == pytest.approx(window[key], rel=0.05, abs=1.0), (key, collector, window)
