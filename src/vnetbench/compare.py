"""The main job: the battery over vSwitch kinds x network types through Rally,
then a seed-style table (rows = test x point x placement, columns = configurations,
CPU% beside every value), the Rally HTML report and the JSON-lines records."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from vnetbench.errors import VnetbenchError
from vnetbench.results.record import ResultStore

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "rally-tasks" / "overlay-comparison.yaml"
# test -> the metrics its table cells show, first one a record has
HEADLINE = {"icmp_rtt": ("rtt_mean_ms",), "tcp_stream": ("gbps",), "udp_stream": ("gbps",),
            "broadcast": ("loss_pct",), "flow_setup": ("loss_pct",),
            "rfc2544_throughput": ("ndr_fps",), "rfc2544_latency": ("rtt_avg_ms",),
            "rfc2544_frame_loss": ("frame_loss_pct",), "rfc2544_back_to_back": ("burst_frames",),
            "udp_fairness": ("jain_index",)}


class Rally:
    """Rally with its own database under the results directory (no global state)."""

    def __init__(self, home: Path):
        self.home = home
        self.exe = str(Path(sys.executable).parent / "rally")
        self.conf = home / "rally.conf"

    def __call__(self, *args, stream=False) -> str:
        argv = [self.exe, "--config-file", str(self.conf), *args]
        if stream:       # a long task: let the user watch Rally's progress
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            lines = []
            for line in p.stdout:
                lines.append(line)
                if line.startswith("vnetbench:") or "rally task report" in line:
                    print(line.rstrip(), file=sys.stderr, flush=True)
            p.wait()
            out, code = "".join(lines), p.returncode
        else:
            done = subprocess.run(argv, capture_output=True, text=True)
            out, code = done.stdout + done.stderr, done.returncode
        if code != 0 and not stream:
            raise VnetbenchError(f"rally {' '.join(args[:2])} failed: {out.strip().splitlines()[-1:]}")
        return out

    def ensure(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.conf.exists():
            self.conf.write_text(f"[database]\nconnection = sqlite:///{self.home.resolve()}/rally.sqlite\n")
            self("db", "create")
            self("env", "create", "--name", "vnetbench", "--no-use")


def run(profile="quick", vswitches=None, networks=None, out_dir=Path("results"), task=TASK) -> dict:
    out = out_dir / time.strftime(f"comparison-{profile}-%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    rally = Rally(out_dir / "rally")
    rally.ensure()
    args = {"profile": profile, "results": str((out / "records.jsonl").resolve())}
    if vswitches:
        args["vswitches"] = list(vswitches)
    if networks:
        args["networks"] = list(networks)
    t0 = time.monotonic()
    log = rally("task", "start", "--env", "vnetbench", str(task), "--task-args", json.dumps(args),
                stream=True)
    (out / "rally.log").write_text(log)
    if "rally task report " not in log:
        raise VnetbenchError(f"rally task start did not run; see {out / 'rally.log'}")
    uuid = log.split("rally task report ")[1].split()[0]
    rally("task", "report", uuid, "--out", str(out / "rally-report.html"))
    sla = json.loads(rally("task", "sla-check", uuid, "--json"))   # exit 1 when an SLA fails
    records = list(ResultStore(out / "records.jsonl"))
    (out / "table.txt").write_text(table(records))
    return {"dir": out, "uuid": uuid, "seconds": time.monotonic() - t0, "records": records,
            "sla_failed": [s for s in sla if s.get("status") != "PASS"]}


def table(records) -> str:
    """Rows: test / point / placement; columns: vswitch/network; cells: mean (CPU%)."""
    cols, rows, cells = [], [], {}
    for r in records:
        col = f"{r.labels['vswitch']}/{r.labels['network']}"
        cols += [col] if col not in cols else []
        if "not_applicable" in r.extra:
            cells.setdefault(("*", col), "N/A")
            continue
        metric = next((k for k in HEADLINE.get(r.test, ()) if k in r.samples), "")
        mode = r.labels.get("params", {}).get("mode", "")
        row = (f"{r.test}{' ' + mode if mode else ''} {r.labels.get('point', '')}".strip() +
               f" [{metric}]", r.labels["placement"])
        rows += [row] if row not in rows else []
        m, c = r.metrics.get(metric, {}), r.metrics.get("cpu_pct", {})
        used = r.labels.get("params", {}).get("used") if r.test == "tcp_stream" else None
        cells[(row, col)] = ("-" if m.get("mean") is None else f"{m['mean']:.3g}") + \
            (f" @{used}" if used and used != r.labels["params"].get("nominal") else "") + \
            ("" if c.get("mean") is None else f" ({c['mean']:.0f}%)")
    head = ["test [metric]", "placement"] + cols
    body = [[row[0], row[1]] + [cells.get((row, c), cells.get(("*", c), "")) for c in cols]
            for row in rows]
    widths = [max(len(str(x[i])) for x in [head] + body) for i in range(len(head))]
    fmt = lambda line: " | ".join(str(v).ljust(w) for v, w in zip(line, widths))
    return "\n".join([fmt(head), "-+-".join("-" * w for w in widths)] + [fmt(b) for b in body]) + \
        "\n\ncells: mean over repetitions (host-side vSwitch CPU%, 100% = one CPU); N/A: not buildable here\n"
