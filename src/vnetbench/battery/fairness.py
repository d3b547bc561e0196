"""Fairness of competing UDP flows through one bottleneck (seed 000 §4.2.3 / §5.2.3):
k flows with set offered rates -> one receiver VM, per-flow received throughput and
Jain's fairness index.

* **Bottleneck**: a TBF qdisc on the receiver VM's host-side veth (egress = toward
  the receiver), installed with ``tc`` in that host's namespace for the duration of
  ``run()`` and removed afterwards (it lives in the run's namespace, so teardown
  removes it anyway). The seed's bottleneck was a 10/100 Mbit/s link; the default
  here is 100 Mbit/s with the seed's Fast Ethernet settings (70/70, 40/80, 30/90,
  70/90, 50/80; 40/40/40, 40/40/80, 80/80/80 Mbit/s). TBF counts the L2 frame
  without FCS (Ethernet 14 + IPv4 20 + UDP 8 + payload), iperf3 rates count UDP
  payload bits, so the bottleneck carries ``bottleneck * payload / (payload + 42)``
  payload bits/s (``payload_capacity_bps``); shares and utilisation use that.
  The qdisc's counters (sent, drops, overlimits) over each repetition are recorded:
  with OVS's userspace datapath the excess is dropped by OVS (the TBF backpressures
  its AF_PACKET socket), so qdisc drops can stay 0 while iperf3 sees the loss.
* **Flows**: iperf3 UDP clients with distinct ports (servers on the receiver, ports
  5301..5300+k), all started together. ``sources='pair'`` (default): **all flows
  share one source VM** (the pair's), i.e. one guest stack and one vNIC feed the
  vSwitch; ``sources='host'``: flows round-robin over the VMs on the source's host
  that have a NIC on the pair's vnet (the receiver excluded), so the placement
  (same-host / cross-host) is unchanged -- the seed had one PC per flow. The VMs
  actually used are recorded per flow. Clients start a few ms apart (one process each).
* **Optional CBR background flow** (``background_bps``, port 5300) from the pair's
  source VM through the same bottleneck; it counts in the max-min and proportional
  shares but not in the Jain indices of the test flows.
* **Metrics** per setting: per-flow received Mbit/s and loss (receiver side),
  ``jain_index`` over the received rates (1 = equal, 1/k = one flow takes all),
  ``jain_maxmin`` over received / max-min fair share (1 = max-min fair: what a fair
  queue would give), ``jain_proportional`` over received / demand-proportional share
  (1 = every flow lost the same fraction: what a FIFO tail-drop bottleneck gives and
  what the seed calls "proportionally fair"), ``total_mbps`` received by the test
  flows, ``utilization_pct`` of the bottleneck's payload capacity (background
  included), aggregate ``loss_pct``, vSwitch CPU% over the flows' window.
"""

from __future__ import annotations

import json
import subprocess
from contextlib import ExitStack

from vnetbench import cpu
from vnetbench.battery.common import collect, not_applicable, result
from vnetbench.battery.session import iperf3_server
from vnetbench.results.record import now
from vnetbench.testbed.model import NORTH_SOUTH
from vnetbench.traffic import iperf3

FLOW_PORT_BASE = 5301
BACKGROUND_PORT = 5300
TBF_L2_OVERHEAD = 42         # what TBF counts on a veth besides the UDP payload (no FCS)
SOURCES = ("pair", "host")
M = 1_000_000
SEED_SETTINGS = ((70 * M, 70 * M), (40 * M, 80 * M), (30 * M, 90 * M), (70 * M, 90 * M),
                 (50 * M, 80 * M), (40 * M, 40 * M, 40 * M), (40 * M, 40 * M, 80 * M),
                 (80 * M, 80 * M, 80 * M))


# -- pure ------------------------------------------------------------------------------

def jain(xs) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one
    has everything. None for no values or all zero (undefined)."""
    xs = [float(x) for x in xs]
    if any(x < 0 for x in xs):
        raise ValueError(f"Jain's index needs non-negative values, got {xs}")
    sq = sum(x * x for x in xs)
    if not xs or sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def maxmin_shares(demands, capacity: float) -> list:
    """Max-min fair allocation of ``capacity`` (water-filling): nobody gets more than it
    asks; what the small flows leave is split equally among the rest."""
    if capacity < 0 or any(d < 0 for d in demands):
        raise ValueError("capacity and demands must be >= 0")
    shares = [0.0] * len(demands)
    left = float(capacity)
    todo = sorted(range(len(demands)), key=lambda i: demands[i])
    while todo:
        equal = left / len(todo)
        i = todo[0]
        if demands[i] <= equal:
            shares[i] = float(demands[i])
            left -= demands[i]
            todo.pop(0)
        else:
            for j in todo:
                shares[j] = equal
            break
    return shares


def proportional_shares(demands, capacity: float) -> list:
    """Each flow gets the same fraction of its demand (all of it when it fits)."""
    total = sum(demands)
    if total <= capacity:
        return [float(d) for d in demands]
    return [d * capacity / total for d in demands]


def payload_capacity_bps(bottleneck_bps: float, payload: int) -> float:
    """UDP payload bits/s a TBF of ``bottleneck_bps`` passes (it counts payload + 42 B)."""
    return bottleneck_bps * payload / (payload + TBF_L2_OVERHEAD)


def tbf_burst_bytes(rate_bps: float, mtu: int) -> int:
    """Bucket depth: 10 ms at the rate, at least 10 full frames."""
    return int(max(rate_bps / 8 * 0.010, 10 * (mtu + 14)))


def tbf_command(dev: str, rate_bps: float, burst_bytes: int, latency_ms: float) -> list:
    return ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(rate_bps)}bit",
            "burst", str(int(burst_bytes)), "latency", f"{latency_ms:g}ms"]


def pick_sources(testbed, pair, k: int, sources: str = "pair") -> list:
    """The VM each of the k flows comes from (see the module docstring)."""
    if sources not in SOURCES:
        raise ValueError(f"fairness: sources {sources!r} is unknown; use one of {', '.join(SOURCES)}")
    src, dst = pair.vms
    if sources == "pair":
        return [src] * k
    host = testbed.vm(src).host
    mates = [v.name for v in testbed.vms_on(host) if v.name not in (src, dst)
             and any(n.vnet == pair.vnet for n in v.nics)]
    pool = [src] + mates
    return [pool[i % len(pool)] for i in range(k)]


def label(rates) -> str:
    return "/".join(f"{r / M:g}" for r in rates) + " Mbit/s"


# -- the test --------------------------------------------------------------------------

def run(dep, pair, settings=SEED_SETTINGS, bottleneck_bps=100 * M, seconds=10, length=None,
        background_bps=None, repetitions=3, sources="pair", qdisc_latency_ms=50.0):
    """One Result per setting (a tuple of per-flow offered rates, UDP payload bits/s).

    ``length``: UDP payload bytes (default: what the tenant MTU carries)."""
    settings = [tuple(float(r) for r in s) for s in settings]
    if not settings or any(not s or any(r <= 0 for r in s) for s in settings):
        raise ValueError(f"fairness: settings must be non-empty lists of rates > 0: {settings}")
    if bottleneck_bps <= 0:
        raise ValueError(f"fairness: bottleneck_bps must be > 0, not {bottleneck_bps}")
    if background_bps is not None and background_bps <= 0:
        raise ValueError(f"fairness: background_bps must be > 0 or None, not {background_bps}")
    if pair.path == NORTH_SOUTH:        # the bottleneck is the receiving VM's port: none outside
        return [not_applicable(dep, pair, "udp_fairness", "the bottleneck is shaped on the receiving VM's "
                               f"port; pair {pair.name}'s receiver is the external host {pair.vms[1]!r}")]
    mtu = dep.testbed.network.tenant_mtu
    length = length or mtu - 28
    with dep.shaped_port(*receiver_nic(dep.testbed, pair)) as (host, port):
        return _run(dep, pair, settings, bottleneck_bps, seconds, length, background_bps, repetitions,
                    sources, qdisc_latency_ms, mtu, host, port)


def _run(dep, pair, settings, bottleneck_bps, seconds, length, background_bps, repetitions, sources,
         qdisc_latency_ms, mtu, host, port):
    dst = pair.vms[1]
    burst = tbf_burst_bytes(bottleneck_bps, mtu)
    qdisc = tbf_command(port, bottleneck_bps, burst, qdisc_latency_ms)
    capacity = payload_capacity_bps(bottleneck_bps, length)
    out = []
    _tc(dep, host, qdisc)
    try:
        for rates in settings:
            started = now()
            srcs = pick_sources(dep.testbed, pair, len(rates), sources)
            demands = list(rates) + ([background_bps] if background_bps else [])
            mm = maxmin_shares(demands, capacity)[:len(rates)]
            prop = proportional_shares(demands, capacity)[:len(rates)]
            samples, extras = collect(repetitions, lambda: _one(
                dep, dst, srcs, rates, seconds, length, background_bps, pair.vms[0], host, port,
                mm, prop, capacity))
            params = {"offered_bps": list(rates), "flows": len(rates), "sources": sources,
                      "source_vms": srcs, "shared_source_vm": len(set(srcs)) == 1,
                      "bottleneck_bps": bottleneck_bps, "bottleneck": "tbf on the receiver's "
                      "host-side veth (egress toward the receiver)", "qdisc": " ".join(qdisc[2:]),
                      "payload_capacity_bps": capacity, "length": length, "seconds": seconds,
                      "background_bps": background_bps, "rate_unit": "UDP payload bits/s",
                      "maxmin_share_bps": mm, "proportional_share_bps": prop}
            r = result(dep, pair, "udp_fairness", params, samples, extras, started)
            r.labels["point"] = label(rates)
            out.append(r)
    finally:
        _tc(dep, host, ["tc", "qdisc", "del", "dev", port, "root"], check=False)
    return out


def receiver_nic(testbed, pair) -> tuple[str, int]:
    """(receiver VM, index of its NIC on the pair's vnet: the peer's, across a router)."""
    dst = pair.vms[1]
    return dst, [n.vnet for n in testbed.vm(dst).nics].index(pair.peer_vnet or pair.vnet)


def receiver_port(dep, pair) -> tuple[str, str]:
    """(host, host-side veth) of the receiver VM's NIC on the pair's vnet."""
    return dep.vm_port(*receiver_nic(dep.testbed, pair))


def _tc(dep, host, argv, check=True) -> str:
    done = subprocess.run(dep.host_argv(host, argv), capture_output=True, text=True, timeout=15,
                          stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} on host {host}: exit {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()}")
    return done.stdout


def _qdisc_stats(dep, host, port) -> dict:
    try:
        root = [q for q in json.loads(_tc(dep, host, ["tc", "-s", "-j", "qdisc", "show", "dev", port]))
                if q.get("root")]
    except (RuntimeError, ValueError):
        return {}
    return {k: root[0].get(k) for k in ("kind", "packets", "bytes", "drops", "overlimits")} \
        if root else {}


def _one(dep, dst, srcs, rates, seconds, length, background_bps, bg_src, host, port, mm, prop,
         capacity):
    flows = [(FLOW_PORT_BASE + i, src, rate) for i, (src, rate) in enumerate(zip(srcs, rates))]
    if background_bps:
        flows.insert(0, (BACKGROUND_PORT, bg_src, background_bps))
    outputs = {}
    with ExitStack() as stack:
        for p, _, _ in flows:
            stack.enter_context(iperf3_server(dep, dst, p))
        before = _qdisc_stats(dep, host, port)
        with cpu.Window(dep) as window:
            clients = [(p, dep.popen(src, iperf3.client_command(iperf3.ClientParams(
                dest=dep.reach(src, dst), port=p, seconds=seconds, protocol="udp",
                bitrate_bps=int(rate), length=length)), stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True)) for p, src, rate in flows]
            try:
                for p, c in clients:
                    outputs[p], _ = c.communicate(timeout=seconds + 30)
            finally:
                for _, c in clients:
                    if c.poll() is None:
                        c.kill()
                        c.communicate()
        after = _qdisc_stats(dep, host, port)
    per = []
    for (p, src, rate), share, pshare in zip(flows[-len(rates):], mm, prop):
        res = iperf3.parse(outputs[p])
        per.append({"port": p, "source_vm": src, "offered_bps": rate, "maxmin_share_bps": share,
                    "proportional_share_bps": pshare, "rx_bps": res["bits_per_second"],
                    "loss_pct": res["lost_percent"], "packets": res["packets"],
                    "lost_packets": res["lost_packets"]})
    rx = [f["rx_bps"] for f in per]
    bg = iperf3.parse(outputs[BACKGROUND_PORT]) if background_bps else None
    through = sum(rx) + (bg["bits_per_second"] if bg else 0.0)
    metrics = {"jain_index": jain(rx),
               "jain_maxmin": jain([x / s for x, s in zip(rx, mm) if s > 0]),
               "jain_proportional": jain([x / s for x, s in zip(rx, prop) if s > 0]),
               "total_mbps": sum(rx) / M, "utilization_pct": 100.0 * through / capacity,
               "loss_pct": 100.0 * sum(f["lost_packets"] for f in per)
               / max(1, sum(f["packets"] for f in per))}
    for i, f in enumerate(per):
        metrics[f"flow{i + 1}_mbps"] = f["rx_bps"] / M
        metrics[f"flow{i + 1}_loss_pct"] = f["loss_pct"]
    extra = {"flows": per, "cpu": window.result}
    if bg:
        metrics["background_mbps"] = bg["bits_per_second"] / M
        extra["background"] = {"offered_bps": background_bps, "rx_bps": bg["bits_per_second"],
                               "loss_pct": bg["lost_percent"], "source_vm": bg_src}
    if before and after:
        extra["qdisc"] = {**{k: after[k] for k in ("kind",)},
                          **{k: (after[k] or 0) - (before[k] or 0)
                             for k in ("packets", "bytes", "drops", "overlimits")}}
        metrics["qdisc_drops"] = extra["qdisc"]["drops"]
    metrics.update(window.metrics())
    return metrics, extra
