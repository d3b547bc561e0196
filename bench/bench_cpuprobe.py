"""Overhead of the interrupt-time probe (bpftrace on the softirq/hardirq tracepoints):
cross-host TCP throughput (iperf3, one stream) and RTT (ping) on an OVS VXLAN testbed,
with and without the probe, in alternating runs (off/on, then on/off, ...), plus
the CPU the probe's own processes (runner and bpftrace) used while it ran.

    .venv/bin/python bench/bench_cpuprobe.py [--rounds 6] [--seconds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _common import REPO, deployed, load_testbed, ping, show, write_json

from vnetbench.testbed.netns import cpuprobe
from vnetbench_collector import procfs

PING_COUNT, PING_INTERVAL = 200, 0.01


def tcp_gbps(dep, a, b, seconds) -> float:
    from vnetbench.battery.session import iperf3_server
    from vnetbench.traffic import iperf3
    with iperf3_server(dep, b):
        out = dep.exec(a, iperf3.client_command(iperf3.ClientParams(dest=dep.ip(b), seconds=seconds)),
                       timeout=seconds + 30).stdout
    return iperf3.parse(out)["bits_per_second"] / 1e9


def probe_runtime(dep) -> float:
    """Scheduler runtime (s) of the probe's runner and bpftrace, 0 when not running."""
    total = 0.0
    for name in ("cpuprobe.pid", "cpuprobe-bpftrace.pid"):
        try:
            pid = int((dep.run.dir / name).read_text())
        except (OSError, ValueError):
            continue
        total += sum(r for _, r in procfs.thread_runtimes(Path("/proc"), pid))
    return total


def one(dep, a, b, seconds, on: bool) -> dict:
    if on:
        assert cpuprobe.ensure(dep), cpuprobe.wanted() or "the probe did not start"
    else:
        cpuprobe.stop(dep)
    t0, r0 = time.monotonic(), probe_runtime(dep)
    gbps = tcp_gbps(dep, a, b, seconds)
    rtt = ping(dep, a, dep.ip(b), PING_COUNT, PING_INTERVAL)
    t1, r1 = time.monotonic(), probe_runtime(dep)
    return {"probe": on, "gbps": gbps, "rtt_avg_ms": rtt.get("rtt_avg_ms"),
            "loss_pct": rtt.get("loss_pct"), "probe_cpu_pct": 100 * (r1 - r0) / (t1 - t0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6, help="off/on pairs (default 6)")
    ap.add_argument("--seconds", type=int, default=5, help="iperf3 duration (default 5)")
    args = ap.parse_args(argv)
    why = cpuprobe.wanted()
    if why:
        print(f"bench_cpuprobe: the probe cannot run here: {why}", file=sys.stderr)
        return 2
    runs = []
    with deployed(load_testbed(path=REPO / "examples" / "ovs-vxlan.yaml")) as dep:
        pair = next(p for p in dep.testbed.pairs if p.placement == "cross-host")
        a, b = pair.vms
        for i in range(args.rounds):
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                runs.append(one(dep, a, b, args.seconds, on))
                print(runs[-1], file=sys.stderr)
        cpuprobe.stop(dep)
    summary = {}
    for on in (False, True):
        xs = [r for r in runs if r["probe"] is on]
        summary["on" if on else "off"] = {
            k: {"median": statistics.median(r[k] for r in xs), "min": min(r[k] for r in xs),
                "max": max(r[k] for r in xs)}
            for k in ("gbps", "rtt_avg_ms", "probe_cpu_pct")}
    off, on = summary["off"], summary["on"]
    delta = {k: 100 * (on[k]["median"] - off[k]["median"]) / off[k]["median"]
             for k in ("gbps", "rtt_avg_ms")}
    show(["probe", "Gbit/s median (min-max)", "RTT ms median (min-max)", "probe CPU %"],
         [[name, f"{s['gbps']['median']:.3f} ({s['gbps']['min']:.3f}-{s['gbps']['max']:.3f})",
           f"{s['rtt_avg_ms']['median']:.3f} ({s['rtt_avg_ms']['min']:.3f}-{s['rtt_avg_ms']['max']:.3f})",
           f"{s['probe_cpu_pct']['median']:.2f}"] for name, s in (("off", off), ("on", on))],
         title=f"Probe overhead: {args.rounds} alternating off/on rounds, iperf3 -t {args.seconds}, "
               f"ping -c {PING_COUNT} -i {PING_INTERVAL} (cross-host, OVS VXLAN)")
    print(f"on vs off: throughput {delta['gbps']:+.1f}%, RTT {delta['rtt_avg_ms']:+.1f}% "
          f"(run-to-run spread off: Gbit/s {off['gbps']['min']:.3f}-{off['gbps']['max']:.3f})")
    write_json("bench_cpuprobe", {"args": vars(args), "runs": runs, "summary": summary,
                                  "delta_pct": delta})
    return 0


if __name__ == "__main__":
    sys.exit(main())
