"""What one step of a scale run says about its pairs together, and where a host saturates.

Per step (pure, from per-pair results): the sum over the pairs that ran (the aggregate),
the per-pair distribution (min, p5, p50, p95; nearest-rank percentiles, so with fewer
than 20 pairs p5 is the lowest pair), Jain's index across pairs, the pairs' loss, latency under load (p50/p99 over every echo of every pair), and the pairs that
failed, by name and reason. A failed pair is never a silently smaller sum: the step
says how many of how many ran.

Saturation (per host): the first step after which the aggregate grows by less than
``GROWTH`` while that host's data plane is at its ceiling, by the rule that marks
emulation-bound cells (vnetbench.results.bound): its data-plane CPU at ``SATURATED_PCT``
of the CPUs the host has, or the host's CPUs that busy with anything (guests, iperf3) and
the data plane at least ``DOMINANT`` of it -- on a host whose one CPU the VMs share, the
vSwitch never reaches 90% and still is what the CPU ran out on. More pairs then buy
nothing because that host's vSwitch has no CPU left. A plateau otherwise is not the
vSwitch's (the workload, a guest or the fabric limits), and says so.
"""

from __future__ import annotations

from vnetbench.battery.fairness import jain
from vnetbench.results.bound import DOMINANT, SATURATED_PCT
from vnetbench.results.stats import percentiles

GROWTH = 0.10          # less than 10% more aggregate for the next step: no longer growing


def step(pairs: list[dict], metric: str) -> dict:
    """``pairs``: [{pair, ok, <metric>, loss_pct?, rtt_ms?: [...], error?}] of one step."""
    ran = [p for p in pairs if p.get("ok") and p.get(metric) is not None]
    failed = [{"pair": p["pair"], "error": p.get("error") or f"no {metric}"}
              for p in pairs if p not in ran]
    xs = [float(p[metric]) for p in ran]
    out = {"pairs": len(pairs), "ran": len(ran), "failed": failed,
           "sum": sum(xs) if xs else None, "min": min(xs) if xs else None,
           "jain": jain(xs) if len(xs) > 1 else None}
    out.update(percentiles(xs, (5, 50, 95)))
    losses = [p["loss_pct"] for p in ran if p.get("loss_pct") is not None]
    out["loss_pct_max"] = max(losses) if losses else None
    out["loss_pct_mean"] = sum(losses) / len(losses) if losses else None
    rtts = [x for p in ran for x in p.get("rtt_ms") or ()]
    lat = percentiles(rtts, (50, 99)) if rtts else {}
    out["rtt_p50_ms"], out["rtt_p99_ms"] = lat.get("p50"), lat.get("p99")
    out["echoes"] = len(rtts)
    return out


def saturation(steps: list[dict]) -> dict:
    """{host: {"step": pair count or None, "why": one line}} from ``steps`` ordered by pair
    count: [{pairs, sum, hosts: {host: {dataplane_pct, cpus, busy_pct?}}}]."""
    hosts = sorted({h for s in steps for h in s.get("hosts", {})})
    out = {}
    for h in hosts:
        out[h] = {"step": None, "why": "the aggregate kept growing at every step"}
        plateau = False
        for cur, nxt in zip(steps, steps[1:]):
            if cur.get("sum") is None or nxt.get("sum") is None:
                continue
            flat = nxt["sum"] < cur["sum"] * (1 + GROWTH)
            cpu = (nxt.get("hosts", {}).get(h) or {})
            dp, busy = cpu.get("dataplane_pct"), cpu.get("busy_pct")
            if cpu.get("cpus") is None and "cpus" in cpu:   # a cloud's compute node: no ceiling known
                at_ceiling = False
                host = f"{h}'s data plane used {_n(dp)}% of a CPU (its CPUs are the cloud's: no ceiling known)"
            else:
                ncpu = max(1, cpu.get("cpus") or 1)
                ceiling = SATURATED_PCT / 100 * 100.0 * ncpu
                at_ceiling = dp is not None and (dp >= ceiling or (
                    busy is not None and busy >= ceiling and dp >= DOMINANT * busy))
                host = f"{h}'s data plane used {_n(dp)}% of its {ncpu} CPU(s), {_n(busy)}% busy in all"
            if flat and at_ceiling:
                out[h] = {"step": cur["pairs"],
                          "why": f"{nxt['pairs']} pairs gave {_pct(nxt['sum'], cur['sum'])} the "
                                 f"aggregate of {cur['pairs']} while {host}"}
                break
            if flat and not plateau:
                plateau = True
                out[h]["plateau"] = cur["pairs"]
                out[h]["why"] = (f"the aggregate stopped growing after {cur['pairs']} pairs while "
                                 f"{host}: not this host's vSwitch")
    return out


def _n(x) -> str:
    return "?" if x is None else f"{x:.0f}"


def _pct(a: float, b: float) -> str:
    return f"{100.0 * a / b:.0f}% of" if b else "n/a of"
