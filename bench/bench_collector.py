"""Cost of one vnetbench-collector scrape: target <= 10 ms and <= 1% of one CPU at a 1 s interval.

(a) in process: a VSwitchCollector built as the CLI builds it for a compute node
    (default process names, QEMU on, datapath counters from ovs-appctl), with
    generate_latest(registry) timed --repeat times; CPU per scrape counts this
    process (time.process_time) *and* the ovs-appctl children it waited for
    (os.times().children_user + children_system).
(b) end to end: examples/ovs-vxlan.yaml is brought up, the real collector process
    of host h1 is started with the argv of monitor.watch.collector_argv (in the root
    namespace, 127.0.0.1:0) and scraped over HTTP once per second for --seconds;
    its CPU comes from /proc/PID/stat utime+stime+cutime+cstime (cutime/cstime hold
    the ovs-appctl children it waited for). The same again with --no-datapath.

    .venv/bin/python bench/bench_collector.py [--repeat 200] [--seconds 30] [--extra-procs 0]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, load_testbed, show, write_json  # noqa: E402

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from vnetbench_collector import datapath, procfs  # noqa: E402
from vnetbench_collector.__main__ import pidfile_source  # noqa: E402
from vnetbench_collector.collector import VSwitchCollector  # noqa: E402

from vnetbench.monitor.watch import collector_argv  # noqa: E402
from vnetbench.testbed.netns import builder  # noqa: E402
from vnetbench import kinds  # noqa: E402

TARGET_WALL_MS, TARGET_CPU_PCT = 10.0, 1.0
INTERVAL_S = 1.0
TESTBED = REPO / "examples" / "ovs-vxlan.yaml"
HZ = os.sysconf("SC_CLK_TCK")
# What Prometheus 2.x (Debian 12: 2.42) sends on every scrape.
SCRAPE_HEADERS = {"Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                  "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                  "Accept-Encoding": "gzip", "X-Prometheus-Scrape-Timeout-Seconds": "1"}


def pct(xs, p) -> float | None:
    """Nearest-rank percentile."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else None


def summary(xs) -> dict:
    xs = list(xs)
    return {"n": len(xs), "median": statistics.median(xs) if xs else None,
            "p95": pct(xs, 95), "max": max(xs) if xs else None, "mean": statistics.fmean(xs) if xs else None}


def cpu_now() -> float:
    """CPU seconds of this process plus the children it has waited for. os.times() has
    the same children's time rounded to clock ticks (10 ms), too coarse per scrape."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


# ---------------------------------------------------------------- (a) in process

def in_process(label: str, collector: VSwitchCollector, repeat: int) -> dict:
    """Scrapes back to back, but on the collector's clock each is INTERVAL_S after the
    last, so its full /proc rescans (every rescan_s) happen as often as in service."""
    now = [0.0]
    collector.clock = lambda: now[0]
    registry = CollectorRegistry()
    registry.register(collector)
    body = generate_latest(registry)                     # warm-up (imports, first /proc walk)
    wall, cpu = [], []
    for _ in range(repeat):
        now[0] += INTERVAL_S
        c0, t0 = cpu_now(), time.perf_counter()
        generate_latest(registry)
        t1, c1 = time.perf_counter(), cpu_now()
        wall.append((t1 - t0) * 1e3)
        cpu.append((c1 - c0) * 1e3)
    return {"case": label, "repeat": repeat, "bytes": len(body),
            "series": sum(1 for line in body.splitlines() if line and not line.startswith(b"#")),
            "wall_ms": summary(wall), "cpu_ms": summary(cpu),
            "cpu_ms_total": sum(cpu), "wall_ms_samples": wall, "cpu_ms_samples": cpu}


def breakdown(collector: VSwitchCollector, repeat: int) -> dict:
    """Wall ms (median) of the pieces one scrape is made of, each timed on its own."""
    proc, names = collector.proc, collector.names + procfs.QEMU_PROCESSES
    entries = procfs.scan(proc, collector.hz)
    found = collector._by_name(entries)
    pieces = {
        "scan (walk /proc once: stat of every pid)": lambda: procfs.scan(proc, collector.hz),
        "find_processes in the scan (exe only for truncated names)":
            lambda: procfs.find_processes(proc, names, entries=entries),
        f"process + thread stat of the {len(found)} processes found":
            lambda: collector._cpu_seconds(found),
        "softirq_seconds + softirq_counts":
            lambda: (procfs.softirq_seconds(proc), procfs.softirq_counts(proc)),
    }
    if collector.datapaths:
        pieces["datapaths (dpctl/show over the unixctl socket)"] = collector.datapaths
    out = {}
    for name, fn in pieces.items():
        fn()
        xs = []
        for _ in range(repeat):
            c0, t0 = cpu_now(), time.perf_counter()
            fn()
            xs.append(((time.perf_counter() - t0) * 1e3, (cpu_now() - c0) * 1e3))
        out[name] = {"wall_ms_median": statistics.median(x[0] for x in xs),
                     "cpu_ms_median": statistics.median(x[1] for x in xs)}
    return out


def compute_node_collector(ctl: str | None, with_datapath: bool = True) -> VSwitchCollector:
    """As __main__.build_registry with --host/--vswitch ovs and no other option, except
    that --ovs-target points at a running ovs-vswitchd (the testbed's h1)."""
    return VSwitchCollector(host="compute-1", vswitch="ovs", names=procfs.VSWITCH_PROCESSES,
                            datapaths=datapath.ovs_source(ctl) if with_datapath else None,
                            qemu=True)


# ---------------------------------------------------------------- (b) end to end

def proc_cpu_s(pid: int) -> tuple[float, float]:
    """(utime+stime, cutime+cstime) of pid in seconds, from /proc/PID/stat fields 14-17."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ, (int(f[13]) + int(f[14])) / HZ


def end_to_end(label: str, argv: list, port_file: Path, seconds: float) -> dict:
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 15
        while not port_file.exists():
            if p.poll() is not None or time.monotonic() > deadline:
                err.seek(0)
                raise RuntimeError(f"collector did not start (exit {p.poll()}): "
                                   f"{err.read().decode()[-500:]}")
            time.sleep(0.02)
        url = f"http://127.0.0.1:{int(port_file.read_text())}/metrics"

        def scrape() -> tuple[float, int]:
            t0 = time.perf_counter()
            with urllib.request.urlopen(urllib.request.Request(url, headers=SCRAPE_HEADERS),
                                        timeout=5) as resp:
                body = resp.read()
            return (time.perf_counter() - t0) * 1e3, len(body)

        scrape()                                    # warm-up: first /proc walk, imports
        time.sleep(0.5)
        own0, kids0 = proc_cpu_s(p.pid)
        t_start = time.monotonic()
        lat, size, n = [], 0, int(seconds / INTERVAL_S)
        for i in range(n):
            next_at = t_start + i * INTERVAL_S
            time.sleep(max(0.0, next_at - time.monotonic()))
            ms, size = scrape()
            lat.append(ms)
        time.sleep(max(0.0, t_start + n * INTERVAL_S - time.monotonic()))
        elapsed = time.monotonic() - t_start
        own1, kids1 = proc_cpu_s(p.pid)
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        err.close()
        port_file.unlink(missing_ok=True)
    own, kids = own1 - own0, kids1 - kids0
    return {"case": label, "argv": argv, "scrapes": n, "elapsed_s": elapsed, "bytes": size,
            "latency_ms": summary(lat), "latency_ms_samples": lat,
            "cpu_s_own": own, "cpu_s_children": kids,
            "cpu_pct": 100 * (own + kids) / elapsed, "cpu_pct_own": 100 * own / elapsed,
            "cpu_pct_children": 100 * kids / elapsed,
            "cpu_ms_per_scrape": 1e3 * (own + kids) / n, "clk_tck": HZ}


# ---------------------------------------------------------------- main

def spawn_idle(n: int) -> list:
    """n idle processes, to see how the /proc walks scale with a compute node's pid count."""
    return [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL) for _ in range(n)]


def verdict(value, target) -> str:
    return "-" if value is None else ("PASS" if value <= target else "FAIL")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200, help="in-process scrapes per case")
    ap.add_argument("--seconds", type=float, default=30, help="end-to-end scraping time per case")
    ap.add_argument("--extra-procs", type=int, default=0,
                    help="start this many idle 'sleep' processes during (a) (a compute node has "
                    "hundreds to thousands of pids; this container has few)")
    args = ap.parse_args(argv)

    testbed = load_testbed(path=TESTBED)
    print(f"bringing up {TESTBED.relative_to(REPO)} ...", flush=True)
    dep = builder.up(testbed)
    idle: list = []
    try:
        h1 = dep.testbed.host("h1")
        ctl = str(dep.host_file(h1.name, "ovs-vswitchd.ctl"))
        print(f"run {dep.run_id}: h1 ovs-vswitchd {dep.vswitch_pids('h1')}", flush=True)

        # (a) in process
        idle = spawn_idle(args.extra_procs)
        npids = sum(1 for e in os.listdir("/proc") if e.isdigit())
        print(f"(a) in process, {args.repeat} scrapes per case, {npids} pids in /proc", flush=True)
        cases = [
            ("compute node: names, qemu, datapath from h1's unixctl socket", compute_node_collector(ctl)),
            ("compute node, --no-datapath", compute_node_collector(ctl, with_datapath=False)),
            ("CLI defaults, no --ovs-target (no system ovs-vswitchd here)",
             compute_node_collector(None)),
            ("testbed h1 (collector_argv: pidfiles, --cpus, --no-qemu)",
             VSwitchCollector(host="h1", vswitch="ovs", cpus=h1.cpus, qemu=False,
                              pid_source=pidfile_source([dep.host_file("h1", f"{p}.pid")
                                                         for p in kinds.get("ovs").host_daemons]),
                              datapaths=datapath.ovs_source(ctl))),
        ]
        inproc = []
        for label, coll in cases:
            r = in_process(label, coll, args.repeat)
            inproc.append(r)
            print(f"  {label}: wall median {r['wall_ms']['median']:.2f} ms, "
                  f"cpu median {r['cpu_ms']['median']:.2f} ms", flush=True)
        parts = breakdown(cases[0][1], max(20, args.repeat // 4))
        for proc_ in idle:
            proc_.kill()
            proc_.wait()
        idle = []

        # (b) end to end
        e2e = []
        with tempfile.TemporaryDirectory(prefix="vnb-bench-collector-") as d:
            port_file = Path(d) / "collector-h1.port"
            base = collector_argv(dep, h1, port_file)
            for label, extra in (("h1 collector (collector_argv)", []),
                                 ("h1 collector --no-datapath", ["--no-datapath"])):
                print(f"(b) {label}: scraping every {INTERVAL_S:g} s for {args.seconds:g} s ...",
                      flush=True)
                r = end_to_end(label, base + extra, port_file, args.seconds)
                e2e.append(r)
                print(f"  latency median {r['latency_ms']['median']:.2f} ms, CPU {r['cpu_pct']:.3f}% "
                      f"(own {r['cpu_pct_own']:.3f}%, children {r['cpu_pct_children']:.3f}%)",
                      flush=True)
    finally:
        for proc_ in idle:
            proc_.kill()
            proc_.wait()
        errors = dep.down()
        if errors:
            print(f"warning: teardown of run {dep.run_id} failed: {errors}", file=sys.stderr)
    print()

    show(["case", "series", "wall med ms", "p95 ms", "max ms", "CPU med ms", "CPU p95 ms",
          "CPU % @1s", "<=10 ms", "<=1% CPU"],
         [[r["case"], r["series"], r["wall_ms"]["median"], r["wall_ms"]["p95"], r["wall_ms"]["max"],
           r["cpu_ms"]["median"], r["cpu_ms"]["p95"], r["cpu_ms"]["mean"] / 10,
           verdict(r["wall_ms"]["median"], TARGET_WALL_MS),
           verdict(r["cpu_ms"]["mean"] / 10, TARGET_CPU_PCT)] for r in inproc],
         title=f"(a) in process: generate_latest() x {args.repeat}, {npids} pids in /proc "
               f"(CPU = this process + waited-for children; CPU % at 1 s = mean CPU ms / 10)")
    show(["piece", "wall med ms", "CPU med ms"],
         [[k, v["wall_ms_median"], v["cpu_ms_median"]] for k, v in parts.items()],
         title="(a) breakdown of the first case, each piece timed on its own")
    show(["case", "scrapes", "lat med ms", "p95 ms", "max ms", "CPU ms/scrape", "CPU % own",
          "CPU % children", "CPU % total", "<=10 ms", "<=1% CPU"],
         [[r["case"], r["scrapes"], r["latency_ms"]["median"], r["latency_ms"]["p95"],
           r["latency_ms"]["max"], r["cpu_ms_per_scrape"], r["cpu_pct_own"], r["cpu_pct_children"],
           r["cpu_pct"], verdict(r["latency_ms"]["median"], TARGET_WALL_MS),
           verdict(r["cpu_pct"], TARGET_CPU_PCT)] for r in e2e],
         title=f"(b) end to end: HTTP GET /metrics every {INTERVAL_S:g} s for {args.seconds:g} s "
               f"(CPU from /proc/PID/stat, {HZ} ticks/s: resolution {1e3 / HZ:.0f} ms over the period)")
    write_json(f"collector-{time.strftime('%Y%m%dT%H%M%S')}",
               {"target_wall_ms": TARGET_WALL_MS, "target_cpu_pct": TARGET_CPU_PCT,
                "interval_s": INTERVAL_S, "repeat": args.repeat, "seconds": args.seconds,
                "extra_procs": args.extra_procs, "pids_in_proc": npids,
                "in_process": inproc, "breakdown": parts, "end_to_end": e2e})
    return 0


if __name__ == "__main__":
    sys.exit(main())
