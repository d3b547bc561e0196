"""What a router costs: TCP, ICMP RTT and new connections/s on a pair across hosts on one
vnet (l2), across a router (l3-east-west) and from a VM to an external host through the
router's SNAT (north-south), per kind that routes, with the host-side data-plane CPU
beside each figure (a namespace router's forwarding is softirq time on its host: it is
in that figure; an OVN logical router is in the vSwitch's pipeline).

One testbed per kind: vnet1 and vnet2, router r1 on h1 with an external gateway, and
three cross-host pairs: cross (vnet1, h1 -> h2), cross-ew (vnet1 on h1 -> vnet2 on h2,
through r1) and cross-ns (vnet1 on h2 -> the external host, through r1's SNAT on h1).
Each family runs through the battery (the code of ``vnetbench compare``).

    .venv/bin/python bench/bench_routed_path.py [--kinds linuxbridge ovs ovs-openflow ovn]
        [--network vxlan] [--seconds 3] [--repetitions 3] [--rates 500 2000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, write_json  # noqa: E402

from vnetbench.battery import flowsetup, rtt, tcp  # noqa: E402
from vnetbench.rally_plugins.context import testbed_yaml  # noqa: E402

PATHS = ["l2", "l3-east-west", "north-south"]


def measure(dep, a) -> list[dict]:
    out = []
    for pair in dep.testbed.pairs:
        path = pair.path
        runs = (("rtt", [rtt.run(dep, pair, mode="flood", count=200, interval_s=0.005,
                                 repetitions=a.repetitions)], "rtt_mean_ms"),
                ("tcp", tcp.run(dep, pair, (1448,), seconds=a.seconds, repetitions=a.repetitions,
                                verify_on_wire=False), "gbps"),
                ("conn/s", flowsetup.run(dep, pair, rates=tuple(a.rates), seconds=a.seconds,
                                         repetitions=a.repetitions), "achieved_rate"))
        for fam, results, key in runs:
            for r in results:
                m = r.metrics
                out.append({"family": fam, "path": path, "point": r.labels.get("point"), "metric": key,
                            "value": m[key]["mean"], "ci95": m[key].get("ci95"),
                            "loss_pct": m.get("loss_pct", {}).get("mean"),
                            "cpu_pct": m["cpu_pct"]["mean"]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=["linuxbridge", "ovs", "ovs-openflow", "ovn"])
    ap.add_argument("--network", default="vxlan")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--rates", type=int, nargs="+", default=[500, 2000],
                    help="new connections/s offered (through SNAT on the north-south pair)")
    a = ap.parse_args()
    data, rows = {}, []
    for kind in a.kinds:
        text = testbed_yaml(kind, a.network, None, ["cross-host"], path=PATHS)
        with deployed(load_testbed(text, source=f"<routed {kind}>")) as dep:
            got = measure(dep, a)
        data[kind] = got
        for g in got:
            ci = f" ±{g['ci95']:.2g}" if g["ci95"] else ""
            rows.append([kind, g["path"], g["family"], g["point"] or "", f"{g['value']:.4g}{ci} {g['metric']}",
                         "" if g["loss_pct"] is None else f"{g['loss_pct']:.1f}", f"{g['cpu_pct']:.0f}"])
    show(["kind", "path", "family", "point", "mean (95% CI)", "loss %", "data-plane CPU %"], rows,
         title="cross-host pairs: one vnet (l2), across router r1 on h1 (l3-east-west), "
               "to the external host through r1's SNAT (north-south)")
    write_json("routed_path_" + "_".join(a.kinds), {"args": vars(a), "data": data})
    return 0


if __name__ == "__main__":
    sys.exit(main())
