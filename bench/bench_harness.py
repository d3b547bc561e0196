"""Harness overhead: vnetbench's reported TCP throughput and median RTT against
iperf3 and ping run by hand on the same testbed, same VMs, same CPU pinning.

Targets: TCP within 3%, median RTT within 5%. Runs alternate (harness, hand,
harness, hand, ...) so that drift of this 2-core machine hits both sides alike.

    .venv/bin/python bench/bench_harness.py [--repeat 5] [--seconds 5] [--pings 500]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import time

from _common import deployed, load_testbed, show, write_json

from vnetbench.battery import rtt, tcp

TESTBEDS = {"ovs-vxlan": "vswitch: ovs\nnetwork: {type: vxlan}\n",
            "linuxbridge-vxlan": "vswitch: linuxbridge\nnetwork: {type: vxlan}\n"}


def by_hand_tcp(dep, src, dst, seconds):
    """What a user would type: an iperf3 server and client in the VMs' namespaces."""
    ns_src, ns_dst = dep.names.vm_ns(src), dep.names.vm_ns(dst)
    pin = lambda vm: ["taskset", "-c", ",".join(map(str, dep.testbed.vm(vm).cpus))]
    server = subprocess.Popen(["ip", "netns", "exec", ns_dst, *pin(dst), "iperf3", "-s", "-1",
                               "-B", dep.ip(dst)], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    out = subprocess.run(["ip", "netns", "exec", ns_src, *pin(src), "iperf3", "-c", dep.ip(dst),
                          "-t", str(seconds), "-J"], capture_output=True, text=True).stdout
    server.wait(timeout=10)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9


def by_hand_rtt(dep, src, dst, count):
    out = subprocess.run(["ip", "netns", "exec", dep.names.vm_ns(src), "taskset", "-c",
                          ",".join(map(str, dep.testbed.vm(src).cpus)), "ping", "-c", str(count),
                          "-i", "0.01", dep.ip(dst)], capture_output=True, text=True).stdout
    return statistics.median(float(x) for x in re.findall(r"time=([\d.]+) ms", out))


def harness_tcp(dep, pair, seconds):
    (r,) = tcp.run(dep, pair, nominal_mss=(dep.testbed.network.tenant_mtu - 40,),
                   seconds=seconds, repetitions=1, verify_on_wire=False)
    return r.samples["gbps"][0]


def harness_rtt(dep, pair, count):
    r = rtt.run(dep, pair, mode="flood", count=count, interval_s=0.01, repetitions=1)
    return r.samples["rtt_p50_ms"][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--pings", type=int, default=500)
    a = ap.parse_args()
    rows, data = [], {}
    for name, text in TESTBEDS.items():
        with deployed(load_testbed(text, source=name)) as dep:
            for pair in dep.testbed.pairs:
                src, dst = pair.vms
                m = {"tcp_harness": [], "tcp_hand": [], "rtt_harness": [], "rtt_hand": []}
                for _ in range(a.repeat):
                    m["tcp_harness"].append(harness_tcp(dep, pair, a.seconds))
                    m["tcp_hand"].append(by_hand_tcp(dep, src, dst, a.seconds))
                    m["rtt_harness"].append(harness_rtt(dep, pair, a.pings))
                    m["rtt_hand"].append(by_hand_rtt(dep, src, dst, a.pings))
                med = {k: statistics.median(v) for k, v in m.items()}
                dt = 100 * (med["tcp_harness"] - med["tcp_hand"]) / med["tcp_hand"]
                dr = 100 * (med["rtt_harness"] - med["rtt_hand"]) / med["rtt_hand"]
                rows.append([name, pair.placement, f"{med['tcp_harness']:.3f}", f"{med['tcp_hand']:.3f}",
                             f"{dt:+.1f}%", "PASS" if abs(dt) <= 3 else "FAIL",
                             f"{med['rtt_harness']:.4f}", f"{med['rtt_hand']:.4f}", f"{dr:+.1f}%",
                             "PASS" if abs(dr) <= 5 else "FAIL"])
                data[f"{name}/{pair.placement}"] = {"samples": m, "medians": med,
                                                    "tcp_diff_pct": dt, "rtt_diff_pct": dr}
    show(["testbed", "placement", "TCP Gbit/s harness", "by hand", "diff", "<=3%",
          "median RTT ms harness", "by hand", "diff", "<=5%"], rows,
         title=f"harness overhead ({a.repeat} alternating runs, medians)")
    write_json("bench_harness", {"repeat": a.repeat, "seconds": a.seconds, "pings": a.pings,
                                 "results": data})


if __name__ == "__main__":
    main()
