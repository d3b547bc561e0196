"""TCP flow-setup rate, "multiple TCP sessions with static MAC" (seed 003 row 5):
new connections between the pair at 10 / 100 / 1,000 / 10,000 per second, each a
new 5-tuple; loss = connections that failed or missed the deadline. Static ARP
on both VMs keeps ARP out of it. For OVS, the datapath's missed/lost upcall
counters over the window show the slow-path cost (lost upcalls are drops)."""

from __future__ import annotations

import re
import select
import subprocess

from vnetbench.battery.common import repeat, result, static_arp
from vnetbench.battery.session import start_timeout, stop
from vnetbench.results.record import now
from vnetbench.traffic import flowgen

_LOOKUPS = re.compile(r"lookups: hit:(\d+) missed:(\d+) lost:(\d+)")


def run(dep, pair, rates=(10, 100, 1000, 10000), seconds=5, deadline_ms=1000, repetitions=3):
    src, dst = pair.vms
    static_arp(dep, src, dst)
    server = start_server(dep, dst)
    out = []
    try:
        for rate in rates:
            started = now()
            samples, extras = repeat(dep, repetitions,
                                     lambda: _one(dep, src, dst, rate, seconds, deadline_ms))
            params = {"rate": rate, "seconds": seconds, "deadline_ms": deadline_ms}
            r = result(dep, pair, "flow_setup", params, samples, extras, started)
            r.labels["point"] = f"{rate}/s"
            out.append(r)
    finally:
        stop(server, timeout=10)
    return out


def start_server(dep, vm: str) -> subprocess.Popen:
    """vnetbench-flowgen's server in VM, listening when this returns (stopped if it
    does not start)."""
    server = dep.popen(vm, flowgen.server_command(flowgen.ServerParams(listen=dep.ip(vm))),
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready, _, _ = select.select([server.stdout], [], [], start_timeout(dep))
    if not ready or "listening" not in server.stdout.readline():
        stop(server, timeout=10)
        raise RuntimeError(f"vnetbench-flowgen server in {vm} did not start")
    return server


def _one(dep, src, dst, rate, seconds, deadline_ms):
    before = _datapath(dep)
    argv = flowgen.client_command(flowgen.ClientParams(target=dep.reach(src, dst), rate=rate,
                                                       duration_s=seconds, deadline_ms=deadline_ms))
    res = flowgen.parse(dep.exec(src, argv, timeout=seconds + 30).stdout)
    after = _datapath(dep)
    lat = res["latency_us"] or {}
    metrics = {"loss_pct": res["loss_pct"], "achieved_rate": res["achieved_rate"],
               "ok": res["ok"], "failed": res["failed"], "late": res["late"],
               "connect_p50_ms": _ms(lat.get("p50")), "connect_p99_ms": _ms(lat.get("p99")),
               "schedule_kept": 1.0 if res["schedule_kept"] else 0.0}
    if before is not None and after is not None:
        metrics["dp_missed"] = after[1] - before[1]
        metrics["dp_lost"] = after[2] - before[2]
    return metrics, {"errors": res["errors"]}


def _ms(us):
    return None if us is None else us / 1000.0


def _datapath(dep):
    """Sum of hit/missed/lost over the hosts' OVS datapaths (None where the kind's datapath
    has no such counters: ``Kind.dpctl_counters``)."""
    from vnetbench import kinds
    if not kinds.of(dep).dpctl_counters:
        return None
    total = [0, 0, 0]
    for h in dep.testbed.hosts:
        for m in _LOOKUPS.finditer(dep.ovs_appctl(h.name, "dpctl/show")):
            total = [a + int(b) for a, b in zip(total, m.groups())]
    return total
