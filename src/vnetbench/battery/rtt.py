"""ICMP RTT: single-packet time-deferred, steady-state flood, payload sweep.

'deferred' sends one echo at a time, each as after ``defer_s`` seconds of silence on
the path: before each echo the battery empties exactly the flow state the *modelled*
system would have let go in that time (vnetbench.testbed.flowstate: Floodlight's
reactive flows after 5 s, an OVS datapath's cached flows after 10 s; a vRouter's flows
live 180 s, so its echo meets an existing flow) -- the same effect as waiting, without
waiting. ``gap_s`` really waits (then the running system's own timers decide, and with
``flush_flows`` false nothing is emptied). The record's params say which layers were
emptied (``expired``).
"""

from __future__ import annotations

import statistics
import time

from vnetbench.battery.common import repeat, result
from vnetbench.results.record import now
from vnetbench.testbed import flowstate
from vnetbench.results.stats import percentiles
from vnetbench.traffic import ping

MODES = ("deferred", "flood")


def run(dep, pair, mode="flood", count=100, interval_s=0.01, payload=56, gap_s=0.0,
        flush_flows=True, repetitions=3, defer_s=flowstate.DEFER_S):
    if mode not in MODES:
        raise ValueError(f"icmp_rtt: mode {mode!r} is unknown; use one of {', '.join(MODES)}")
    src, dst = pair.vms
    started = now()
    expired = flowstate.expiring(dep.testbed, defer_s) if flush_flows else ()
    measure = (lambda: _deferred(dep, src, dst, count, payload, gap_s, expired)) \
        if mode == "deferred" else (lambda: _flood(dep, src, dst, count, interval_s, payload))
    samples, extras = repeat(dep, repetitions, measure)
    params = {"mode": mode, "count": count, "interval_s": interval_s, "payload": payload,
              "gap_s": gap_s, "flush_flows": flush_flows}
    if mode == "deferred":
        params.update(defer_s=defer_s, expired=[s.label() for s in expired],
                      kept=[s.label() for s in flowstate.layers(dep.testbed) if s not in expired])
    return result(dep, pair, "icmp_rtt", params, samples, extras, started)


def sweep(dep, pair, payloads=None, count=50, interval_s=0.01, repetitions=3):
    """RTT vs payload (000_...): sizes up to what the tenant MTU carries unfragmented."""
    top = dep.testbed.network.tenant_mtu - 28
    payloads = payloads or [s for s in (16, 64, 256, 512, 1024, 1472, 4096, 8972) if s <= top] + [top]
    return [run(dep, pair, "flood", count, interval_s, p, repetitions=repetitions)
            for p in sorted(set(p for p in payloads if p <= top))]


def _flood(dep, src, dst, count, interval_s, payload):
    params = ping.PingParams(dest=dep.reach(src, dst), count=count, interval_s=interval_s, payload=payload)
    out = dep.exec(src, ping.command(params), timeout=count * max(interval_s, 0.001) + 30)
    return _metrics(ping.parse(out.stdout))


def _deferred(dep, src, dst, count, payload, gap_s, expired):
    rtts, lost = [], 0
    for _ in range(count):
        if expired:
            dep.expire_flows([s.layer for s in expired])
        if gap_s:
            time.sleep(gap_s)
        params = ping.PingParams(dest=dep.reach(src, dst), count=1, payload=payload, reply_timeout_s=2)
        res = ping.parse(dep.exec(src, ping.command(params), timeout=10).stdout)
        rtts += res["samples_ms"]
        lost += res["transmitted"] - res["received"]
    return _metrics({"samples_ms": rtts, "transmitted": count, "received": count - lost})


def _metrics(res):
    xs = res["samples_ms"]
    tx = res["transmitted"]
    metrics = {"loss_pct": 100.0 * (tx - res["received"]) / tx if tx else 100.0,
               "rtt_mean_ms": statistics.fmean(xs) if xs else None,
               "rtt_sd_ms": statistics.stdev(xs) if len(xs) > 1 else None,
               "rtt_min_ms": min(xs) if xs else None, "rtt_max_ms": max(xs) if xs else None}
    metrics.update({f"rtt_{k}_ms": v for k, v in percentiles(xs).items()})
    return metrics, {"rtt_samples_ms": xs}
