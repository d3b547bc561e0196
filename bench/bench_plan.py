"""The planner's own cost (issue 28): ``vnetbench plan``'s two placements and the per-host
prediction, wall time and peak memory, from a small workload up to the largest the
schemas admit (4,096 VMs, 8,192 flows, 1,024 hosts). Targets: the largest in <= 15 s and
<= 512 MiB resident; no root needed, no testbed built.

Workloads are random but seeded (the same every run): VMs of 1, 2 or 4 vCPUs and 1-4 GiB,
flows between random distinct pairs at 1, 10 or 50 Mbit/s; hosts of 32 cores, 128 GiB,
ovs/vxlan with the profile of tests/unit/test_capacity_plan.py (a measured shape).

Then heterogeneous data centres at the schemas' maximum (issue 51: hosts that all differ
defeated the planner's grouping of alike empty hosts): 1,024 hosts each with its own
memory size; the same with data-plane CPUs 1..1,024 too; eight vSwitch kinds (each with
its cell) and three data-plane sizes; 1,024 VMs that each fill a host; 1, 5 and 50 pairs
on the 1,024 different hosts. Target: each <= 10 s.

    .venv/bin/python bench/bench_plan.py [--repeat 3] [--skip-homogeneous]
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
TARGET_MIXED_S = 10.0


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


def mixed_cases():
    """(name, workload, hosts, profile) of heterogeneous data centres at the maximum size."""
    import copy

    from vnetbench.capacity.files import Hosts, HostSpec

    def differ(dp=lambda i: 1, kind=lambda i: "ovs"):
        return Hosts("vxlan", tuple(HostSpec(f"h{i + 1}", 32, 65536 + 1024 * i, kind(i), dp(i))
                                    for i in range(1024)))
    kinds = [f"k{j}" for j in range(8)]
    many = copy.deepcopy(PROFILE)
    many["cells"] = [dict(copy.deepcopy(PROFILE["cells"][0]), vswitch=k) for k in kinds]

    def pairs(n):
        return workload([(f"v{i}", 2, 2048) for i in range(2 * n)],
                        [(f"v{2 * i}", f"v{2 * i + 1}", 0.05, 0) for i in range(n)])
    fill = workload([(f"v{i}", 32, 65536) for i in range(1024)],
                    [(f"v{i}", f"v{(i + 1) % 1024}", 0.05, 0) for i in range(1024)])
    big = make(4096, 8192)
    return [("4096 VMs, 1024 hosts of 1024 memory sizes", big, differ(), PROFILE),
            ("the same, data-plane CPUs 1..1024", big, differ(dp=lambda i: 1 + i), PROFILE),
            ("the same, 8 kinds x 3 data-plane sizes", big, differ(lambda i: 1 + i % 3, lambda i: kinds[i % 8]), many),
            ("1024 VMs each filling a host", fill, differ(), PROFILE),
            ("1 pair, 1024 different hosts", pairs(1), differ(), PROFILE),
            ("5 pairs, 1024 different hosts", pairs(5), differ(), PROFILE),
            ("50 pairs, 1024 different hosts", pairs(50), differ(), PROFILE)]


def mixed(repeat: int) -> tuple[list, bool]:
    rows, out, ok = [], [], True
    for name, w, hs, prof in mixed_cases():
        times, result = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = planner.plan(w, hs, prof)
            times.append(time.perf_counter() - t0)
        p, s = result["placements"], stats(times)
        ok = ok and s["max"] <= TARGET_MIXED_S
        rows.append([name, len(w.vms), len(w.flows), f"{s['median']:.2f}", f"{s['min']:.2f}..{s['max']:.2f}",
                     p["agnostic"].get("hosts_used", "infeasible"), p["aware"].get("hosts_used", "infeasible")])
        out.append({"case": name, "vms": len(w.vms), "flows": len(w.flows), "seconds": times,
                    "agnostic_hosts": p["agnostic"].get("hosts_used"), "aware_hosts": p["aware"].get("hosts_used")})
    show(["heterogeneous case", "VMs", "flows", "median s", "min..max s", "agnostic hosts", "aware hosts"], rows,
         title=f"vnetbench plan on heterogeneous data centres (1,024 hosts), {repeat} runs a case")
    print(f"heterogeneous: slowest {max(max(o['seconds']) for o in out):.1f} s (target <= {TARGET_MIXED_S:g}): "
          f"{'met' if ok else 'MISSED'}")
    return out, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-homogeneous", action="store_true", help="only the heterogeneous cases")
    a = ap.parse_args(argv)
    rows, out = [], []
    for n_vm, n_flow, n_host in ([] if a.skip_homogeneous else SIZES):
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
    ok = True
    if out:
        show(["VMs", "flows", "hosts", "median s", "min..max s", "peak RSS MiB", "agnostic hosts",
              "overloaded", "aware hosts", "overloaded"], rows,
             title=f"vnetbench plan, both placements and the prediction, {a.repeat} runs a size")
        big = out[-1]
        ok = max(big["seconds"]) <= TARGET_S and big["peak_rss_mib"] <= TARGET_MIB
        print(f"largest: {max(big['seconds']):.1f} s (target <= {TARGET_S:g}), peak RSS {big['peak_rss_mib']:.0f} "
              f"MiB (target <= {TARGET_MIB}): {'met' if ok else 'MISSED'}")
    mixed_out, mixed_ok = mixed(a.repeat)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS over all cases: {rss_mib:.0f} MiB")
    write_json("plan", {"results": out, "heterogeneous": mixed_out, "peak_rss_mib": rss_mib,
                        "targets": {"seconds": TARGET_S, "rss_mib": TARGET_MIB, "heterogeneous_seconds": TARGET_MIXED_S},
                        "met": ok and mixed_ok})
    return 0 if ok and mixed_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
