"""Seed 000's two inter-VLAN testbeds side by side: the L3 switch (an SVI per VLAN on the
switch) and the router on a stick (a router on one trunk port), on ovs over VLANs, four
PCs on one switch (``examples/seed000-svi.yaml``, ``examples/seed000-stick.yaml``).

Per testbed, for the pair inside VLAN 10 (pc1 -> pc2) and across VLANs (pc1 -> pc3):
ICMP RTT at three payload sizes, TCP, and the seed's throughput test at its Fast Ethernet
figures: one more UDP flow of 30 Mbit/s measured in the presence of the seed's CBR
background (``udp.background_flows`` "seed000": on the L3 switch every PC to the other
three at 25 Mbit/s, behind the stick each PC to one PC of the other VLAN at 20 Mbit/s;
500-byte payloads), the measured flow's delivered rate and loss beside the background's
mean and worst loss, each with the host-side data-plane CPU. The links here have no line
rate (the seed's 100 Mbit/s saturated its trunk): what loses packets here is the
vSwitch's and the router's forwarding on this machine's two CPUs.

    .venv/bin/python bench/bench_seed000.py [--seconds 3] [--repetitions 3]
        [--payloads 64 500 1400] [--kind ovs]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, write_json  # noqa: E402

from vnetbench.battery import rtt, tcp, udp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the seed's Fast Ethernet background per flow (its sections 4.2.1 and 4.2.2), bit/s
BACKGROUND_BPS = {"svi": 25_000_000, "stick": 20_000_000}
BACKGROUND_PAYLOAD = 500
#: the seed's additional Iperf flow on Fast Ethernet, bit/s (the seed sweeps its payload;
#: ``--length`` is one point of that sweep)
MEASURED_BPS = 30_000_000


def measure(dep, routing, a) -> list[dict]:
    out = []
    for pair in dep.testbed.pairs:
        runs = [("rtt", [rtt.run(dep, pair, mode="flood", count=200, interval_s=0.005, payload=p,
                                 repetitions=a.repetitions) for p in a.payloads], "rtt_mean_ms"),
                ("tcp", tcp.run(dep, pair, (1448,), seconds=a.seconds, repetitions=a.repetitions,
                                verify_on_wire=False), "gbps"),
                ("udp+background", udp.run(dep, pair, sessions=(1,), seconds=a.seconds, length=a.length,
                                           bitrate_bps=MEASURED_BPS,
                                           background_bps=BACKGROUND_BPS[routing], background="seed000",
                                           background_length=BACKGROUND_PAYLOAD,
                                           repetitions=a.repetitions), "gbps")]
        for fam, results, key in runs:
            for r in results:
                m = r.metrics
                bg = [b for rep in r.extra.get("repetitions", []) for b in rep.get("background", [])]
                out.append({"family": fam, "path": pair.path, "payload": r.labels["params"].get("payload"),
                            "metric": key, "value": m[key]["mean"], "ci95": m[key].get("ci95"),
                            "loss_pct": m.get("loss_pct", {}).get("mean"), "cpu_pct": m["cpu_pct"]["mean"],
                            "background_loss_pct": _loss(bg)})
    return out


def _loss(flows) -> str | None:
    """The background's mean and worst loss over its flows and repetitions ("mean / worst"); a
    flow without a result (its iperf3 failed) counts as 100 %."""
    if not flows:
        return None
    lost = [b.get("loss_pct", 100.0) for b in flows]
    return f"{sum(lost) / len(lost):.1f} / {max(lost):.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", default="ovs")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--payloads", type=int, nargs="+", default=[64, 500, 1400], help="ICMP payloads")
    ap.add_argument("--length", type=int, default=1472, help="the measured UDP flow's payload")
    a = ap.parse_args()
    data, rows = {}, []
    for routing in ("svi", "stick"):
        text = (ROOT / f"examples/seed000-{routing}.yaml").read_text().replace("vswitch: ovs", f"vswitch: {a.kind}")
        with deployed(load_testbed(text, source=f"<seed000 {routing}>")) as dep:
            got = measure(dep, routing, a)
        data[routing] = got
        for g in got:
            ci = f" ±{g['ci95']:.2g}" if g["ci95"] else ""
            bg = g["background_loss_pct"] or ""
            rows.append([routing, g["path"], g["family"], g["payload"] or "", f"{g['value']:.4g}{ci} {g['metric']}",
                         "" if g["loss_pct"] is None else f"{g['loss_pct']:.1f}", bg, f"{g['cpu_pct']:.0f}"])
    show(["testbed", "path", "family", "payload B", "mean (95% CI)", "loss %", "background loss % mean / worst",
          "data-plane CPU %"], rows,
         title=f"seed 000 on {a.kind}/vlan: pc1 -> pc2 inside VLAN 10 (l2), pc1 -> pc3 across VLANs (l3-east-west)")
    write_json(f"seed000_{a.kind}", {"args": vars(a), "data": data})
    return 0


if __name__ == "__main__":
    sys.exit(main())
