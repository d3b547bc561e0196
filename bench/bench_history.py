"""The results history at scale (issue 49): ``vnetbench history add`` of 1,000 runs of
200 records each (200,000 records, 1.2 million per-metric rows), then ``history
regressions`` over every cell's series (1,200 series of 1,000 runs), then the CI gate's
day: one more run added and ``regressions`` again, in Otava's incremental mode from the
weak change points the first stored (and ``--full`` over the same history, whose verdicts
it must equal). Each command in a fresh process: wall time, CPU seconds (with its
workers'), peak resident memory, exit status, the store's size. No root, no testbed.

The runs are synthetic and the same every time (seeded): 200 cells (tcp_stream over 50
points x 2 placements x 2 vswitches), 6 metrics a record, 3 repetitions each with 5 %
noise, the provenance of a real record; one cell's gbps drops 15 % from run 700 on, which
``regressions`` must find (exit 1) -- and nothing else.

    .venv/bin/python bench/bench_history.py                       # ~2 min idle, 5 shared (SQLite)
    .venv/bin/python bench/bench_history.py --runs 100            # a quick look
    .venv/bin/python bench/bench_history.py --db postgresql://USER@/DB?host=/SOCKET/DIR
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, show, write_json  # noqa: E402

CHILD = """
import json, resource, sys, time
from vnetbench import cli
t0 = time.perf_counter()
rc = cli.main(sys.argv[2:])
sys.stderr.flush()
with open(sys.argv[1], "w") as f:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    json.dump({"rc": rc, "seconds": time.perf_counter() - t0, "rss_mib": me.ru_maxrss / 1024,
               "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime}, f)
"""
PROVENANCE = {"vnetbench": "0.1.0", "backend": "netns", "kernel": "6.1.0-28-amd64", "machine": "x86_64",
              "cpu_model": "Intel(R) Xeon(R) Gold 6230", "vswitch": "ovs", "ovs_datapath": "system",
              "ovs_ports": None, "network": "vxlan", "underlay_mtu": 1500, "tenant_mtu": 1450,
              "security_groups": "off", "tools": {"ovs-vswitchd": "ovs-vswitchd (Open vSwitch) 3.1.0",
                                                   "iperf3": "iperf 3.12 (cJSON 1.7.15)"},
              "pinning": {"hosts": {"h1": [0], "h2": [1]}, "vms": {"a": [0], "b": [1]}}}
METRICS = {"gbps": 9.0, "cpu_pct": 40.0, "softirq_pct": 12.0, "vswitch_proc_pct": 8.0, "retransmits": 50.0,
           "mss_on_wire": 1398.0}
DROP_RUN, DROP_CELL = 700, (0, "same-host", "ovs")


def cells(n: int):
    points = [str(64 + 32 * i) for i in range(n // 4)]
    return [(p, placement, vswitch) for p in points for placement in ("same-host", "cross-host")
            for vswitch in ("ovs", "ovn")][:n]


def generate(root: Path, runs: int, records: int) -> list[Path]:
    rng = random.Random(49)
    dirs, grid = [], cells(records)
    for i in range(runs):
        d = root / f"run{i:04d}"
        d.mkdir()
        started = 1.75e9 + 86400 * i
        lines = []
        for point, placement, vswitch in grid:
            drop = 0.85 if (i >= DROP_RUN - 1 and (point, placement, vswitch) == (grid[0][0],) + DROP_CELL[1:]) else 1
            samples = {m: [round(v * (drop if m == "gbps" else 1) * (1 + rng.gauss(0, 0.05)), 6) for _ in range(3)]
                       for m, v in METRICS.items()}
            lines.append(json.dumps({
                "schema": 1, "test": "tcp_stream", "started": started, "finished": started + 30,
                "labels": {"vswitch": vswitch, "network": "vxlan", "placement": placement, "point": point,
                           "run_id": f"r{i}", "test": "tcp_stream", "testbed": f"{vswitch}-vxlan"},
                "samples": samples, "provenance": {**PROVENANCE, "vswitch": vswitch, "run_id": f"r{i}",
                                                   "collected": started}, "extra": {}}, sort_keys=True))
        (d / "records.jsonl").write_text("\n".join(lines) + "\n")
        dirs.append(d)
    return dirs


def step(tmp: Path, argv: list[str], src: Path = REPO / "src") -> dict:
    out = tmp / "child.json"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(out), *argv], capture_output=True, text=True,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp)})
    res = json.loads(out.read_text()) if out.exists() else {"rc": done.returncode, "seconds": None, "rss_mib": None}
    res["process_seconds"] = time.perf_counter() - t0
    res["stdout"] = done.stdout if "--format" in argv else None
    res["stdout_tail"] = done.stdout.strip().splitlines()[-3:]
    res["stderr"] = done.stderr.strip()[-500:]
    return res


def _verdicts(res: dict) -> list:
    """A regressions' JSON -> each series' verdict and change points (what must not depend
    on how Otava was run)."""
    doc = json.loads(res["stdout"]) if res.get("stdout") else {"results": []}
    return [(r["cell"], r["metric"], r["verdict"], [(c["index"], c["run"], round(c["change_pct"], 9))
                                                    for c in r["changes"]]) for r in doc["results"]]


def _summary(res: dict) -> dict:
    return {k: v for k, v in res.items() if k != "stdout"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--db", help="a PostgreSQL URL (default: an SQLite file in the temporary directory)")
    ap.add_argument("--src", type=Path, default=REPO / "src",
                    help="the vnetbench source tree measured (default: this checkout's); e.g. an older "
                         "commit's (git archive REV src | tar -x -C DIR) for a before/after on the same load")
    args = ap.parse_args()
    src = args.src.resolve()
    with tempfile.TemporaryDirectory(prefix="vnb-bench-history-") as name:
        tmp = Path(name)
        t0 = time.perf_counter()
        dirs = generate(tmp, args.runs + 1, args.records)
        dirs, next_run = dirs[:-1], dirs[-1]
        gen = time.perf_counter() - t0
        db = args.db or str(tmp / "history.sqlite")
        added = step(tmp, ["history", "add", *map(str, dirs), "--db", db], src)
        again = step(tmp, ["history", "add", str(dirs[-1]), "--db", db], src)
        junit = tmp / "regressions.xml"
        reg = step(tmp, ["history", "regressions", "--db", db, "--junit", str(junit), "--format", "json"], src)
        doc = json.loads(reg.pop("stdout")) if reg.get("stdout") else {"results": [], "verdicts": {}}
        reg.pop("stdout_tail")
        recent = step(tmp, ["history", "regressions", "--db", db, "--last", "100"], src)
        one_more = step(tmp, ["history", "add", str(next_run), "--db", db], src)
        incremental = step(tmp, ["history", "regressions", "--db", db, "--format", "json"], src)
        full = step(tmp, ["history", "regressions", "--db", db, "--format", "json", "--full"], src)
        same = _verdicts(incremental) == _verdicts(full) and bool(_verdicts(full))
        modes = {}
        for r in (json.loads(incremental["stdout"]) if incremental.get("stdout") else {"results": []})["results"]:
            modes[r["analysis"]] = modes.get(r["analysis"], 0) + 1
        size = Path(db).stat().st_size / 1024 / 1024 if not args.db else None
        rows = [[name, r["rc"], f"{r['seconds']:.1f}", f"{r.get('cpu_s', 0):.1f}", f"{r['rss_mib']:.0f}"]
                for name, r in (("add (all runs)", added), ("add (one again)", again),
                                ("regressions (all cells)", reg), ("regressions --last 100", recent),
                                ("add (the next run)", one_more), ("regressions, incremental", incremental),
                                ("regressions --full", full))]
        load = os.getloadavg()[0]
        show(["command", "exit", "seconds", "CPU seconds", "peak RSS MiB"], rows,
             title=f"{args.runs} runs x {args.records} records ({args.runs * args.records:,} records, "
                   f"{args.runs * args.records * len(METRICS):,} metric rows); store "
                   f"{'%.0f MiB SQLite' % size if size else 'PostgreSQL'}; generated in {gen:.0f} s; "
                   f"source {src}; load average {load:.1f} at the end")
        point = cells(args.records)[0][0]
        flagged = [(r["test"], r["labels"], r["metric"], [(c["index"] + 1, round(c["change_pct"], 1), c["kind"])
                                                         for c in r["changes"]])
                   for r in doc["results"] if r["changes"]]
        print(f"verdicts: {doc['verdicts']}")
        print(f"after the next run: {modes} series analysed so; the incremental verdicts and change points "
              f"{'equal' if same else 'DIFFER FROM'} --full's")
        for f in flagged[:10]:
            print("  ", f)
        found = any(lab.get("point") == point and lab.get("placement") == "same-host" and lab.get("vswitch") == "ovs"
                    and metric == "gbps" and any(abs(i - DROP_RUN) <= 1 and kind == "regression" for i, _, kind in ch)
                    for _, lab, metric, ch in flagged)
        ok = (added["rc"] == 0 and again["rc"] == 0 and reg["rc"] == (1 if args.runs >= DROP_RUN + 6 else 0)
              and one_more["rc"] == 0 and same)
        if args.runs >= DROP_RUN + 6:
            print(f"the injected 15 % drop at run {DROP_RUN}: {'found' if found else 'NOT found'}")
        else:
            print(f"no drop injected: it starts at run {DROP_RUN} (give --runs {DROP_RUN + 6} or more)")
        path = write_json("bench_history", {"runs": args.runs, "records": args.records, "metrics": len(METRICS),
                                            "db": "postgresql" if args.db else "sqlite", "sqlite_mib": size,
                                            "src": str(src), "load_average_end": load,
                                            "generate_s": gen, "add": added, "add_again": again,
                                            "regressions": reg, "regressions_last_100": recent,
                                            "add_next": one_more, "regressions_incremental": _summary(incremental),
                                            "regressions_full": _summary(full), "incremental_modes": modes,
                                            "incremental_equals_full": same,
                                            "verdicts": doc.get("verdicts"),
                                            "changes": flagged, "drop_found": found})
        print(f"results: {path}")
        return 0 if ok and (found or args.runs < DROP_RUN + 6) else 1


if __name__ == "__main__":
    sys.exit(main())
