"""Flow-setup capacity: new TCP connections per second that vnetbench-flowgen opens with 0
loss over a bare veth pair between two namespaces (client on one CPU, server on another).

For each receive-steering setting (--rps off: the kernel default, a veth delivers on the
sending CPU, so the server's half of every handshake runs on the client's CPU; --rps on:
each namespace's veth steers its received packets to its own process's CPU, like two
hosts), a fresh veth pair vnb-bench-<random>-a/-b (198.18.98.1 / .2, removed in a
finally) gets a server listening on 256 ports, and the client runs each --rates step for
--seconds. Loss = failed + late (connected after --deadline ms). Busy % of each CPU is
measured over the step. /proc/stat is machine-wide and other users of these CPUs skew
every number, so before each step the script waits (at most --quiet-wait s) until the
CPUs are less than --quiet-pct busy; "bg %" is the last such 0.5 s measurement.
Target: >= 20,000 connections/s with 0 loss.

    .venv/bin/python bench/bench_flowgen.py [--rates 10000 20000 25000 30000] [--seconds 5]
        [--rps off on] [--repeat 1] [--deadline 1000] [--quiet-pct 10] [--quiet-wait 20]
        [--binary PATH]
"""

from __future__ import annotations

import argparse
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, check_bench_addr, online_cpus, show, write_json  # noqa: E402

from pyroute2 import NetNS, netns  # noqa: E402

from vnetbench.errors import PrerequisiteError  # noqa: E402
from vnetbench.linux.proc import in_netns  # noqa: E402
from vnetbench.traffic import flowgen  # noqa: E402

TARGET_RATE = 20000
PORTS = "5000-5255"
ADDR = {"a": "198.18.98.1", "b": "198.18.98.2"}


class VethPair:
    """Two namespaces joined by one veth (eth0 on both sides), addresses from ADDR."""

    def __init__(self, rps_cpus: dict | None):
        rid = secrets.token_hex(3)
        self.ns = {"a": f"vnb-bench-{rid}-a", "b": f"vnb-bench-{rid}-b"}
        self.rps_cpus = rps_cpus

    def __enter__(self):
        try:
            for name in self.ns.values():
                netns.create(name)
            with NetNS(self.ns["a"]) as na:
                na.link("add", ifname="eth0", kind="veth",
                        peer={"ifname": "eth0", "net_ns_fd": self.ns["b"]})
            for side, name in self.ns.items():
                with NetNS(name) as ns:
                    for dev in ("lo", "eth0"):
                        ns.link("set", index=ns.link_lookup(ifname=dev)[0], state="up")
                    ns.addr("add", index=ns.link_lookup(ifname="eth0")[0],
                            address=check_bench_addr(ADDR[side]), prefixlen=24)
                if self.rps_cpus:       # sysfs shows the namespace's own devices under ip netns exec
                    mask = format(sum(1 << c for c in self.rps_cpus[side]), "x")
                    subprocess.run(in_netns(name, ["sh", "-c", f"echo {mask} > "
                                                   "/sys/class/net/eth0/queues/rx-0/rps_cpus"]),
                                   check=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for name in self.ns.values():
            if name in netns.listnetns():
                netns.remove(name)


def cpu_times() -> dict:
    """{cpu: (busy, steal, total)} jiffies from /proc/stat (busy: all but idle and iowait)."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *vals = line.split()
        if name.startswith("cpu") and name != "cpu":
            v = list(map(int, vals))
            out[int(name[3:])] = (sum(v) - v[3] - v[4], v[7], sum(v))
    return out


def busy_pct(before: dict, after: dict, field=0) -> dict:
    """{cpu: % of the interval busy (field 0) or stolen by the hypervisor (field 1)}."""
    return {c: round(100 * (after[c][field] - before[c][field]) / max(1, after[c][2] - before[c][2]), 1)
            for c in after if c in before}


def wait_quiet(max_pct, max_wait_s) -> float:
    """Wait (at most max_wait_s) until the machine's mean CPU busy over 0.5 s is below
    max_pct; returns the last such measurement (other users of the CPUs skew every number)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        t = cpu_times()
        time.sleep(0.5)
        pct = busy_pct(t, cpu_times())
        mean = round(sum(pct.values()) / len(pct), 1)
        if mean < max_pct or time.monotonic() >= deadline:
            return mean


def start_server(pair, exe, cpu):
    argv = in_netns(pair.ns["b"], flowgen.server_command(
        flowgen.ServerParams(listen=check_bench_addr(ADDR["b"]), ports=PORTS), exe), [cpu])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    line = proc.stdout.readline() if ready else ""
    if '"listening"' not in line:
        proc.kill()
        raise RuntimeError(f"flowgen server did not start: {line}{proc.stderr.read()[-300:]}")
    return proc


def stop_server(proc) -> dict:
    exited = proc.poll()
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=10)
        return flowgen.parse_server(out)
    except (subprocess.TimeoutExpired, ValueError) as exc:
        proc.kill()
        out, err = proc.communicate()
        why = f"exited early with status {exited}" if exited is not None else f"{type(exc).__name__}: {exc}"
        return {"error": f"{why}; stderr: {err.strip()[-500:]}"}


def run_client(pair, exe, cpu, rate, seconds, deadline_ms) -> dict:
    params = flowgen.ClientParams(target=check_bench_addr(ADDR["b"]), rate=rate, duration_s=seconds,
                                  ports=PORTS, deadline_ms=deadline_ms,
                                  timeout_ms=max(3000, deadline_ms))
    done = subprocess.run(in_netns(pair.ns["a"], flowgen.client_command(params, exe), [cpu]),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=seconds + params.timeout_ms / 1000 + 30)
    try:
        return flowgen.parse(done.stdout)
    except ValueError:
        return {"error": (done.stderr or done.stdout).strip()[-300:] or f"exit {done.returncode}"}


def find_binary(path, tmp) -> str:
    if path:
        return path
    try:
        return flowgen.binary()
    except PrerequisiteError:
        if not shutil.which("go"):
            raise
    print("vnetbench-flowgen not installed: building it into a temporary directory", flush=True)
    subprocess.run([str(REPO / "tools/flowgen/build.sh"), tmp], check=True)
    return str(Path(tmp) / "vnetbench-flowgen")


def capacity(rows) -> int | None:
    """Highest rate that had 0 loss in every run, with every lower rate also at 0 loss."""
    best = None
    for rate in sorted({r["rate"] for r in rows}):
        if any(r.get("lost", 1) or r.get("error") for r in rows if r["rate"] == rate):
            break
        best = rate
    return best


def lat(r, key, sub="latency_us"):
    return (r.get(sub) or {}).get(key)


def ms(x):
    return None if x is None else x / 1000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", type=int, nargs="+", default=[10000, 20000, 25000, 30000])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rps", nargs="+", choices=["off", "on"], default=["off", "on"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=1000, help="ms (default 1000: any SYN retransmit)")
    ap.add_argument("--quiet-pct", type=float, default=10,
                    help="before each step wait until the CPUs are less busy than this (default 10 %%)")
    ap.add_argument("--quiet-wait", type=float, default=20, help="... but at most this many s (default 20)")
    ap.add_argument("--binary", help="vnetbench-flowgen to use (default: the installed one, else build)")
    args = ap.parse_args(argv)
    cpus = online_cpus()
    cpu_a, cpu_b = cpus[0], cpus[1 % len(cpus)]
    rows, servers = [], {}
    with tempfile.TemporaryDirectory(prefix="vnb-flowgen-") as tmp:
        exe = find_binary(args.binary, tmp)
        for rps in args.rps:
            print(f"rps {rps}: client on CPU {cpu_a}, server on CPU {cpu_b}, ports {PORTS}", flush=True)
            with VethPair({"a": [cpu_a], "b": [cpu_b]} if rps == "on" else None) as pair:
                server = start_server(pair, exe, cpu_b)
                try:
                    for rate in args.rates:
                        for _ in range(args.repeat):
                            bg = wait_quiet(args.quiet_pct, args.quiet_wait)
                            t0 = cpu_times()
                            res = run_client(pair, exe, cpu_a, rate, args.seconds, args.deadline)
                            t1 = cpu_times()
                            load, steal = busy_pct(t0, t1), busy_pct(t0, t1, 1)
                            rows.append({"rps": rps, "rate": rate, **res,
                                         "cpu_client_pct": load.get(cpu_a),
                                         "cpu_server_pct": load.get(cpu_b),
                                         "steal_pct": round(sum(steal.values()) / len(steal), 1),
                                         "background_pct": bg})
                            r = rows[-1]
                            print(f"  {rate}/s: loss {r.get('loss_pct', r.get('error'))} %", flush=True)
                finally:
                    servers[rps] = stop_server(server)
    print()

    show(["rps", "rate/s", "achieved/s", "ok", "failed", "late", "loss %", "p50 us", "p99 us",
          "max us", "lag max ms", "CPU cl %", "CPU srv %", "steal %", "cl waited ms", "bg %"],
         [[r["rps"], r["rate"], r.get("achieved_rate"), r.get("ok"), r.get("failed"), r.get("late"),
           r.get("loss_pct"), lat(r, "p50"), lat(r, "p99"), lat(r, "max"),
           ms(lat(r, "max", "schedule_lag_us")), r["cpu_client_pct"], r["cpu_server_pct"],
           r["steal_pct"], None if r.get("runqueue_wait_s") is None else 1000 * r["runqueue_wait_s"],
           r["background_pct"]] for r in rows],
         title=f"Flow setup over a veth pair: {args.seconds:g} s per step, ports {PORTS}, "
               f"deadline {args.deadline:g} ms, loss = failed + late; CPU % machine-wide per CPU, "
               f"'cl waited': client runnable but not running (other tasks or ksoftirqd on its CPU)")
    errors = [r for r in rows if r.get("error") or r.get("errors")]
    if errors:
        show(["rps", "rate/s", "errors"],
             [[r["rps"], r["rate"], str(r.get("error") or r.get("errors"))] for r in errors],
             title="Errors")
    summary = []
    for rps in args.rps:
        mine = [r for r in rows if r["rps"] == rps]
        cap = capacity(mine)
        srv = servers.get(rps, {})
        summary.append({"rps": rps, "capacity_per_s": cap,
                        "verdict": "PASS" if cap is not None and cap >= TARGET_RATE else "FAIL",
                        "client_connected": sum(r.get("ok", 0) + r.get("late", 0) for r in mine),
                        "server_accepted": srv.get("accepted"), "server": srv})
    show(["rps", "0-loss capacity /s", f"target >= {TARGET_RATE}", "client connected",
          "server accepted"],
         [[s["rps"], s["capacity_per_s"], s["verdict"], s["client_connected"], s["server_accepted"]]
          for s in summary], title="Capacity (highest rate with 0 loss, all lower rates too)")
    write_json("bench_flowgen", {"seconds": args.seconds, "rates": args.rates, "ports": PORTS,
                                 "deadline_ms": args.deadline, "repeat": args.repeat,
                                 "quiet_pct": args.quiet_pct, "quiet_wait_s": args.quiet_wait,
                                 "cpu_client": cpu_a, "cpu_server": cpu_b, "binary": exe,
                                 "target_rate": TARGET_RATE, "summary": summary, "runs": rows})
    return 0 if all(s["verdict"] == "PASS" for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
