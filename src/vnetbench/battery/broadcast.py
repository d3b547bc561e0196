"""Broadcast (seed 003 row 4): ARP requests and ICMP to the broadcast address at a
set rate from one VM; loss = what did not arrive at the other VM. Unicast paths
get static ARP entries first, so the only broadcast traffic is the test's."""

from __future__ import annotations

import random
import select
import subprocess

from vnetbench.battery.common import repeat, result, static_arp
from vnetbench.battery.session import start_timeout
from vnetbench.results.record import now
from vnetbench.traffic import broadcast as bc


def run(dep, pair, kinds=("arp", "icmp"), rate_pps=1000, seconds=5, repetitions=3):
    src, dst = pair.vms
    static_arp(dep, src, dst)
    out = []
    for kind in kinds:
        started = now()
        samples, extras = repeat(dep, repetitions, lambda: _one(dep, pair, kind, rate_pps, seconds))
        params = {"kind": kind, "rate_pps": rate_pps, "seconds": seconds}
        r = result(dep, pair, "broadcast", params, samples, extras, started)
        r.labels["point"] = kind
        out.append(r)
    return out


def _slack(dep) -> float:
    """How long the counter outlasts the send: the sender's command must start in that
    time. 1 s in a namespace; a TCG guest's SSH exec took seconds at load 14-23 (quick
    compare on libvirt: 100% loss with 1 s, every frame was sent after the counter ended)."""
    return 1.0 if dep.backend == "netns" else 8.0


def _one(dep, pair, kind, rate_pps, seconds):
    src, dst = pair.vms
    native = dep.backend != "netns"     # guests carry no Python: the Go build of the tool
    vnet = dep.testbed.vnet(pair.vnet)
    target = dep.ip(dst) if kind == "arp" else str(vnet.cidr.broadcast_address)
    marker = random.randrange(1, 2**16)
    counter = dep.popen(dst, bc.count_command(bc.CountParams(
        "eth0", kind, dep.ip(src), target, seconds + _slack(dep), marker), native),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([counter.stdout], [], [], start_timeout(dep))
        if not ready:
            raise RuntimeError(f"broadcast counter in {dst} did not start")
        counter.stdout.readline()
        sent = bc.parse(dep.exec(src, bc.send_command(bc.SendParams(
            "eth0", kind, dep.ip(src), target, rate_pps, seconds, marker), native),
            timeout=seconds + 30).stdout)
        got = bc.parse(counter.communicate(timeout=seconds + _slack(dep) + 10)[0])
    finally:
        if counter.poll() is None:
            counter.kill()
            counter.wait()
    loss = 100.0 * (sent["sent"] - got["received"]) / sent["sent"] if sent["sent"] else 100.0
    return ({"loss_pct": max(0.0, loss), "sent": sent["sent"], "received": got["received"],
             "achieved_pps": sent["achieved_pps"]}, {})
