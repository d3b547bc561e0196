"""Interrupt stress, many trials: SIGINT to the process group, SIGTERM, two SIGTERMs
0.15 s apart, SIGKILL at random points of ``vnetbench testbed up`` of a testbed
(default examples/scale-4x32.yaml), and ``vnetbench cleanup`` racing it; after each
trial ``vnetbench cleanup`` and a look for anything left (namespaces, root links,
processes, state). Prints the failure count per mode; exit 1 if any trial failed.

    .venv/bin/python bench/bench_interrupts.py --trials 300 [--seed N] [--testbed FILE]

The same trial runs 60 times in tests/integration/test_interrupt_stress.py."""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import show, write_json  # noqa: E402
from interrupts import MODES, trial  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=time.time_ns() % 100000)
    ap.add_argument("--testbed", default=str(REPO / "examples" / "scale-4x32.yaml"))
    ap.add_argument("--max-delay", type=float, default=3.5, help="latest kill point, s after start")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    state = Path(tempfile.mkdtemp(prefix="vnb-interrupts-")) / "state"
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state), "PYTHONPATH": str(REPO / "src")}
    tried, failed, problems = Counter(), Counter(), []
    t0 = time.monotonic()
    for i in range(args.trials):
        mode = MODES[i % len(MODES)]
        found = trial(mode, rng.uniform(0.2, args.max_delay), Path(args.testbed), env)
        tried[mode] += 1
        failed[mode] += bool(found)
        problems += found
        if found:
            print("\n".join(found), file=sys.stderr)
    seconds = time.monotonic() - t0
    show(["mode", "trials", "failed"], [[m, tried[m], failed[m]] for m in MODES]
         + [["all", sum(tried.values()), sum(failed.values())]],
         title=f"interrupt stress: {args.testbed} (seed {args.seed}, {seconds:.0f} s, "
               f"load {os.getloadavg()[0]:.1f})")
    write_json("interrupts", {"seed": args.seed, "trials": dict(tried), "failed": dict(failed),
                              "seconds": seconds, "problems": problems[:50]})
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
