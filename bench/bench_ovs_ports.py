"""AF_PACKET against AF_XDP ports for OVS's userspace datapath (issue 22: lift the
ceiling the OVS-based columns hit here): TCP throughput, UDP 64 B packets/s, echo RTT
(10 ms flood, the battery's own), each with the hosts' data-plane CPU beside it; both
placements; then the bring-up time and ovs-vswitchd's resident memory per host.

One testbed per (kind, ports) with a same-host and a cross-host pair; every family runs
through the battery (the code ``vnetbench compare`` runs). AF_XDP ports are polled by a
PMD thread per host that sleeps up to ``other_config:pmd-maxsleep`` when idle
(vnetbench.kinds.ovs.netns.PMD_MAXSLEEP_US); its poll time is in the CPU figure.

    .venv/bin/python bench/bench_ovs_ports.py [--kinds ovs] [--network vxlan]
        [--seconds 3] [--repetitions 3] [--maxsleep 50]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, write_json  # noqa: E402

from vnetbench.battery import rtt, tcp, udp  # noqa: E402
from vnetbench.kinds.ovs import netns as ovs_netns  # noqa: E402


def testbed(kind: str, network: str, ports: str) -> str:
    return (f"name: ports-{ports}\nvswitch: {{kind: {kind}, datapath: netdev, ports: {ports}}}\n"
            f"network: {{type: {network}}}\n"
            "pairs:\n  - {name: same, placement: same-host}\n  - {name: cross, placement: cross-host}\n")


def rss_mib(dep) -> dict:
    """ovs-vswitchd's resident memory per host (MiB), from /proc."""
    out = {}
    for h in dep.testbed.hosts:
        pid = dep.vswitch_pids(h.name).get("ovs-vswitchd")
        if pid:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[h.name] = round(int(line.split()[1]) / 1024)
    return out


def measure(dep, a) -> list[dict]:
    out = []
    for pair in dep.testbed.pairs:
        for fam, key, results in (
                ("tcp", "gbps", tcp.run(dep, pair, (1448,), seconds=a.seconds,
                                        repetitions=a.repetitions, verify_on_wire=False)),
                ("udp 64 B", "pps", udp.run(dep, pair, sessions=(1,), seconds=a.seconds, length=64,
                                            repetitions=a.repetitions)),
                ("rtt", "rtt_mean_ms", [rtt.run(dep, pair, repetitions=a.repetitions)])):
            for r in results:
                m = r.metrics
                out.append({"family": fam, "placement": pair.placement, "metric": key,
                            "value": m[key]["mean"], "sd": m[key].get("sd"),
                            "n": len(r.samples.get(key, [])) or a.repetitions,
                            "loss_pct": m.get("loss_pct", {}).get("mean"),
                            "cpu_pct": (m.get("cpu_pct") or {}).get("mean")})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=["ovs"])
    ap.add_argument("--network", default="vxlan")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--maxsleep", type=int, default=ovs_netns.PMD_MAXSLEEP_US,
                    help="the PMD's pmd-maxsleep (µs) for this run")
    a = ap.parse_args()
    ovs_netns.PMD_MAXSLEEP_US = a.maxsleep
    data, rows = {}, []
    for kind in a.kinds:
        for ports in ("afpacket", "afxdp"):
            t0 = time.monotonic()
            with deployed(load_testbed(testbed(kind, a.network, ports))) as dep:
                up_s = time.monotonic() - t0
                got, mem = measure(dep, a), rss_mib(dep)
            data[f"{kind} {ports}"] = {"results": got, "up_s": up_s, "vswitchd_rss_mib": mem}
            for g in got:
                sd = "" if g["sd"] is None else f" ±{g['sd']:.3g}"
                rows.append([kind, ports, g["family"], g["placement"], f"{g['value']:.4g}{sd} {g['metric']}",
                             "" if g["loss_pct"] is None else f"{g['loss_pct']:.1f}",
                             "" if g["cpu_pct"] is None else f"{g['cpu_pct']:.0f}"])
            rows.append([kind, ports, "bring-up", "", f"{up_s:.2f} s", "",
                         f"vswitchd RSS {', '.join(f'{h} {v} MiB' for h, v in mem.items())}"])
    show(["kind", "ports", "family", "placement", "mean ± sd (n = repetitions)", "loss %",
          "data-plane CPU %"], rows, title=f"OVS userspace datapath: AF_PACKET vs AF_XDP ports ({a.network})")
    write_json("ovs_ports", {"args": vars(a), "data": data})
    return 0


if __name__ == "__main__":
    sys.exit(main())
