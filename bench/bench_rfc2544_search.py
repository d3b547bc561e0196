"""RFC 2544 NDR + PDR: the two RFC 2544 binary searches the suite used to run against
one FD.io CSIT MLRsearch (``vnetbench.battery.mlr``), same trials, alternating A/B.

One same-host pair on a Linux-bridge VXLAN testbed (the cheapest data path, so the
search, not bring-up, dominates), 64-byte inner frames. Every round measures the
unpaced ceiling once, then runs both searches from it in alternating order:

* ``binary``: NDR by ``mlr.search`` (max_trials), then PDR primed with the NDR
  trials (max_trials more) -- what ``_throughput`` did before MLRsearch;
* ``mlrsearch``: ``mlr.ndr_pdr`` with the budget 2 * max_trials.

Both stop at ``--resolution`` % (binary: of the ceiling; MLRsearch: of the upper bound,
never wider). Reported per method: trials, wall seconds, NDR, PDR and their brackets.

    .venv/bin/python bench/bench_rfc2544_search.py [--rounds 4] [--trial-s 1] [--max-trials 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, stats, write_json  # noqa: E402

from vnetbench.battery import mlr, rfc2544  # noqa: E402
from vnetbench.battery import trial as udptrial  # noqa: E402

TESTBED = ("name: rfc2544-search\nvswitch: {kind: linuxbridge}\nnetwork: {type: vxlan}\n"
           "pairs: [{placement: same-host}]\n")
FRAME = 64


def binary(trial, lo, top, step, max_trials, pdr_loss_pct):
    def loss(fps):
        packets, lost = trial(fps)
        return 100.0 * lost / packets if packets else 100.0
    ndr = mlr.search(loss, lo, top, step, max_trials, 0.0)
    pdr = mlr.search(loss, lo, top, step, max_trials, pdr_loss_pct, known=dict(ndr.trials))
    return ndr, pdr, len(ndr.trials) + len(pdr.trials)


def width_pct(found):
    """Final bracket width, % of its upper bound (None: no bracket)."""
    if found.rate is None or found.upper is None:
        return None
    return 100.0 * (found.upper - found.rate) / found.upper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--trial-s", type=int, default=1)
    ap.add_argument("--max-trials", type=int, default=10)
    ap.add_argument("--resolution", type=float, default=2.0)
    a = ap.parse_args()
    runs = []
    with deployed(load_testbed(TESTBED)) as dep:
        src, dst = dep.testbed.pair("same").vms
        payload = rfc2544.payload_of(FRAME)

        def trial(fps):
            res = udptrial.udp_trial(dep, src, dst, payload, rfc2544.bitrate_bps(round(fps), FRAME),
                                    a.trial_s)
            return res["packets"], res["lost_packets"]
        for rnd in range(a.rounds):
            ceiling = udptrial.udp_trial(dep, src, dst, payload, 0, a.trial_s)["rx_fps"]
            top = max(2.0, ceiling)
            step = top * a.resolution / 100
            order = ("binary", "mlrsearch") if rnd % 2 == 0 else ("mlrsearch", "binary")
            for method in order:
                t0 = time.perf_counter()
                if method == "binary":
                    ndr, pdr, n = binary(trial, step, top, step, a.max_trials, 0.5)
                else:
                    ndr, pdr, trials = mlr.ndr_pdr(trial, step, top, a.trial_s, a.resolution,
                                                   2 * a.max_trials, 0.5)
                    n = len(trials)
                runs.append({"round": rnd, "method": method, "ceiling_fps": ceiling,
                             "trials": n, "wall_s": time.perf_counter() - t0,
                             "ndr_fps": ndr.rate, "ndr_upper_fps": ndr.upper,
                             "pdr_fps": pdr.rate, "pdr_upper_fps": pdr.upper,
                             "converged": ndr.converged and pdr.converged,
                             "ndr_width_pct": width_pct(ndr), "pdr_width_pct": width_pct(pdr)})
                r = runs[-1]
                print(f"round {rnd} {method:9s} trials {n:2d} wall {r['wall_s']:5.1f} s  "
                      f"NDR {ndr.rate} [{ndr.upper}]  PDR {pdr.rate} [{pdr.upper}]", flush=True)
    rows = []
    summary = {}
    for method in ("binary", "mlrsearch"):
        mine = [r for r in runs if r["method"] == method]
        t, w = stats(r["trials"] for r in mine), stats(r["wall_s"] for r in mine)
        summary[method] = {"trials": t, "wall_s": w}
        wn = stats(r["ndr_width_pct"] for r in mine if r["ndr_width_pct"] is not None)
        rows.append([method, t["median"], t["max"], w["median"], w["max"], wn["median"],
                     sum(r["converged"] for r in mine)])
    show(["method", "trials median", "trials max", "wall s median", "wall s max",
          "NDR bracket % median", "converged"],
         rows, title=f"NDR+PDR search, {FRAME} B, trial {a.trial_s} s, linuxbridge/vxlan same-host")
    write_json("bench_rfc2544_search", {"trial_s": a.trial_s, "max_trials": a.max_trials,
                                        "resolution_pct": a.resolution, "runs": runs,
                                        "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
