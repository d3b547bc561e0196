"""The all-in-one cloud's bring-up by compute node count (issue 25): `aio up --computes N`
wall time and where it goes, then `aio down`.

Each point is a fresh `python -m vnetbench.aio up` in a state dir of its own under
/var/tmp (QEMU, as libvirt's user, must reach it), with the image the tests use, then
`aio down`; the per-step seconds are `up`'s own (`timings.json`: each step's wall time,
steps that overlap counted where they end). One AIO per machine: nothing else may hold
the AIO's ports, subnet or the root namespace's `ovs-netdev` while it runs. Each node
takes one CPU of --pinned-cpus; a count above this machine's CPUs needs
`--pinned-cpus '' --shared-cpus ''` (unpinned guests) and is refused otherwise.

    .venv/bin/python bench/bench_aio_computes.py [--computes 1,2] [--repeat 1]
        [--image disk.qcow2] [-- more aio up arguments]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import show, stats, write_json  # noqa: E402

AIO = [sys.executable, "-m", "vnetbench.aio"]


def default_image() -> Path:
    """The guest disk the tests boot (built into the cache: seconds when cached)."""
    import os
    from vnetbench.image import build
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vnetbench" / "image"
    out = Path(tempfile.mkdtemp(prefix="vnb-bench-image-", dir="/var/tmp"))
    return build.build(out, cache, formats=("qcow2",), flowgen=build.default_flowgen()).qcow2


def one(n: int, image: Path, more: list[str]) -> dict:
    state = Path(tempfile.mkdtemp(prefix=f"vnbaio-bench{n}-", dir="/var/tmp"))
    t0 = time.monotonic()
    up = subprocess.run([*AIO, "up", "--state", str(state), "--image", str(image),
                         "--computes", str(n), *more], capture_output=True, text=True, timeout=1800)
    up_s = time.monotonic() - t0
    try:
        steps = json.loads((state / "timings.json").read_text())
    except (OSError, ValueError):
        steps = {}
    t1 = time.monotonic()
    down = subprocess.run([*AIO, "down", "--state", str(state)], capture_output=True, text=True, timeout=600)
    down_s = time.monotonic() - t1
    if up.returncode or down.returncode:
        raise SystemExit(f"--computes {n}: up exit {up.returncode}, down exit {down.returncode} "
                         f"(logs in {state}/logs): {(up.stderr or down.stderr).strip().splitlines()[-1:]}")
    subprocess.run(["rm", "-rf", str(state)], check=False)
    return {"computes": n, "up_s": round(up_s, 1), "down_s": round(down_s, 1), "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--computes", default="1,2", help="node counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--image", type=Path)
    ap.add_argument("more", nargs="*", help="after --: more `aio up` arguments")
    args = ap.parse_args()
    image = args.image or default_image()
    counts = [int(c) for c in args.computes.split(",")]
    points = [one(n, image, args.more) for _ in range(args.repeat) for n in counts]
    steps = sorted({s for p in points for s in p["steps"]}, key=lambda s: min(
        list(p["steps"]).index(s) for p in points if s in p["steps"]))
    rows = []
    for n in counts:
        mine = [p for p in points if p["computes"] == n]
        up, down = stats(p["up_s"] for p in mine), stats(p["down_s"] for p in mine)
        rows.append([str(n), up["median"], down["median"], len(mine),
                     *(stats(p["steps"].get(s, 0.0) for p in mine)["median"] for s in steps)])
    show(["computes", "up s", "down s", "runs", *steps], rows,
         title="aio up / down by compute nodes (median of runs; steps: up's timings.json, seconds)")
    write_json("aio_computes", {"points": points})


if __name__ == "__main__":
    main()
