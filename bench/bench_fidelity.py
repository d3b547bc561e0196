"""Fidelity: TCP throughput (iperf3, one stream) and RTT (ping) of a VM pair for every
{linuxbridge, ovs} x {flat, vlan, vxlan, gre, geneve} x {same-host, cross-host} this
machine supports, beside a bare veth pair between two namespaces (the ceiling).

Each supported combination is built once with the default testbed (hosts h1/h2 on
CPUs 0/1, a same-host and a cross-host pair); the veth baseline is measured with
the same CPU pinning as each placement (same-host: both ends on CPU 0; cross-host:
CPU 0 and CPU 1). Traffic only ever goes to 198.18.0.0/15 inside our namespaces.

    .venv/bin/python bench/bench_fidelity.py [--seconds 5] [--only ovs-vxlan ...]
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (check_bench_addr, deployed, load_testbed, online_cpus, ping,  # noqa: E402
                     show, vm_pairs, write_json)

from pyroute2 import NetNS, netns  # noqa: E402

from vnetbench.linux import proc  # noqa: E402
from vnetbench.testbed.capabilities import probe  # noqa: E402
from vnetbench.testbed.model import NetType, VSwitchKind  # noqa: E402

KINDS = (VSwitchKind.LINUXBRIDGE, VSwitchKind.OVS)
RTT_COUNT, RTT_INTERVAL_S = 50, 0.01


# -- measurements (work on a Deployment or on the VethPair below) --------------

def iperf3(dep, a, b, secs) -> dict:
    """One-stream TCP a -> b; the server is a one-off (-1) bound to b's address."""
    ip_b = check_bench_addr(dep.ip(b))
    server = dep.popen(b, ["iperf3", "-s", "-1", "-B", ip_b],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for attempt in range(10):               # until the server listens
            time.sleep(0.3)
            done = dep.exec(a, ["iperf3", "-c", ip_b, "-t", str(secs), "-J"], timeout=secs + 30)
            try:
                doc = json.loads(done.stdout)
            except json.JSONDecodeError:
                return {"error": (done.stderr or done.stdout).strip()[-300:] or f"exit {done.returncode}"}
            if "error" not in doc:
                end = doc["end"]
                return {"gbps": end["sum_received"]["bits_per_second"] / 1e9,
                        "retransmits": end["sum_sent"].get("retransmits"),
                        "sender_gbps": end["sum_sent"]["bits_per_second"] / 1e9,
                        "attempts": attempt + 1}
            if "connect" not in doc["error"]:
                return {"error": doc["error"]}
        return {"error": doc["error"]}
    finally:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def measure(dep, a, b, secs) -> dict:
    """Warm-up ping (ARP, flow setup), then RTT, then throughput."""
    dest = dep.ip(b)
    warm = ping(dep, a, dest, count=3, interval_s=0.2, reply_timeout_s=2)
    if not warm.get("received"):
        return {"error": f"{a} cannot reach {b} ({dest}): {warm.get('error', '100% loss')}"}
    rtt = ping(dep, a, dest, count=RTT_COUNT, interval_s=RTT_INTERVAL_S)
    out = {"rtt_avg_ms": rtt.get("rtt_avg_ms"), "rtt_mdev_ms": rtt.get("rtt_mdev_ms"),
           "rtt_min_ms": rtt.get("rtt_min_ms"), "rtt_max_ms": rtt.get("rtt_max_ms"),
           "ping_loss_pct": rtt["loss_pct"], **iperf3(dep, a, b, secs)}
    return out


# -- the baseline: a bare veth pair --------------------------------------------

class VethPair:
    """Two namespaces joined by one veth, with the Deployment methods measure() uses."""

    def __init__(self, cpus_a, cpus_b, mtu=1500):
        rid = secrets.token_hex(3)
        self.ns = {"a": f"vnb-bench-{rid}-a", "b": f"vnb-bench-{rid}-b"}
        self.addr = {"a": "198.18.200.1", "b": "198.18.200.2"}
        self.cpus = {"a": cpus_a, "b": cpus_b}
        self.mtu, self.procs = mtu, []

    def __enter__(self):
        try:
            for name in self.ns.values():
                netns.create(name)
            with NetNS(self.ns["a"]) as na:
                na.link("add", ifname="eth0", kind="veth", mtu=self.mtu,
                        peer={"ifname": "eth0", "net_ns_fd": self.ns["b"], "mtu": self.mtu})
            for side, name in self.ns.items():
                with NetNS(name) as ns:
                    for dev in ("lo", "eth0"):
                        ns.link("set", index=ns.link_lookup(ifname=dev)[0], state="up")
                    ns.addr("add", index=ns.link_lookup(ifname="eth0")[0],
                            address=self.addr[side], prefixlen=24)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for name in self.ns.values():
            if name in netns.listnetns():
                netns.remove(name)

    def ip(self, side):
        return self.addr[side]

    def exec(self, side, argv, timeout=60):
        return subprocess.run(proc.in_netns(self.ns[side], argv, self.cpus[side]),
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def popen(self, side, argv, **kwargs):
        p = subprocess.Popen(proc.in_netns(self.ns[side], argv, self.cpus[side]),
                             start_new_session=True, **kwargs)
        self.procs.append(p)
        return p


# -- driver --------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5, help="iperf3 duration per pair (default 5)")
    ap.add_argument("--only", nargs="*", metavar="KIND-TYPE",
                    help="limit to these combinations, e.g. ovs-vxlan linuxbridge-flat")
    args = ap.parse_args(argv)
    caps = probe()
    cpus = online_cpus()
    rows, unsupported = [], []

    placements = {"same-host": ([cpus[0]], [cpus[0]]),
                  "cross-host": ([cpus[0]], [cpus[1 % len(cpus)]])}
    for placement, (ca, cb) in placements.items():
        print(f"veth baseline, {placement} pinning (CPU {ca[0]} -> {cb[0]}) ...", flush=True)
        with VethPair(ca, cb) as veth:
            rows.append({"vswitch": "veth", "network": "-", "placement": placement,
                         "datapath": None, "tenant_mtu": veth.mtu,
                         **measure(veth, "a", "b", args.seconds)})

    for kind in KINDS:
        for ntype in NetType:
            combo = f"{kind.value}-{ntype.value}"
            if args.only and combo not in args.only:
                continue
            reason = caps.why_not(kind, ntype)
            if reason:
                unsupported.append({"vswitch": kind.value, "network": ntype.value, "reason": reason})
                continue
            print(f"{combo} ...", flush=True)
            tb = load_testbed(f"name: fid-{combo}\nvswitch: {kind.value}\n"
                              f"network: {{type: {ntype.value}}}\n", source=f"<bench {combo}>")
            base = {"vswitch": kind.value, "network": ntype.value, "tenant_mtu": tb.network.tenant_mtu,
                    "datapath": caps.ovs_datapath if kind is VSwitchKind.OVS else None}
            try:
                with deployed(tb, caps) as dep:
                    for _, placement, a, b in vm_pairs(tb):
                        rows.append({**base, "placement": placement, "run_id": dep.run_id,
                                     **measure(dep, a, b, args.seconds)})
            except Exception as exc:    # a combination that fails to build is a result too
                rows.append({**base, "placement": "-", "error": f"{type(exc).__name__}: {exc}"})

    ref = {r["placement"]: r.get("gbps") for r in rows if r["vswitch"] == "veth"}
    for r in rows:
        r["vs_veth"] = r["gbps"] / ref[r["placement"]] if r.get("gbps") and ref.get(r["placement"]) \
            else None
    show(["vswitch", "network", "placement", "MTU", "TCP Gbit/s", "vs veth", "retrans",
          "RTT avg ms", "RTT mdev ms", "loss %"],
         [[r["vswitch"] + (f" ({r['datapath']})" if r["datapath"] else ""), r["network"],
           r["placement"], r["tenant_mtu"], r.get("gbps"),
           f"{r['vs_veth']:.0%}" if r["vs_veth"] else "-", r.get("retransmits"),
           r.get("rtt_avg_ms"), r.get("rtt_mdev_ms"), r.get("ping_loss_pct")] for r in rows],
         title=f"Fidelity: iperf3 -t {args.seconds} (1 TCP stream), ping -c {RTT_COUNT} "
               f"-i {RTT_INTERVAL_S}")
    errors = [r for r in rows if r.get("error")]
    if errors:
        show(["vswitch", "network", "placement", "error"],
             [[r["vswitch"], r["network"], r["placement"], r["error"]] for r in errors],
             title="Errors")
    if unsupported:
        show(["vswitch", "network", "why not (capabilities)"],
             [[u["vswitch"], u["network"], u["reason"]] for u in unsupported],
             title="Not supported on this machine")
    write_json("bench_fidelity", {"seconds": args.seconds, "rtt_count": RTT_COUNT,
                                  "rtt_interval_s": RTT_INTERVAL_S, "capabilities": caps.to_dict(),
                                  "results": rows, "unsupported": unsupported})
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
