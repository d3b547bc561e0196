"""Does a host's vSwitch capacity scale with its CPUs? (issue 28: the planner scales each
role's capacity by ``dataplane_cpus`` linearly). One emulated host with 1 CPU, then with 2,
four same-host pairs, TCP as fast as they go, 1, 2 and 4 pairs at once (the scale
family's step, no latency probe beside): the highest aggregate and the data plane's CPU.

On this machine the guests share the host's CPUs, so their CPUs double too: the ratio is
the host's, an upper bound for the vSwitch alone.

    .venv/bin/python bench/bench_capacity_cpus.py [--kinds ovs,linuxbridge] [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, online_cpus, show, write_json  # noqa: E402

from vnetbench.scale import run as scale_run  # noqa: E402


def measure(kind: str, cpus: list[int], seconds: int) -> list[dict]:
    doc = {"name": f"cpus{len(cpus)}-{kind}", "vswitch": kind, "network": {"type": "vxlan"},
           "hosts": [{"name": "h1", "cpus": cpus}], "vnets": [{"name": "s1"}],
           "pairs": [{"name": f"p{i + 1}", "placement": "same-host", "hosts": ["h1"], "vnet": "s1"}
                     for i in range(4)]}
    with deployed(load_testbed(yaml.safe_dump(doc))) as dep:
        pairs = sorted(dep.testbed.pairs, key=lambda p: p.name)
        records = scale_run.run(dep, pairs, progression=[1, 2, 4], tests=("tcp",), seconds=seconds,
                                latency=False)
    out = []
    for r in records:
        h = r.extra["repetitions"][0]["hosts"]["h1"]
        out.append({"pairs": r.labels["pairs"], "gbps": r.samples["aggregate_gbps"][0],
                    "dataplane_pct": h["dataplane_pct"], "busy_pct": h["busy_pct"]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="ovs,linuxbridge")
    ap.add_argument("--seconds", type=int, default=3)
    a = ap.parse_args(argv)
    cpus = online_cpus()
    if len(cpus) < 2:
        print("needs 2 online CPUs", file=sys.stderr)
        return 2
    rows, out = [], []
    for kind in a.kinds.split(","):
        best = {}
        for n in (1, 2):
            steps = measure(kind, cpus[:n], a.seconds)
            best[n] = max(s["gbps"] for s in steps)
            out.append({"kind": kind, "cpus": n, "steps": steps})
            for s in steps:
                rows.append([kind, n, s["pairs"], f"{s['gbps']:.3f}", f"{s['dataplane_pct']:.0f}",
                             f"{s['busy_pct']:.0f}"])
        print(f"{kind}: highest aggregate {best[1]:.2f} Gbit/s with 1 CPU, {best[2]:.2f} with 2: "
              f"x{best[2] / best[1]:.2f}")
    show(["kind", "CPUs", "pairs", "aggregate Gbit/s", "data plane % CPU", "busy % CPU"], rows,
         title=f"one host, same-host pairs, {a.seconds} s a step")
    write_json("capacity_cpus", {"results": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
