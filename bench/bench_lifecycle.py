"""Bring-up and teardown wall time of a two-host testbed with one cross-host VM pair
(VXLAN; Geneve for ovn).

'up' is builder.up(testbed) with caps=None, i.e. including the capability probe
as the CLI does; the probe's share is timed separately. After every teardown
the run's namespaces and run directory must be gone.

    .venv/bin/python bench/bench_lifecycle.py [--repeat 10] [--vswitch ovs linuxbridge ovn ovs-openflow vrouter]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (alive, daemon_pids, load_testbed, probe_timer, run_namespaces,  # noqa: E402
                     show, stats, timed, write_json)

from vnetbench.testbed.netns import builder  # noqa: E402

# kind -> (up, down) targets in s (None: no target, a reference)
TARGETS = {"ovs": (2.0, 1.0), "ovn": (5.0, None), "ovs-openflow": (3.0, 1.0), "vrouter": (3.0, 1.0)}
NETWORK = {"ovn": "geneve", "vrouter": "gre"}          # default: vxlan
TESTBED = "name: lifecycle-{kind}\nvswitch: {kind}\nnetwork: {{type: {net}}}\n" \
          "pairs: [{{placement: cross-host}}]\n"


def cold_probe_s() -> float:
    """One probe with an empty kernel-facts cache (VNETBENCH_CACHE_DIR, if src honours it):
    what the first 'testbed up' after boot pays."""
    from vnetbench.testbed import capabilities
    old = os.environ.get("VNETBENCH_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="vnb-bench-cache-") as d:
        os.environ["VNETBENCH_CACHE_DIR"] = d
        try:
            return timed(capabilities.probe)[1]
        finally:
            if old is None:
                del os.environ["VNETBENCH_CACHE_DIR"]
            else:
                os.environ["VNETBENCH_CACHE_DIR"] = old


def one_cycle(testbed) -> dict:
    with probe_timer() as probes:
        dep, up_s = timed(builder.up, testbed)       # caps=None: probes, as the CLI does
    probe_s = sum(probes)
    rid, rundir, pids = dep.run_id, dep.run.dir, daemon_pids(dep)
    errors, down_s = timed(dep.down)
    left = run_namespaces(rid)
    daemons_left = [f"{h}/{prog}={pid}" for (h, prog), pid in pids.items() if alive(pid)]
    return {"run_id": rid, "up_s": up_s, "probe_s": probe_s, "build_s": up_s - probe_s,
            "down_s": down_s, "teardown_errors": errors, "namespaces_left": left,
            "daemons": len(pids), "daemons_left": daemons_left, "rundir_left": rundir.exists(),
            "clean": not (errors or left or daemons_left or rundir.exists())}


def bench(kind: str, repeat: int) -> dict:
    net = NETWORK.get(kind, "vxlan")
    testbed = load_testbed(TESTBED.format(kind=kind, net=net), source=f"<bench {kind}-{net}>")
    cycles = []
    for i in range(repeat):
        c = one_cycle(testbed)
        cycles.append(c)
        print(f"  {kind:<11} #{i + 1:>2}: up {c['up_s']:.3f} s (probe {c['probe_s']:.3f} s) "
              f"down {c['down_s']:.3f} s {'clean' if c['clean'] else 'LEFTOVERS'}", flush=True)
    summary = {k: stats(c[k] for c in cycles) for k in ("up_s", "probe_s", "build_s", "down_s")}
    up, down = TARGETS.get(kind, (None, None))
    return {"vswitch": kind, "network": net, "hosts": len(testbed.hosts), "vms": len(testbed.vms),
            "target_up_s": up, "target_down_s": down,
            "summary": summary, "all_clean": all(c["clean"] for c in cycles), "cycles": cycles}


def verdict(s, target):
    if target is None:
        return "(reference)"
    ok = lambda v: "PASS" if v <= target else "FAIL"
    return f"<= {target:g} s: median {ok(s['median'])}, max {ok(s['max'])}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--vswitch", nargs="+", default=["ovs", "linuxbridge"],
                    choices=["ovs", "linuxbridge", "ovn", "ovs-openflow", "vrouter"])
    args = ap.parse_args(argv)
    cold = [cold_probe_s() for _ in range(3)]
    print(f"capability probe with an empty cache: {', '.join(f'{x:.3f}' for x in cold)} s")
    results = []
    for kind in args.vswitch:
        print(f"{kind} + {NETWORK.get(kind, 'vxlan')}, 2 hosts, 1 cross-host pair, {args.repeat} cycles")
        results.append(bench(kind, args.repeat))
    print()
    rows = []
    for r in results:
        s = r["summary"]
        for phase, key, target in (("up (incl. probe)", "up_s", r["target_up_s"]),
                                   ("  probe", "probe_s", None), ("  build", "build_s", None),
                                   ("down", "down_s", r["target_down_s"])):
            rows.append([f"{r['vswitch']}-{r['network']}", phase, s[key]["min"], s[key]["median"],
                         s[key]["max"], verdict(s[key], target) if key in ("up_s", "down_s") else ""])
    show(["testbed", "phase", "min s", "median s", "max s", "target"], rows,
         title=f"Lifecycle wall time over {args.repeat} cycles (probe with an empty cache: "
               f"median {stats(cold)['median']:.3f} s of 3)")
    show(["testbed", "cycles", "clean teardowns", "namespaces left", "daemons left"],
         [[f"{r['vswitch']}-{r['network']}", len(r["cycles"]), sum(c["clean"] for c in r["cycles"]),
           sum(len(c["namespaces_left"]) for c in r["cycles"]),
           sum(len(c["daemons_left"]) for c in r["cycles"])] for r in results])
    write_json("bench_lifecycle", {"repeat": args.repeat, "cold_probe_s": cold, "results": results})
    return 0 if all(r["all_clean"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
