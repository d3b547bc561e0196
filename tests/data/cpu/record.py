"""Records tests/data/cpu/ovs-vxlan-tcp.json: the raw inputs of two CPU readings
(start and end of a window) during a cross-host OVS VXLAN TCP test on the embedded
testbed: every daemon thread's /proc stat and schedstat lines, /proc/stat, and the
interrupt-time probe's snapshots around each instant; plus 3 s of bpftrace's raw
output (bpftrace.jsonl). Run as root from the repository:
python tests/data/cpu/record.py [DIR] [--nice] [--name=ovs-vxlan-tcp]

``--nice``: the data plane's threads (the daemons, the iperf3s) run at nice -20 during
the recording, so that other work on a shared machine does not starve it; the
accounting is the same at any priority. Traffic: both pairs, cross-host both ways.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from vnetbench.testbed.loader import load
from vnetbench.testbed.netns import builder, cpuprobe
from vnetbench_collector import probe

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
NAME = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--name=")), "ovs-vxlan-tcp")
HERE = Path(ARGS[0]) if ARGS else Path(__file__).resolve().parent
REPO = Path(__file__).resolve().parents[3]


def raw(dep, out: Path) -> dict:
    lo = json.loads(out.read_text())
    t_ns = time.monotonic_ns()
    hosts = {}
    for h in dep.testbed.hosts:
        daemons = {}
        for name, pid in dep.vswitch_pids(h.name).items():
            base = Path(f"/proc/{pid}")
            tasks = {t.name: {"stat": (t / "stat").read_text(), "schedstat": (t / "schedstat").read_text()}
                     for t in (base / "task").iterdir()}
            daemons[name] = {"pid": pid, "stat": (base / "stat").read_text(), "tasks": tasks}
        hosts[h.name] = {"cpus": list(h.cpus), "daemons": daemons}
    stat = Path("/proc/stat").read_text()
    hi = probe.following(out, probe.Snapshot.from_dict(lo), t_ns)
    return {"t_ns": t_ns, "hosts": hosts, "proc_stat": stat, "probe_lo": lo,
            "probe_hi": json.loads(out.read_text()) if hi else None}


def renice(pids, value=-20):
    """Every thread of ``pids`` (setpriority on a pid is per thread on Linux)."""
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(tid), value)
            except OSError:
                continue


def main():
    dep = builder.up(load(REPO / "examples" / "ovs-vxlan.yaml"))
    try:
        out = cpuprobe.ensure(dep)
        assert out, cpuprobe.wanted()
        flows = []                       # both pairs, both ways: the data plane as busy as it gets
        for a, b in (("cross-a", "cross-b"), ("cross-b", "cross-a"), ("same-a", "same-b")):
            flows.append(dep.popen(b, ["iperf3", "-s", "-1", "-p", "5301"], stdout=subprocess.DEVNULL))
        time.sleep(1)
        for a, b in (("cross-a", "cross-b"), ("cross-b", "cross-a"), ("same-a", "same-b")):
            flows.append(dep.popen(a, ["iperf3", "-c", dep.ip(b), "-p", "5301", "-t", "7"],
                                   stdout=subprocess.DEVNULL))
        if "--nice" in sys.argv:
            renice([f.pid for f in flows] + [pid for h in dep.testbed.hosts
                                             for pid in dep.vswitch_pids(h.name).values()])
        time.sleep(2)
        start = raw(dep, out)
        bt = subprocess.Popen(probe.bpftrace_argv("/tmp/record-mark"), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
        time.sleep(3)
        bt.terminate()
        lines = bt.communicate()[0]
        end = raw(dep, out)
        for f in flows:
            f.wait(20)
        (HERE / "bpftrace.jsonl").write_text(lines)
        (HERE / f"{NAME}.json").write_text(json.dumps(
            {"start": start, "end": end, "hz": 100, "nice": "--nice" in sys.argv, "kernel": subprocess.check_output(
                ["uname", "-r"], text=True).strip()}, indent=1))
    finally:
        print(dep.down(), file=sys.stderr)


if __name__ == "__main__":
    main()
