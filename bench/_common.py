"""Helpers shared by the benchmarks: timing, stats, tables, JSON results, testbeds."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
BENCH_NET = ipaddress.IPv4Network("198.18.0.0/15")   # the only place traffic may go


def online_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def load_testbed(text: str | None = None, path=None, source="<bench>"):
    """A Testbed from YAML text or a file, CPU sets checked against this machine (as the CLI does)."""
    from vnetbench.testbed.loader import load, loads
    if path is not None:
        return load(path, online_cpus=online_cpus())
    return loads(text, source=source, online_cpus=online_cpus())


def timed(fn, *args, **kwargs):
    """(fn(*args, **kwargs), wall seconds)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def stats(xs) -> dict:
    xs = list(xs)
    if not xs:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(xs), "min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def fmt(x, spec=".3f") -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def table(headers, rows, title=None) -> str:
    """Plain-text table; cells are formatted with ``fmt`` unless already strings."""
    cells = [[c if isinstance(c, str) else fmt(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    left = [all(isinstance(r[i], str) for r in rows) for i in range(len(headers))]  # text columns
    line = lambda r: "  ".join(c.ljust(w) if left[i] else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    out = ([title] if title else []) + [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def show(headers, rows, title=None) -> None:
    print(table(headers, rows, title), flush=True)
    print()


def environment() -> dict:
    def out(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    ovs = out(["ovs-vswitchd", "--version"]) if shutil.which("ovs-vswitchd") else None
    return {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv,
            "kernel": platform.release(), "python": platform.python_version(),
            "cpus_online": online_cpus(), "ovs_version": ovs.split()[-1] if ovs else None,
            "git_commit": out(["git", "-C", str(REPO), "rev-parse", "HEAD"]),
            "src_modified": (out(["git", "-C", str(REPO), "status", "--porcelain", "src"]) or "").splitlines(),
            "loadavg": os.getloadavg()}


def write_json(name: str, data: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "environment": environment(), **data},
                               indent=2, default=str) + "\n")
    print(f"results written to {path.relative_to(REPO)}")
    return path


def run_namespaces(run_id: str) -> list[str]:
    """Namespaces of one run still present (names carry the run id)."""
    from pyroute2 import netns
    return sorted(n for n in netns.listnetns() if n.startswith(f"vnb-{run_id}-"))


def daemon_pids(dep) -> dict:
    """{(host, program): pid} of the vSwitch daemons of a deployment and of its controller
    namespace (host "controller": OVN databases and northd), read from their pidfiles."""
    pids = {(h.name, prog): pid for h in dep.testbed.hosts
            for prog, pid in dep.vswitch_pids(h.name).items()}
    return {**pids, **{("controller", name): pid for name, pid in dep.controller_pids().items()}}


def alive(pid: int) -> bool:
    """pid exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_bench_addr(ip) -> str:
    """Refuse to send traffic anywhere but the benchmark/testbed range."""
    if ipaddress.IPv4Address(str(ip)) not in BENCH_NET:
        raise ValueError(f"{ip} is outside {BENCH_NET}: refusing to send traffic there")
    return str(ip)


@contextmanager
def probe_timer():
    """Within the block, every capabilities.probe() call (builder.up makes one when caps is
    None) appends its wall time to the yielded list."""
    from vnetbench.testbed import capabilities
    real, log = capabilities.probe, []

    def probe():
        caps, secs = timed(real)
        log.append(secs)
        return caps
    capabilities.probe = probe
    try:
        yield log
    finally:
        capabilities.probe = real


@contextmanager
def deployed(testbed, caps=None):
    """A testbed that is up for the block and torn down after it, whatever happens."""
    from vnetbench.testbed.netns import builder
    dep = builder.up(testbed, caps=caps)
    try:
        dep.settle()            # a controller's kind answers once it programmed every port
        yield dep
    finally:
        errors = dep.down()
        if errors:
            print(f"warning: teardown of run {dep.run_id} failed: {errors}", file=sys.stderr)


def capacity_args(doc: str, rates: list[int], more=None) -> argparse.Namespace:
    """The command line of a capacity sweep: the offered --rates (one step each) of
    --seconds each; DOC's first line is the description; MORE(parser) adds options."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    if more:
        more(ap)
    ap.add_argument("--rates", type=int, nargs="+", default=rates)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--ports", choices=("auto", "afxdp", "afpacket"), default="auto",
                    help="OVS userspace datapath ports (docs/ovs-ports.md)")
    return ap.parse_args()


def sweep(dep, rates, step):
    """(rate, step(rate), the testbed's CPU metrics over that step) for each offered rate:
    every step runs inside its own vnetbench.cpu.Window."""
    from vnetbench import cpu
    for rate in rates:
        with cpu.Window(dep) as w:
            got = step(rate)
        yield rate, got, w.metrics()


def vm_pairs(testbed):
    """(pair name, placement, vm a, vm b) for every pair of the testbed."""
    return [(p.name, p.placement, p.vms[0], p.vms[1]) for p in testbed.pairs]


def ping(dep, vm, dest, count, interval_s, reply_timeout_s=1.0, payload=56) -> dict:
    """iputils ping from a VM, parsed by the project's ping executor."""
    from vnetbench.traffic import ping as ping_mod
    params = ping_mod.PingParams(dest=check_bench_addr(dest), count=count, interval_s=interval_s,
                                 payload=payload, reply_timeout_s=reply_timeout_s)
    done = dep.exec(vm, ping_mod.command(params),
                    timeout=count * interval_s + reply_timeout_s + 10)
    try:
        return ping_mod.parse(done.stdout)
    except ValueError:
        return {"transmitted": 0, "received": 0, "loss_pct": 100.0,
                "error": (done.stderr or done.stdout).strip()[-300:]}
