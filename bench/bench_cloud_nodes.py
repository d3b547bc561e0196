"""TCP and ICMP RTT across the AIO's two compute nodes and on one, and live-migration downtime.

Issue 25: a pair's TCP and RTT across the nodes beside the same-node pair; the downtime
of a live migration between the nodes (median of 5).

Needs a running AIO with two compute nodes and shared CPUs (unpinned guests), used as
admin (cloud vnetbench-aio of its clouds.yaml); nothing else may boot guests meanwhile:

    sudo tools/aio/aio up --computes 2 --pinned-cpus '' --shared-cpus 0-1
    .venv/bin/python bench/bench_cloud_nodes.py --clouds /run/vnetbench/aio/clouds.yaml \
        [--repeat 3] [--migrations 5] [--quick] [--prometheus URL]

One testbed (openstack backend, unpinned, the flat network vnetbench-flat, image
vnetbench-guest) of five VMs declared one by one, each testbed host's in an affinity group
of its own: same-a, same-b and cross-a on h1, cross-b and anchor on h2 (anchor only keeps a
server on h2, the node cross-b goes back to). No `pairs:`: the template would put a
cross-host pair in an anti-affinity group, and Nova would refuse to move cross-b next to
cross-a. The pairs same (same-a -> same-b) and cross (cross-a -> cross-b) are measured
through the battery. h1 and h2 must be two compute nodes (the run's placement facts), else
the script stops saying so; the testbed is torn down in every case.

* RTT: ``battery.rtt`` flood mode (the battery's 100 echoes 10 ms apart, 30 with --quick),
  --repeat repetitions: mean ±sd over all echoes of all repetitions (results/spread.py),
  p99 (the mean of the repetitions' p99), loss %.
* TCP: ``battery.tcp``, one iperf3 stream at MSS --mss (1398) for --seconds (5, 2 with
  --quick), --repeat repetitions: Gbit/s mean with the spread results/spread.py gives that
  n (95% CI from 3, min-max with 2, none with 1), retransmits.
  ``!`` after a value: results/spread.py calls it unstable (do not quote it).
* Migration: --migrations live moves of cross-b, h2 -> h1, back, and so on, each through
  the fault API (``Faults.migrate(live=True, peer="cross-a")``: Nova's live block migration,
  admin; it deletes cross-b's affinity group first). downtime_ms = the longest run of
  consecutive lost 5 ms UDP probes from cross-a into cross-b, x 5 ms; lost/sent: probes
  of the whole 63 s stream; move_s = from Nova's live_migrate call until Nova reported the
  server ACTIVE on the target node with no task (polled every 1 s). Reported: median, min
  and max (no sd from 5 samples), move_s median, and every sample. A move that fails is
  listed with its error (the next starts from where cross-b is) and the exit status is 1.
Writes bench/results/cloud_nodes.json (every sample, the battery records, the placement).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_testbed, show, stats, write_json  # noqa: E402

CLOUD, NETWORK, IMAGE = "vnetbench-aio", "vnetbench-flat", "vnetbench-guest"
TESTBED = """name: cloud-nodes
vswitch: ovs
network: {type: flat}
vms:
  - {name: same-a, host: h1}
  - {name: same-b, host: h1}
  - {name: cross-a, host: h1}
  - {name: cross-b, host: h2}
  - {name: anchor, host: h2}
"""
PAIRS = (("same", "same-host", "same-a", "same-b"), ("cross", "cross-host", "cross-a", "cross-b"))


def nodes(dep) -> dict:
    """{testbed host: its compute node}; exits (the caller tears down) unless h1 and h2 are
    two nodes, as admin sees them."""
    meta = dep.run.meta()
    if not meta.get("admin"):
        raise SystemExit(f"cloud {meta.get('cloud')}: not used as admin; Nova moves servers for admins only")
    where = (meta.get("placement") or {}).get("testbed_hosts") or {}
    one = {h: n[0] for h, n in where.items() if len(n) == 1}
    if sorted(one) != ["h1", "h2"] or one["h1"] == one["h2"]:
        raise SystemExit(f"h1 and h2 are not two compute nodes (placement: {where}); "
                         "is the AIO up with --computes 2 and room for 5 unpinned guests?")
    return one


def measure(dep, a) -> dict:
    from vnetbench.battery import rtt, tcp
    from vnetbench.testbed.model import Pair
    out = {}
    for name, placement, x, y in PAIRS:
        pair = Pair(name=name, placement=placement, vnet=dep.testbed.vm(x).nics[0].vnet, vms=(x, y))
        r = rtt.run(dep, pair, mode="flood", repetitions=a.repeat, **({"count": 30} if a.quick else {}))
        (t,) = tcp.run(dep, pair, nominal_mss=[a.mss], seconds=a.seconds, repetitions=a.repeat,
                       verify_on_wire=False)
        out[placement] = {"rtt": r, "tcp": t}
        print(f"{name}: RTT and TCP done", flush=True)
    return out


def migrate(dep, a) -> list[dict]:
    from vnetbench.errors import VnetbenchError
    from vnetbench.faults import Faults
    samples = []
    for i in range(a.migrations):
        origin = dep.testbed.vm("cross-b").host
        to = "h1" if origin == "h2" else "h2"
        try:
            got = Faults(dep).migrate("cross-b", to, live=True, peer="cross-a")
        except VnetbenchError as exc:       # recorded; the next move starts from where it is
            got = {"error": str(exc)}
        samples.append({"n": i + 1, "from": origin, "to": to, **got})
        print(f"migration {i + 1}: {origin} -> {to}: "
              + (got["error"] if "error" in got else f"downtime {got['downtime_ms']:.0f} ms, "
                 f"move {got['move_s']:.1f} s"), flush=True)
    return samples


def cell(record, metric, unit="") -> str:
    from vnetbench.results import spread
    sp = spread.of(record, metric)
    return sp.text(unit) + ("!" if sp.unstable else "")


def report(got, samples, a) -> dict:
    from vnetbench.results.spread import num
    mean = lambda fam, m: lambda p: num(p[fam].metrics[m]["mean"])     # noqa: E731
    rows = [("RTT flood, ms (mean ±sd of echoes)", lambda p: cell(p["rtt"], "rtt_mean_ms")),
            ("RTT p99, ms (mean of repetitions)", mean("rtt", "rtt_p99_ms")),
            ("RTT loss %", mean("rtt", "loss_pct")),
            (f"TCP MSS {a.mss}, Gbit/s", lambda p: cell(p["tcp"], "gbps")),
            ("TCP retransmits (mean)", mean("tcp", "retransmits"))]
    show(["", "same-host", "cross-host"], [
        [label, f(got["same-host"]), f(got["cross-host"])] for label, f in rows
    ], title=f"pairs on one compute node and across the two ({a.repeat} repetitions; "
             "! = unstable, results/spread.py)")
    ok = [s for s in samples if "error" not in s]
    show(["#", "from", "to", "nodes", "downtime ms", "lost/sent", "loss %", "move s"],
         [[str(s["n"]), s["from"], s["to"], "-" if "error" in s else f"{s['from_node']} -> {s['to_node']}",
           *(["error: " + s["error"][:80], "", "", ""] if "error" in s else
             [f"{s['downtime_ms']:.0f}", f"{s['lost']}/{s['sent']}", f"{s['loss_pct']:.2f}",
              f"{s['move_s']:.1f}"])] for s in samples],
         title="live migrations of cross-b under 5 ms probes from cross-a")
    down, move = stats(s["downtime_ms"] for s in ok), stats(s["move_s"] for s in ok)
    show(["of", "n", "downtime median ms", "min", "max", "move_s median"],
         [[f"{len(samples)} migrations", len(ok), *(num(down[k]) for k in ("median", "min", "max")),
           num(move["median"])]])
    return {"downtime_ms": down, "move_s": move}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clouds", type=Path, required=True, help="the AIO's clouds.yaml")
    ap.add_argument("--cloud", default=CLOUD)
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of RTT and TCP")
    ap.add_argument("--migrations", type=int, default=5)
    ap.add_argument("--mss", type=int, default=1398)
    ap.add_argument("--seconds", type=float, help="TCP seconds (default 5, --quick 2)")
    ap.add_argument("--quick", action="store_true", help="30 echoes a repetition, 2 s of TCP")
    ap.add_argument("--prometheus", default="", help="URL: the compute nodes' CPU beside each figure")
    a = ap.parse_args()
    a.seconds = a.seconds or (2.0 if a.quick else 5.0)
    os.environ["OS_CLIENT_CONFIG_FILE"] = str(a.clouds.resolve())
    os.environ.setdefault("VNETBENCH_STATE_DIR", tempfile.mkdtemp(prefix="vnb-bench-cloud-"))
    print(f"run state in {os.environ['VNETBENCH_STATE_DIR']}", flush=True)
    from vnetbench.testbed import deployment
    tb = load_testbed(TESTBED, source="<bench cloud nodes>")
    t0 = time.monotonic()
    dep = deployment.build("openstack", tb, cloud_name=a.cloud, network=NETWORK, image=IMAGE,
                           pinned=False, prometheus=a.prometheus, clouds_yaml=str(a.clouds.resolve()))
    up_s = time.monotonic() - t0
    try:
        where = nodes(dep)
        print(f"testbed {dep.run_id} up in {up_s:.0f} s: h1 = {where['h1']}, h2 = {where['h2']}", flush=True)
        got = measure(dep, a)
        samples = migrate(dep, a)
    finally:
        errors = dep.down()
        if errors:
            print(f"warning: teardown of run {dep.run_id} failed: {errors}", file=sys.stderr)
    summary = report(got, samples, a)
    write_json("cloud_nodes", {"args": {**vars(a), "clouds": str(a.clouds)}, "nodes": where,
                               "up_s": up_s, "teardown_errors": errors, **summary, "migrations": samples,
                               "records": {p: {f: r.to_dict() for f, r in v.items()} for p, v in got.items()}})
    return 1 if errors or any("error" in s for s in samples) else 0


if __name__ == "__main__":
    sys.exit(main())
