"""The records readers' bounds (issue 51): ``vnetbench report``, ``capacity`` and
``reproduce --from`` on the largest and worst inputs the record schema and the loader's
limits admit, and on the two inputs that once took minutes, each in a fresh process:
wall time, peak resident memory, exit status. Targets: every case <= 20 s and <= 1 GiB,
exit 0 (admitted) or 2 (refused in one line); no root needed, no testbed built.

Cases (files generated in a temporary directory, the same every run):

* ``label-2mb``: one record with a 2 MB label (once 106 s and 1.7 GiB): refused at load.
* ``5000x5000``: 5,000 configurations x 5,000 points in 1.9 MB (once 76 s as Markdown):
  refused at the 65th configuration (report.table.MAX_COLUMNS).
* ``64x500``: the widest and longest table a report shows, every one of its 32,000 cells
  measured; all formats (charts left out: more than 16 configurations).
* ``16x100-charts``: the largest table the charts are drawn for, all formats.
* ``50k-records``: the most records a command reads (results.load.MAX_RECORDS), small
  ones of one cell; ``32mib-records``: 32 MiB of them (~480,000): refused at once.
* ``32mib-samples``: 32 MiB of records whose sample lists hold 100,000 values each;
  ``32mib-echoes``: 32 MiB of RTT records of about a million echoes each (pooled, sorted).
* ``scale-wide``: one scale step of 30,000 pairs over 30,000 hosts (capacity's roles).
* capacity and ``reproduce 003 --from`` over ``64x500`` and ``50k-records``.

    .venv/bin/python bench/bench_report_bounds.py        # ~1.5 min
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import show, write_json  # noqa: E402

TARGET_S, TARGET_MIB = 20.0, 1024
MIB = 1024 * 1024


def record(vswitch="ovs", point="p0", samples=None, **labels) -> dict:
    return {"schema": 1, "test": "tcp_stream", "started": 1.0, "finished": 2.0,
            "labels": {"vswitch": vswitch, "network": "vxlan", "placement": "same-host", "point": point,
                       "params": {"used": 1410}, **labels},
            "samples": samples or {"gbps": [1.0, 1.1, 1.2], "cpu_pct": [50.0, 60.0, 55.0]},
            "provenance": {"kernel": "6.1", "tenant_mtu": 1450, "backend": "netns"}}


def tiny(i: int) -> dict:
    return {"test": "tcp_stream", "labels": {"vswitch": "ovs", "network": "vxlan"}, "samples": {"gbps": [i % 7]}}


def write(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return path


def until(path: Path, cap: int, make) -> Path:
    """Records from ``make(i)`` until the file is just under ``cap`` bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size, i = 0, 0
    with open(path, "w") as f:
        while True:
            line = json.dumps(make(i), separators=(",", ":")) + "\n"
            if size + len(line) > cap:
                return path
            f.write(line)
            size, i = size + len(line), i + 1


def inputs(tmp: Path) -> dict:
    return {
        "label-2mb": write(tmp / "label/records.jsonl", [record(vswitch="ovs" * 700_000)]),
        "5000x5000": write(tmp / "wide/records.jsonl", [record(vswitch=f"k{i}", point=f"p{i}") for i in range(5000)]),
        "64x500": write(tmp / "max/records.jsonl",
                        [record(vswitch=f"k{c}", point=f"p{r}") for c in range(64) for r in range(500)]),
        "16x100-charts": write(tmp / "charts/records.jsonl",
                               [record(vswitch=f"k{c}", point=f"p{r}") for c in range(16) for r in range(100)]),
        "50k-records": write(tmp / "most/records.jsonl", [tiny(i) for i in range(50_000)]),
        "32mib-records": until(tmp / "many/records.jsonl", 32 * MIB - 1, tiny),
        "32mib-echoes": until(tmp / "echoes/records.jsonl", 32 * MIB - 1, lambda i: {
            **record(point=f"p{i}", samples={"rtt_mean_ms": [0.1] * 10, "cpu_pct": [1.0] * 10}),
            "test": "icmp_rtt", "extra": {"repetitions": [{"rtt_samples_ms": [0.125 + j % 7 for j in range(99_999)]}
                                                          for _ in range(9)]}}),
        "scale-wide": write(tmp / "scale/records.jsonl", [{
            **record(point="tcp 30000 pairs", samples={"aggregate_gbps": [30.0]}, pairs=30_000),
            "test": "scale", "labels": {"vswitch": "ovs", "network": "vxlan", "pairs": 30_000,
                                        "params": {"test": "tcp", "pair_bps": None}},
            "extra": {"repetitions": [{
                "hosts": {f"h{i}": {"dataplane_pct": 50.0, "busy_pct": 60.0, "cpus": 1} for i in range(30_000)},
                "pairs": [{"ok": True, "gbps": 1.0, "hosts": [f"h{i}", f"h{i}"]}
                          for i in range(30_000)]}]}}]),
        "32mib-samples": until(tmp / "long/records.jsonl", 32 * MIB - 1, lambda i: record(
            point=f"p{i}", samples={"gbps": [1.5] * 100_000, "cpu_pct": [0] * 100_000})),
    }


def measure(argv: list[str]) -> dict:
    """One command in a fresh interpreter: seconds, peak RSS, exit status, stderr's lines."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "vnetbench", *argv], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return {"argv": argv, "seconds": time.perf_counter() - t0, "rss_mib": usage.ru_maxrss / 1024,
            "exit": p.returncode, "stderr_lines": err.count("\n"), "stderr": err[:300]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        files = inputs(tmp)
        cases = [(f"report {k}", ["report", str(p), "--out", str(tmp / f"out-{k}")]) for k, p in files.items()]
        cases += [("report 64x500 md", ["report", str(files["64x500"]), "--out", str(tmp / "md"), "--format", "md"])]
        cases += [("capacity scale-wide", ["capacity", str(files["scale-wide"]), "--out", str(tmp / "w.yaml")])]
        for k in ("64x500", "50k-records"):
            cases += [(f"capacity {k}", ["capacity", str(files[k]), "--out", str(tmp / f"cap-{k}.yaml")]),
                      (f"reproduce --from {k}", ["reproduce", "003", "--from", str(files[k])])]
        rows, out = [], []
        for label, args in cases:
            m = measure(args)
            ok = m["seconds"] <= TARGET_S and m["rss_mib"] <= TARGET_MIB and (
                m["exit"] == 0 or (m["exit"] == 2 and m["stderr_lines"] == 1))
            key = label.split()[-1]
            size = files[key].stat().st_size / MIB if key in files else None
            rows.append([label, f"{size:.1f}" if size is not None else "", f"{m['seconds']:.2f}",
                         f"{m['rss_mib']:.0f}", str(m["exit"]), "ok" if ok else "MISSED",
                         m["stderr"].strip()[:70]])
            out.append({"case": label, "mib": size, **m, "met": ok})
    show(["case", "MiB", "s", "peak RSS MiB", "exit", "target", "stderr"], rows,
         title=f"records readers on the worst admitted inputs (targets <= {TARGET_S:g} s, <= {TARGET_MIB} MiB)")
    met = all(o["met"] for o in out)
    print(f"all targets {'met' if met else 'MISSED'}")
    write_json("report_bounds", {"results": out, "targets": {"seconds": TARGET_S, "rss_mib": TARGET_MIB},
                                 "met": met})
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
