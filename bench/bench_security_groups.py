"""What security groups cost: TCP, UDP with 64 B datagrams and new connections/s with
every port filtered (Neutron's default group) against none, per kind that enforces
them, and the rule-to-first-packet latency.

One testbed per (kind, security groups off | on) with a same-host and a cross-host
pair; each family runs through the battery (the same code as ``vnetbench compare``),
so each figure has its host-side data-plane CPU beside it (the firewall's work is
kernel softirq on the hosts' CPUs: it is in that figure). Rule to first packet: 20
rules, each admitting a port a probe knocks on every 5 ms (ms from the request to the
first answered knock; resolution 5 ms).

    .venv/bin/python bench/bench_security_groups.py [--kinds linuxbridge] [--network vxlan]
        [--seconds 3] [--repetitions 3] [--rates 1000 5000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, stats, write_json  # noqa: E402

from vnetbench.battery import flowsetup, tcp, udp  # noqa: E402
from vnetbench.functional import sgmeasure  # noqa: E402

KNOCK_PORTS = tuple(range(5301, 5321))


def testbed(kind: str, network: str, on: bool) -> str:
    sg = ("security_groups: [{name: knock}]\n" if on else "")
    # b (h1) and c (h2), for rule to first packet: c is outside b's default group, so
    # only the knock rules admit it
    vms = ("vms:\n  - {name: b, host: h1, vnets: [{name: vnet1, security_groups: [default, knock]}]}\n"
           "  - {name: c, host: h2, vnets: [{name: vnet1, security_groups: [knock]}]}\n" if on else "")
    pairs = "pairs:\n  - {name: same, placement: same-host}\n  - {name: cross, placement: cross-host}\n"
    return f"name: sg-{'on' if on else 'off'}\nvswitch: {kind}\nnetwork: {{type: {network}}}\n{sg}{vms}{pairs}"


def measure(dep, a) -> list[dict]:
    out = []
    for pair in dep.testbed.pairs:
        for fam, results in (
                ("tcp", tcp.run(dep, pair, (1448,), seconds=a.seconds, repetitions=a.repetitions,
                                verify_on_wire=False)),
                ("udp 64 B", udp.run(dep, pair, sessions=(1,), seconds=a.seconds, length=64,
                                     repetitions=a.repetitions)),
                ("conn/s", flowsetup.run(dep, pair, rates=tuple(a.rates), seconds=a.seconds,
                                         repetitions=a.repetitions))):
            for r in results:
                key = {"tcp": "gbps", "udp 64 B": "pps", "conn/s": "achieved_rate"}[fam]
                out.append({"family": fam, "placement": pair.placement, "point": r.labels.get("point"),
                            "value": r.metrics[key]["mean"], "metric": key,
                            "loss_pct": r.metrics.get("loss_pct", {}).get("mean"),
                            "cpu_pct": r.metrics["cpu_pct"]["mean"]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=["linuxbridge"])
    ap.add_argument("--network", default="vxlan")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--rates", type=int, nargs="+", default=[1000, 5000],
                    help="new connections/s offered; keep a reactive kind below its agent's ceiling "
                         "(vrouter: about 400/s here, docs/sdn.md), or its backlog outlives the point")
    a = ap.parse_args()
    data, rows = {}, []
    for kind in a.kinds:
        for on in (False, True):
            with deployed(load_testbed(testbed(kind, a.network, on))) as dep:
                got = measure(dep, a)
                lat = []
                if on:
                    server = sgmeasure.serve(dep, "b", KNOCK_PORTS)
                    try:
                        lat = sgmeasure.rule_to_first_packet(dep, "c", "b", "knock", KNOCK_PORTS)
                    finally:
                        server.kill()
                        server.wait()
            data[f"{kind} {'on' if on else 'off'}"] = {"results": got, "rule_latency_ms": lat}
            for g in got:
                rows.append([kind, "on" if on else "off", g["family"], g["placement"], g["point"],
                             f"{g['value']:.4g} {g['metric']}",
                             "" if g["loss_pct"] is None else f"{g['loss_pct']:.1f}", f"{g['cpu_pct']:.0f}"])
            if lat:
                s = stats([x for x in lat if x is not None])
                rows.append([kind, "on", "rule->packet", "cross-host", f"{len(lat)} rules",
                             f"p50 {s['median']:.1f} ms, max {s['max']:.1f} ms", "", ""])
    show(["kind", "security groups", "family", "placement", "point", "mean", "loss %", "data-plane CPU %"],
         rows, title="security groups off vs on (Neutron's default group on every port)")
    write_json("security_groups_" + "_".join(a.kinds), {"args": vars(a), "data": data})
    return 0


if __name__ == "__main__":
    sys.exit(main())
