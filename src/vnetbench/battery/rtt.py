"""ICMP RTT: single-packet time-deferred (slow path), steady-state flood, payload sweep.

'deferred' sends one echo at a time and, before each, empties the vSwitch's
datapath flow cache (OVS ``dpctl/del-flows``; on ``ovs-openflow`` also the
controller's reactive flows, so the echo takes the packet-ins) -- the same effect as
waiting out the flow idle timeout, without waiting -- unless ``gap_s`` is used to
really wait.
"""

from __future__ import annotations

import statistics
import time

from vnetbench.battery.common import repeat, result
from vnetbench.results.record import now
from vnetbench.results.stats import percentiles
from vnetbench.traffic import ping

MODES = ("deferred", "flood")


def run(dep, pair, mode="flood", count=100, interval_s=0.01, payload=56, gap_s=0.0,
        flush_flows=True, repetitions=3):
    if mode not in MODES:
        raise ValueError(f"icmp_rtt: mode {mode!r} is unknown; use one of {', '.join(MODES)}")
    src, dst = pair.vms
    started = now()
    measure = (lambda: _deferred(dep, src, dst, count, payload, gap_s, flush_flows)) \
        if mode == "deferred" else (lambda: _flood(dep, src, dst, count, interval_s, payload))
    samples, extras = repeat(dep, repetitions, measure)
    params = {"mode": mode, "count": count, "interval_s": interval_s, "payload": payload,
              "gap_s": gap_s, "flush_flows": flush_flows}
    return result(dep, pair, "icmp_rtt", params, samples, extras, started)


def sweep(dep, pair, payloads=None, count=50, interval_s=0.01, repetitions=3):
    """RTT vs payload (000_...): sizes up to what the tenant MTU carries unfragmented."""
    top = dep.testbed.network.tenant_mtu - 28
    payloads = payloads or [s for s in (16, 64, 256, 512, 1024, 1472, 4096, 8972) if s <= top] + [top]
    return [run(dep, pair, "flood", count, interval_s, p, repetitions=repetitions)
            for p in sorted(set(p for p in payloads if p <= top))]


def _flood(dep, src, dst, count, interval_s, payload):
    params = ping.PingParams(dest=dep.ip(dst), count=count, interval_s=interval_s, payload=payload)
    out = dep.exec(src, ping.command(params), timeout=count * max(interval_s, 0.001) + 30)
    return _metrics(ping.parse(out.stdout))


def _deferred(dep, src, dst, count, payload, gap_s, flush_flows):
    rtts, lost = [], 0
    for _ in range(count):
        if flush_flows:
            _flush(dep)
        if gap_s:
            time.sleep(gap_s)
        params = ping.PingParams(dest=dep.ip(dst), count=1, payload=payload, reply_timeout_s=2)
        res = ping.parse(dep.exec(src, ping.command(params), timeout=10).stdout)
        rtts += res["samples_ms"]
        lost += res["transmitted"] - res["received"]
    return _metrics({"samples_ms": rtts, "transmitted": count, "received": count - lost})


def _flush(dep):
    """Empty the flow caches (and a reactive controller's flows: it sets them up again)
    so the next packet takes the slow path."""
    dep.expire_flows()


def _metrics(res):
    xs = res["samples_ms"]
    tx = res["transmitted"]
    metrics = {"loss_pct": 100.0 * (tx - res["received"]) / tx if tx else 100.0,
               "rtt_mean_ms": statistics.fmean(xs) if xs else None,
               "rtt_sd_ms": statistics.stdev(xs) if len(xs) > 1 else None,
               "rtt_min_ms": min(xs) if xs else None, "rtt_max_ms": max(xs) if xs else None}
    metrics.update({f"rtt_{k}_ms": v for k, v in percentiles(xs).items()})
    return metrics, {"rtt_samples_ms": xs}
