"""Broadcast (seed 003 row 4): ARP requests and ICMP to the broadcast address at a
set rate from one VM, with loss by both definitions, measured at once:

- ``loss_pct`` (delivered): what did not arrive at the other VM;
- ``answered_loss_pct`` (answered): what the sender got no answer to -- an ARP reply for
  the asked address, whoever sent it (the peer, or a datapath's proxy ARP), an echo reply
  from the peer (which answers broadcast echo for the test's duration only).

They disagree on a proxy-ARP datapath: the peer never sees the request (100% loss
delivered), the sender gets every answer (0% answered) -- seed 003's OpenContrail column.
Unicast paths get static ARP entries first, so the only broadcast traffic is the test's."""

from __future__ import annotations

import random
import select
import subprocess
from contextlib import contextmanager

from vnetbench.battery.common import not_applicable, repeat, result, static_arp
from vnetbench.battery.session import start_timeout
from vnetbench.results.record import now
from vnetbench.testbed.model import L2
from vnetbench.traffic import broadcast as bc


def run(dep, pair, kinds=("arp", "icmp"), rate_pps=1000, seconds=5, repetitions=3):
    if pair.path != L2:         # a router ends a broadcast domain: nothing to measure across it
        far = pair.peer_vnet or "the external network"
        return [not_applicable(dep, pair, "broadcast", f"broadcast does not cross a router (pair {pair.name} "
                               f"is {pair.path}: {pair.vnet} <-> {far})", kind=kind)
                for kind in kinds]
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
    counters = {}
    with _answering_broadcast_echo(dep, dst, kind == "icmp"):
        try:
            for vm, replies in ((dst, False), (src, True)):
                counters[replies] = dep.popen(vm, bc.count_command(bc.CountParams(
                    "eth0", kind, dep.ip(src), target, seconds + _slack(dep), marker, replies), native),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for replies, counter in counters.items():
                ready, _, _ = select.select([counter.stdout], [], [], start_timeout(dep))
                if not ready:
                    raise RuntimeError(f"broadcast counter in {src if replies else dst} did not start")
                counter.stdout.readline()
            sent = bc.parse(dep.exec(src, bc.send_command(bc.SendParams(
                "eth0", kind, dep.ip(src), target, rate_pps, seconds, marker), native),
                timeout=seconds + 30).stdout)
            got, answered = (_counted(counters[r], src if r else dst, seconds + _slack(dep) + 10)
                             for r in (False, True))
        finally:
            for counter in counters.values():
                if counter.poll() is None:
                    counter.kill()
                    counter.wait()
    n = sent["sent"]
    lost = lambda k: max(0.0, 100.0 * (n - min(k, n)) / n) if n else 100.0
    return ({"loss_pct": lost(got["received"]), "answered_loss_pct": lost(answered["received"]),
             "sent": n, "received": got["received"], "answered": answered["received"],
             "achieved_pps": sent["achieved_pps"]}, {})


def _counted(counter, vm: str, timeout: float) -> dict:
    """The counter's result; a counter that printed none says why (its exit status and
    the end of its stderr: a guest's SSH session, the tool's own error)."""
    out, err = counter.communicate(timeout=timeout)
    try:
        return bc.parse(out)
    except ValueError:
        raise RuntimeError(f"broadcast counter in {vm} printed no result (exit {counter.returncode}): "
                           f"stdout {out.strip()[-300:]!r}, stderr {err.strip()[-500:]!r}") from None


@contextmanager
def _answering_broadcast_echo(dep, vm: str, on: bool):
    """VM answers echo requests sent to a broadcast address while the body runs (Linux
    ignores them by default: icmp_echo_ignore_broadcasts); the old value is put back."""
    key = "net.ipv4.icmp_echo_ignore_broadcasts"
    if not on:
        yield
        return
    old = dep.exec(vm, ["sysctl", "-n", key]).stdout.strip() or "1"
    dep.exec(vm, ["sysctl", "-q", "-w", f"{key}=0"])
    try:
        yield
    finally:
        dep.exec(vm, ["sysctl", "-q", "-w", f"{key}={old}"])
