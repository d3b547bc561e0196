"""The guest image: build time and size, boot-to-ready under QEMU (TCG on this machine),
and the SSH command channel's round trip as the number of guests grows.

Every guest boots directly on one bridge in a namespace of the bench's own (the lab
of vnetbench.image.lab) and answers `true` over its master connection; the round trip
is one command on one guest, then the same with every guest asked at once.

    .venv/bin/python bench/bench_image.py [--vms 2 8] [--commands 50] [--memory 192]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import show, stats, timed, write_json  # noqa: E402

from vnetbench.image import build, lab as imglab  # noqa: E402


def build_image(out: Path) -> dict:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vnetbench" / "image"
    img, seconds = timed(build.build, out, cache, flowgen=build.default_flowgen())
    sizes = {p.name: round(p.stat().st_size / 2**20, 1)
             for p in (img.kernel, img.initrd, img.raw, img.qcow2)}
    return {"image": img, "build_s": round(seconds, 2), "sizes_mib": sizes}


def spread(xs) -> dict:
    xs = sorted(xs)
    return {**stats(xs), "p99": xs[max(0, math.ceil(0.99 * len(xs)) - 1)]}


def round_trips(guests, commands: int) -> list[float]:
    """Wall ms of `true` on every guest at once, COMMANDS times."""
    times = []
    with cf.ThreadPoolExecutor(len(guests)) as pool:
        for _ in range(commands):
            t0 = time.perf_counter()
            list(pool.map(lambda g: g.run(["true"]), guests))
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def scale(img, n: int, commands: int, memory: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        lab = imglab.Lab(Path(tmp), memory_mib=memory)
        try:
            consoles = [lab.direct(f"g{i}", f"02:00:00:00:fb:{i:02x}", f"{imglab.NET}.{20 + i}", img)
                        for i in range(n)]
            t0 = time.monotonic()
            for c in consoles:
                imglab.wait_ready(c, timeout_s=60 + 30 * n)
            ready_s = time.monotonic() - t0
            guests = [lab.ssh(f"{imglab.NET}.{20 + i}") for i in range(n)]
            _, open_s = timed(lambda: [g.open(timeout_s=120) for g in guests])
            one = round_trips(guests[:1], commands)
            every = round_trips(guests, commands)
            for g in guests:
                g.close()
        finally:
            lab.close()
    return {"vms": n, "boot_to_ready_s": round(ready_s, 1), "masters_open_s": round(open_s, 1),
            "one_guest_ms": spread(one), "all_guests_ms": spread(every)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vms", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--commands", type=int, default=50)
    ap.add_argument("--memory", type=int, default=192, help="MiB per guest")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        built = build_image(Path(tmp))
        show(["build s", *built["sizes_mib"]], [[built["build_s"], *built["sizes_mib"].values()]],
             "image build (MiB)")
        rows, results = [], []
        for n in args.vms:
            r = scale(built["image"], n, args.commands, args.memory)
            results.append(r)
            rows.append([n, r["boot_to_ready_s"], r["masters_open_s"],
                         r["one_guest_ms"]["median"], r["one_guest_ms"]["p99"],
                         r["all_guests_ms"]["median"], r["all_guests_ms"]["p99"]])
        show(["VMs", "boot→ready s", "SSH masters s", "1 guest median ms", "p99",
              "all guests median ms", "p99"], rows, "TCG guests, command channel round trip")
    path = write_json("image", {"build_s": built["build_s"], "sizes_mib": built["sizes_mib"],
                                "scale": results})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
