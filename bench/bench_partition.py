"""An open defect: how often the first echo after a management partition is lost on
ovs-openflow.

Each trial is test_faults.py's sequence on a fresh testbed: a cold ping of 3 echoes
(the controller sets the flows up), the cut (``Faults.partition``), 10 echoes at 200 ms
between the same cross-host pair. It counts the trials that lost an echo and which
one. ``--no-cut`` skips the cut (a punted packet then shows as a slow echo, not a lost
one: the slowest echo of every trial is reported); ``--settle`` sends 5 echoes at 50 ms
before the cut.

    .venv/bin/python bench/bench_partition.py [--trials 100] [--no-cut] [--settle]
        [--ports afxdp|afpacket]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, write_json  # noqa: E402

from vnetbench.faults import Faults  # noqa: E402
from vnetbench.testbed import capabilities  # noqa: E402
from vnetbench.traffic import ping  # noqa: E402

def echoes(dep, count: int, interval: float) -> dict[int, float]:
    """{sequence number: RTT ms} of the echoes cross-a sent to cross-b that were answered."""
    argv = ping.command(ping.PingParams(dest=dep.ip("cross-b"), count=count, interval_s=interval))
    return ping.replies(dep.exec("cross-a", argv, timeout=count * interval + 20).stdout)


def trial(tb, caps, cut: bool, settle: bool) -> dict:
    with deployed(tb, caps) as dep:
        cold = echoes(dep, 3, 0.1)
        if settle:
            echoes(dep, 5, 0.05)
        if cut:
            Faults(dep).partition()
        got = echoes(dep, 10, 0.2)
    return {"cold": len(cold), "lost": sorted(set(range(1, 11)) - set(got)),
            "slowest_ms": max(got.values()) if got else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--no-cut", dest="cut", action="store_false")
    ap.add_argument("--settle", action="store_true")
    ap.add_argument("--ports", default="afxdp", choices=["afxdp", "afpacket"])
    a = ap.parse_args(argv)
    tb = load_testbed(f"vswitch: {{kind: ovs-openflow, ports: {a.ports}, "
                      "openflow: {inactivity_probe_ms: 1000}}\nnetwork: {type: vxlan}\n")
    caps = capabilities.probe()
    trials = []
    for i in range(a.trials):
        t = trial(tb, caps, a.cut, a.settle)
        trials.append(t)
        if t["lost"] or t["cold"] < 3:
            print(f"trial {i}: cold ping {t['cold']}/3, lost {t['lost']}", flush=True)
    lost = [t for t in trials if t["lost"]]
    slow = [t for t in trials if t["slowest_ms"] and t["slowest_ms"] > 2.0]
    show(["trials", "cut", "settle", "ports", "an echo lost", "first echo lost", "slowest > 2 ms"],
         [[a.trials, str(a.cut), str(a.settle), a.ports, len(lost),
           sum(1 for t in lost if 1 in t["lost"]), len(slow)]],
         title="first echoes after a management partition (ovs-openflow, vxlan)")
    write_json("partition", {"args": vars(a), "trials": trials})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
