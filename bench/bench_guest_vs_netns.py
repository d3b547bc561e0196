"""What a real guest costs: TCP throughput and ICMP RTT through QEMU guests (libvirt
backend, TCG on this machine) beside namespace VMs (netns backend), on the same vSwitch
configuration, the same emulated hosts' CPUs and the same pairs.

Both testbeds are up at once; the runs alternate (netns, guests, then guests, netns, ...)
so a change of the machine's load hits both sides alike. Per pair and round: one iperf3
TCP stream of --seconds, then --pings echoes 50 ms apart. Everything goes through the
Deployment interface (exec, popen), as the battery does.

    .venv/bin/python bench/bench_guest_vs_netns.py --image vm-images/build [--rounds 5]
        [--seconds 3] [--pings 20] [--vswitch ovs] [--network vxlan]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_testbed, show, stats, write_json  # noqa: E402

from vnetbench.battery.session import iperf3_server  # noqa: E402
from vnetbench.rally_plugins.context import testbed_yaml  # noqa: E402
from vnetbench.testbed import deployment  # noqa: E402
from vnetbench.traffic import iperf3, ping  # noqa: E402


def measure(dep, pair, seconds: float, pings: int) -> dict:
    src, dst = pair.vms
    with iperf3_server(dep, dst):
        out = dep.exec(src, iperf3.client_command(iperf3.ClientParams(dest=dep.ip(dst), seconds=seconds)),
                       timeout=seconds + 60)
    tcp = iperf3.parse(out.stdout)
    rtt = ping.parse(dep.exec(src, ping.command(ping.PingParams(dep.ip(dst), count=pings, interval_s=0.05)),
                              timeout=pings + 30).stdout)
    return {"mbps": tcp["bits_per_second"] / 1e6, "rtt_ms": rtt["rtt_avg_ms"],
            "rtt_min_ms": rtt["rtt_min_ms"], "received": rtt["received"]}


def clocksource(dep) -> str:
    """The guest kernel's clock (its resolution bounds what its ping can see)."""
    return dep.exec(dep.testbed.vms[0].name,
                    ["cat", "/sys/devices/system/clocksource/clocksource0/current_clocksource"]).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", required=True, help="directory with vmlinuz + initrd.img (make image)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--pings", type=int, default=20)
    ap.add_argument("--vswitch", default="ovs")
    ap.add_argument("--network", default="vxlan")
    args = ap.parse_args()
    text = testbed_yaml(args.vswitch, args.network, None, ["same-host", "cross-host"])
    deps, boot = {}, {}
    try:
        for backend, opts in (("netns", {}), ("libvirt", {"image_dir": Path(args.image)})):
            t0 = time.monotonic()
            deps[backend] = deployment.build(backend, load_testbed(text, source=f"<bench {backend}>"), **opts)
            boot[backend] = round(time.monotonic() - t0, 1)
        clock = clocksource(deps["libvirt"])
        samples = {}               # (backend, placement) -> [measure()]
        for r in range(args.rounds):
            order = ("netns", "libvirt") if r % 2 == 0 else ("libvirt", "netns")
            for backend in order:
                dep = deps[backend]
                for pair in dep.testbed.pairs:
                    m = measure(dep, pair, args.seconds, args.pings)
                    samples.setdefault((backend, pair.placement), []).append(m)
                    print(f"round {r + 1} {backend:8} {pair.placement:10} {m['mbps']:9.1f} Mbit/s "
                          f"RTT {m['rtt_ms']:.3f} ms", flush=True)
    finally:
        for dep in deps.values():
            dep.down()
    rows, results = [], []
    for (backend, placement), ms in sorted(samples.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        tcp, rtt = stats(m["mbps"] for m in ms), stats(m["rtt_ms"] for m in ms)
        results.append({"backend": backend, "placement": placement, "mbps": tcp, "rtt_ms": rtt,
                        "rtt_min_ms": min(m["rtt_min_ms"] for m in ms), "samples": ms})
        rows.append([placement, backend, tcp["median"], tcp["min"], tcp["max"], rtt["median"],
                     rtt["min"], rtt["max"]])
    show(["placement", "VMs", "TCP Mbit/s median", "min", "max", "RTT ms median", "min", "max"], rows,
         f"{args.vswitch}/{args.network}: namespaces vs TCG guests, {args.rounds} alternating rounds")
    ratio = {p: statistics.median(m["mbps"] for m in samples[("netns", p)]) /
             max(1e-9, statistics.median(m["mbps"] for m in samples[("libvirt", p)]))
             for p in ("same-host", "cross-host")}
    print(f"netns/guest throughput ratio: {ratio}; guest clocksource: {clock}; "
          f"bring-up s: {boot}")
    path = write_json("guest_vs_netns", {"args": vars(args), "bring_up_s": boot, "guest_clocksource": clock,
                                         "throughput_ratio_netns_over_guest": ratio, "results": results})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
