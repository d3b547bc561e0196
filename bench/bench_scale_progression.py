"""The scale family's own cost and this machine's saturation point (issue 24): per kind, a
progression of TCP steps on the computed testbed (``single_room`` pairs over 2 hosts, one
CPU each), each step's wall time split into its parts, and the saturation verdict the
family names.

Parts of a step (timers around ``vnetbench.scale.run``'s own functions, nothing changed):

- **servers**: every pair's iperf3 server started and listening;
- **gates**: every client (and its ping) started behind its gate and ``ready``: the
  barrier's set-up, all process start-up;
- **load**: from the release to the last client's output (the step's ``seconds`` plus the
  clients' own start and end);
- **rest**: the CPU window, the summary, stopping the servers.

    .venv/bin/python bench/bench_scale_progression.py [--kinds linuxbridge,ovs]
        [--progression 1,2,4] [--density 4] [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, online_cpus, show, write_json  # noqa: E402

from vnetbench.scale import plan, run as scale_run  # noqa: E402


class Timers:
    """Seconds per part of the current step, around the scale run's functions."""

    def __init__(self):
        self.steps: list[dict] = []
        self.cur: dict = defaultdict(float)

    def wrap(self, name: str, part: str):
        fn = getattr(scale_run, name)

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.cur[part] += time.perf_counter() - t
        setattr(scale_run, name, timed)

    def wrap_step(self):
        fn = scale_run._step

        def step(*a, **kw):
            self.cur = defaultdict(float)
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.cur["wall"] = time.perf_counter() - t
                self.steps.append(dict(self.cur))
        scale_run._step = step


def measure(kind: str, density: int, progression: list[int], seconds: int) -> dict:
    acc = plan.accommodation(room="single_room", hosts=2, density=density)
    doc = plan.testbed(acc, kind, "vxlan", online_cpus(), name=f"scale-bench-{kind}")
    tb = load_testbed(yaml.safe_dump(doc), source=f"<scale bench {kind}>")
    timers = Timers()
    saved = {n: getattr(scale_run, n) for n in ("_server", "_gate", "_ready", "_finish", "_step")}
    try:
        timers.wrap("_server", "servers")
        timers.wrap("_gate", "gates")
        timers.wrap("_ready", "gates")
        timers.wrap("_finish", "load")
        timers.wrap_step()
        with deployed(tb) as dep:
            pairs = sorted(dep.testbed.pairs, key=lambda p: int(p.name[1:]))
            t0 = time.perf_counter()
            records = scale_run.run(dep, pairs, progression=progression, tests=("tcp",), seconds=seconds)
            wall = time.perf_counter() - t0
    finally:
        for n, fn in saved.items():
            setattr(scale_run, n, fn)
    steps = []
    for r, parts in zip(records, timers.steps):
        rep = r.extra["repetitions"][0]
        parts["rest"] = parts["wall"] - parts.get("servers", 0) - parts.get("gates", 0) - parts.get("load", 0)
        steps.append({"pairs": r.labels["pairs"], "aggregate_gbps": r.samples["aggregate_gbps"][0],
                      "failed": r.samples["pairs_failed"][0], "start_spread_ms": r.samples["start_spread_ms"][0],
                      "dataplane_pct": {h: v["dataplane_pct"] for h, v in rep["hosts"].items()},
                      "busy_pct": {h: v["busy_pct"] for h, v in rep["hosts"].items()},
                      "parts_s": {k: round(v, 3) for k, v in parts.items()}})
    return {"kind": kind, "pairs": len(tb.pairs), "seconds": seconds, "wall_s": wall, "steps": steps,
            "saturation": records[0].extra["saturation"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="linuxbridge,ovs")
    ap.add_argument("--progression", default="1,2,4")
    ap.add_argument("--density", type=int, default=4, help="pairs' ends per host (single_room over 2 hosts)")
    ap.add_argument("--seconds", type=int, default=3)
    a = ap.parse_args(argv)
    progression = [int(x) for x in a.progression.split(",")]
    out = [measure(k, a.density, progression, a.seconds) for k in a.kinds.split(",")]
    rows = []
    for m in out:
        for s in m["steps"]:
            p = s["parts_s"]
            rows.append([m["kind"], s["pairs"], f"{s['aggregate_gbps']:.2f}", s["failed"],
                         f"{s['start_spread_ms']:.1f}",
                         " ".join(f"{h}:{v:.0f}" for h, v in sorted(s["dataplane_pct"].items())),
                         " ".join(f"{h}:{v:.0f}" for h, v in sorted(s["busy_pct"].items()) if v is not None),
                         f"{p['wall']:.2f}", f"{p.get('servers', 0):.2f}", f"{p.get('gates', 0):.2f}",
                         f"{p.get('load', 0):.2f}", f"{p['rest']:.2f}"])
    show(["kind", "pairs", "aggregate Gbit/s", "failed", "spread ms", "data plane % CPU", "busy % CPU",
          "wall s", "servers s", "gates s", "load s", "rest s"], rows,
         title=f"TCP progression {progression}, {a.seconds} s a step, single_room over 2 hosts")
    for m in out:
        print(f"{m['kind']}: {len(m['steps'])}-step progression in {m['wall_s']:.1f} s")
        for h, v in sorted(m["saturation"].items()):
            print(f"  saturation {h}: {'after ' + str(v['step']) + ' pairs' if v['step'] else 'none'} - {v['why']}")
    write_json("scale_progression", {"results": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
