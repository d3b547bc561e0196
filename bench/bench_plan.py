"""The planner's own cost (issue 28): ``vnetbench plan``'s two placements and the per-host
prediction, wall time and peak memory, from a small workload up to the largest the
schemas admit (4,096 VMs, 8,192 flows, 1,024 hosts). Targets: the largest in <= 15 s and
<= 512 MiB resident; no root needed, no testbed built.

Workloads are random but seeded (the same every run): VMs of 1, 2 or 4 vCPUs and 1-4 GiB,
flows between random distinct pairs at 1, 10 or 50 Mbit/s; hosts of 32 cores, 128 GiB,
ovs/vxlan with the profile of tests/unit/test_capacity_plan.py (a measured shape).

    .venv/bin/python bench/bench_plan.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from _common import show, stats, write_json  # noqa: E402
from test_capacity_plan import PROFILE, hosts, workload  # noqa: E402

from vnetbench.capacity import planner  # noqa: E402

SIZES = [(64, 128, 16), (512, 1024, 128), (2048, 4096, 512), (4096, 8192, 1024)]
TARGET_S, TARGET_MIB = 15.0, 512


def make(n_vm: int, n_flow: int, seed: int = 1):
    rnd = random.Random(seed)
    vms = [(f"v{i}", rnd.choice([1, 2, 4]), rnd.choice([1024, 2048, 4096])) for i in range(n_vm)]
    flows, seen = [], set()
    while len(flows) < n_flow:
        a, b = rnd.randrange(n_vm), rnd.randrange(n_vm)
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            flows.append((f"v{a}", f"v{b}", rnd.choice([0.001, 0.01, 0.05]), 0))
    return workload(vms, flows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rows, out = [], []
    for n_vm, n_flow, n_host in SIZES:
        w, hs = make(n_vm, n_flow), hosts(n_host, cores=32, memory_mb=131072)
        times, result = [], None
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            result = planner.plan(w, hs, PROFILE)
            times.append(time.perf_counter() - t0)
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        p = result["placements"]
        s = stats(times)
        rows.append([n_vm, n_flow, n_host, f"{s['median']:.2f}", f"{s['min']:.2f}..{s['max']:.2f}",
                     f"{rss_mib:.0f}", p["agnostic"].get("hosts_used"), len(p["agnostic"].get("overloaded", [])),
                     p["aware"].get("hosts_used", "infeasible"), len(p["aware"].get("overloaded", []))])
        out.append({"vms": n_vm, "flows": n_flow, "hosts": n_host, "seconds": times, "peak_rss_mib": rss_mib,
                    "agnostic": {k: p["agnostic"].get(k) for k in ("hosts_used", "overloaded", "infeasible")},
                    "aware": {k: p["aware"].get(k) for k in ("hosts_used", "overloaded", "infeasible")}})
    show(["VMs", "flows", "hosts", "median s", "min..max s", "peak RSS MiB", "agnostic hosts",
          "overloaded", "aware hosts", "overloaded"], rows,
         title=f"vnetbench plan, both placements and the prediction, {a.repeat} runs a size")
    big = out[-1]
    ok = max(big["seconds"]) <= TARGET_S and big["peak_rss_mib"] <= TARGET_MIB
    print(f"largest: {max(big['seconds']):.1f} s (target <= {TARGET_S:g}), peak RSS {big['peak_rss_mib']:.0f} MiB "
          f"(target <= {TARGET_MIB}): {'met' if ok else 'MISSED'}")
    write_json("plan", {"results": out, "targets": {"seconds": TARGET_S, "rss_mib": TARGET_MIB}, "met": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
