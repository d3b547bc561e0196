"""Result records -> a capacity profile: what one host's vSwitch carries, per kind x
network type x role, with the CPU it costs and every figure's spread.

**Roles.** A host's vSwitch does different work for a pair whose ends are on two hosts
(the sender's host encapsulates: ``tx``; the receiver's decapsulates: ``rx``) and for a
pair on one host (``same``: no tunnel). The scale family (``VnetBench.scale``) records,
per step and repetition, every pair's figure with its hosts and every host's data-plane
CPU; a host whose pairs in that step all play one role gives one point of that role's
curve: (its load, Gbit/s; its data-plane CPU, %). ``single_room`` steps give tx and rx
points, ``double_room`` steps same points; ``mixed_room`` hosts mix roles and give none.

**Two kinds of point.** Steps at an offered load (the scale family's ``pair_gbps``: each
pair paced) give the CPU the data plane spends on a known load -- what a planner needs,
since a workload is an offered load; steps as fast as the streams go give where the host
saturates. The CPU per Gbit/s of the two differs (a saturating stream batches more; on
this machine, the userspace datapath costs ~28% of a CPU at 0.1 Gbit/s offered and ~56%
at 0.9 Gbit/s unlimited), so ``points`` holds the offered-load curve when there is one and
``unlimited_points`` the other.

**Capacity of a role** (Gbit/s one host carries in that role alone, with the CPUs it had):
the load at the host's saturation point when the scale family found one (``saturated``:
a measured ceiling, ``vnetbench.scale.aggregate.saturation``); otherwise the highest
measured load's CPU cost extrapolated to the ceiling (``extrapolated``, with the measured
range stated: a planner must not treat it as measured).

**Single-pair figures** from the battery (``compare``): Gbit/s and packets/s per
data-plane CPU (``tcp_stream`` at its largest MSS, ``udp_stream`` at its highest packet
rate), and new connections/s (``flow_setup``: the highest offered rate every repetition
carried without a failed or late connection; the next rate tried, which did not, is its
upper bound).

**The machine** (``machine``: CPU model, kernel, architecture, backend, OVS datapath and port
type, ``vnetbench.capacity.machine``): every cell says the one it was measured on, since a
vSwitch's capacity belongs to that hardware. Records of one cell from several machines are
refused (``MixedMachines``, exit 2) rather than averaged into figures of no machine; cells
of different machines may share a profile (each states its own; ``provenance.machines``
lists them all).

Every figure keeps the spread ``vnetbench.results.spread`` gives it; a figure whose
repetitions disagree is named in the cell's ``unstable`` list and the profile says
``stable: false``. Pure: records in, a document out.
"""

from __future__ import annotations

import time
from collections import defaultdict

from vnetbench import __version__
from vnetbench.capacity import machine
from vnetbench.results import spread
from vnetbench.results.bound import SATURATED_PCT

ROLES = ("tx", "rx", "same")
# a load (Gbit/s) or CPU (%) below this divides nothing: a ratio to a denormal is infinite
TINY = 1e-6
# how records of one cell measured in several runs (RESULTS arguments) become one figure
COMBINED = ("records of one cell from every run are pooled: a scale point's repetitions "
            "together, the flow-setup rate carried only if every run carried it, the single-pair "
            "figure from the fastest record of any run")
VERSION = 1


def build(records, sources=()) -> dict:
    """The profile document of ``records`` (Result objects of any families; those that
    say nothing about capacity are ignored)."""
    cells: dict[tuple, dict] = {}
    for r in records:
        key = cell_key(r)
        if key is None:
            continue
        cell = cells.setdefault(key, {"scale": [], "compare": []})
        cell["scale" if r.test == "scale" else "compare"].append(r)
    out = []
    for key in sorted(cells, key=lambda k: tuple(str(x) for x in k)):
        cell = _cell(key, cells[key])
        if cell is not None:
            out.append(cell)
    machines = {tuple(c["machine"].items()) for c in out}
    return {
        "vnetbench_capacity": VERSION,
        "provenance": {"built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "vnetbench": __version__, "sources": [str(s) for s in sources],
                       "machines": [dict(m) for m in sorted(machines, key=str)],
                       "ceiling_pct": SATURATED_PCT,
                       **({"combined": COMBINED} if len(sources) > 1 else {})},
        "stable": not any(c["unstable"] for c in out),
        "cells": out,
    }


FAMILIES = ("scale", "tcp_stream", "udp_stream", "flow_setup")


def cell_key(r):
    """What a figure depends on: kind, network type, backend, datapath, MTU (None: a
    record that says nothing about capacity)."""
    if r.test not in FAMILIES:
        return None
    if r.test == "scale" and r.labels.get("params", {}).get("test") not in ("tcp", "udp"):
        return None
    p, lab = r.provenance, r.labels
    return (lab.get("vswitch"), lab.get("network"), p.get("backend") or "unknown",
            p.get("ovs_datapath"), p.get("tenant_mtu"), p.get("underlay_mtu"),
            p.get("security_groups") or "off")


def _cell(key, recs) -> dict | None:
    vswitch, network, backend, datapath, tenant_mtu, underlay_mtu, sg = key
    roles = {role: r for role, r in _roles(recs["scale"]).items() if r}
    single = _single_pair(recs["compare"])
    conn = single.pop("new_conn_s")
    if not roles and not single:
        return None
    kernel = next((r.provenance.get("kernel") for r in recs["scale"] + recs["compare"]), None)
    # the one machine the figures were measured on (several: refused, see module doc)
    where = f"cell {vswitch}/{network} ({backend}, datapath {datapath or 'kernel'})"
    measured_on = machine.of_records([r.provenance for r in recs["scale"] + recs["compare"]], where)
    cell = {"vswitch": vswitch, "network": network, "backend": backend, "datapath": datapath,
            "tenant_mtu": tenant_mtu, "underlay_mtu": underlay_mtu, "security_groups": sg,
            "kernel": kernel, "machine": measured_on, "roles": roles, "single_pair": single}
    if conn:
        cell["new_conn_s"] = conn
    cell["unstable"] = sorted(_unstable(cell))
    return cell


def _roles(scale_records) -> dict:
    """role -> {dataplane_cpus, points, capacity_gbps, saturation} from scale steps."""
    samples: dict = defaultdict(lambda: defaultdict(lambda: {"load": [], "cpu": [], "busy": [], "cpus": set()}))
    saturated: dict = defaultdict(list)      # role -> [((host's pairs, pace), why)]
    plateaus: dict = defaultdict(list)
    for r in scale_records:
        paced = (r.labels.get("params") or {}).get("pair_bps")
        pace = tuple(paced) if paced else None
        sat = r.extra.get("saturation") or {}
        for rep in r.extra.get("repetitions") or []:
            roles = host_roles(rep.get("pairs") or [])
            for host, cpu in (rep.get("hosts") or {}).items():
                role, load, n = roles.get(host, (None, 0.0, 0))
                if role is None or cpu.get("dataplane_pct") is None or cpu.get("cpus") is None:
                    continue
                step = (n, pace)          # a point: this many pairs through the host, so paced
                s = samples[role][step]
                s["load"].append(load)
                s["cpu"].append(cpu["dataplane_pct"])
                s["cpus"].add(cpu["cpus"])
                if cpu.get("busy_pct") is not None:
                    s["busy"].append(cpu["busy_pct"])
                mine = sat.get(host) or {}
                if mine.get("step") == r.labels.get("pairs"):
                    saturated[role].append((step, mine.get("why")))
                elif mine.get("plateau") == r.labels.get("pairs"):
                    plateaus[role].append((step, mine.get("why")))
    return {role: _role(samples[role], saturated.get(role, []), plateaus.get(role, []))
            for role in ROLES if role in samples}


def host_roles(pairs: list[dict]) -> dict:
    """host -> host_role(host, pairs) for every host the pairs name, in one pass (a step
    of thousands of hosts and pairs costs their sum, not their product)."""
    acc: dict = {}
    for p in pairs:
        if not p.get("ok") or p.get("gbps") is None or len(p.get("hosts") or ()) != 2:
            continue
        a, b = p["hosts"]
        for host, role in ((a, "same"),) if a == b else ((a, "tx"), (b, "rx")):
            roles, load, n = acc.get(host, (set(), 0.0, 0))
            roles.add(role)
            acc[host] = (roles, load + float(p["gbps"]), n + 1)
    return {h: ((next(iter(r)) if len(r) == 1 else None), load, n) for h, (r, load, n) in acc.items()}


def host_role(host: str, pairs: list[dict]) -> tuple[str | None, float, int]:
    """(role, Gbit/s, pairs) of ``host`` in one repetition of a step: the role when every
    pair that ran through it plays the same one, else (None, load, pairs)."""
    load, roles, n = 0.0, set(), 0
    for p in pairs:
        if not p.get("ok") or p.get("gbps") is None or host not in (p.get("hosts") or ()):
            continue
        a, b = p["hosts"]
        roles.add("same" if a == b else "tx" if a == host else "rx")
        load += float(p["gbps"])
        n += 1
    return (roles.pop() if len(roles) == 1 else None), load, n


def _role(steps: dict, saturated: list, plateaus=()) -> dict | None:
    cpus = {c for s in steps.values() for c in s["cpus"]}
    if len(cpus) != 1:          # hosts of different sizes in one cell: no one capacity
        return None
    ncpu = cpus.pop()
    points = []
    for (pairs, paced), s in steps.items():
        load, cpu = spread.repetitions(s["load"]), spread.repetitions(s["cpu"], spread.PCT_FLOOR)
        cost = spread.repetitions([c / x for c, x in zip(s["cpu"], s["load"]) if x > TINY])
        points.append({"pairs": pairs, "offered": ("unlimited" if paced is None else
                                                   "+".join(f"{b / 1e9:g}" for b in paced) + " Gbit/s a pair"),
                       "load_gbps": figure(load), "cpu_pct": figure(cpu),
                       "pct_per_gbps": figure(cost),
                       "busy_pct": figure(spread.repetitions(s["busy"], spread.PCT_FLOOR)) if s["busy"] else None})
    paced = _rising([p for p in points if p["offered"] != "unlimited"])
    streams = _rising([p for p in points if p["offered"] == "unlimited"])
    if not paced and not streams:
        return None
    # the planner's load is an offered one: the CPU at offered loads predicts it; streams
    # as fast as they go batch differently (and show where the host saturates)
    out = {"dataplane_cpus": ncpu, "points": paced or streams,
           "points_from": "offered loads (pair_gbps)" if paced else "unlimited streams (no pair_gbps steps)"}
    if paced and streams:
        out["unlimited_points"] = streams
    ceiling = SATURATED_PCT * ncpu
    if saturated:
        at, why = _at(points, saturated, streams or paced)
        out["capacity_gbps"] = {**at["load_gbps"], "how": "saturated", "step": at["pairs"], "why": why}
    else:
        top = (streams or paced)[-1]
        cost = top["pct_per_gbps"]["mean"]
        if not cost:            # a data plane that cost nothing measurable: no ceiling to reach
            return None
        if plateaus:        # the aggregate stopped growing with the vSwitch below its ceiling
            at, why = _at(points, plateaus, streams or paced)
            out["plateau_gbps"] = {**at["load_gbps"], "pairs": at["pairs"], "why": why}
        out["capacity_gbps"] = {
            "mean": _round(ceiling / cost), "how": "extrapolated",
            "measured_to_gbps": top["load_gbps"]["mean"],
            "why": (f"not saturated up to {top['load_gbps']['mean']} Gbit/s ({top['pairs']} pairs, "
                    f"data plane {top['cpu_pct']['mean']}% of {ncpu} CPU(s)): the CPU cost there, "
                    f"{cost}% per Gbit/s, extrapolated to the {ceiling:g}% ceiling")}
    return out


def _at(points: list[dict], found: list, fallback: list[dict]):
    """(the point of the fewest pairs among ``found`` [((pairs, pace), why)], its why)."""
    (n, pace), why = min(found, key=lambda x: (x[0][0], str(x[0][1])))
    at = next((p for p in points if p["pairs"] == n and (p["offered"] == "unlimited") == (pace is None)),
              fallback[-1])
    return at, why


def _rising(points: list[dict]) -> list[dict]:
    """Points by rising load; of points with the same load (within 0.1%), the first."""
    out = []
    for p in sorted(points, key=lambda p: (p["load_gbps"]["mean"] or 0, p["pairs"])):
        if not p["load_gbps"]["mean"]:
            continue
        if out and p["load_gbps"]["mean"] <= out[-1]["load_gbps"]["mean"] * 1.001:
            continue
        out.append(p)
    return out


def _single_pair(records) -> dict:
    """placement -> single-pair figures from the battery's records."""
    out: dict = {"new_conn_s": {}}
    by: dict = defaultdict(list)
    for r in records:
        if r.extra.get("not_applicable") or not r.samples:     # never ran here: no figure
            continue
        by[(r.test, r.labels.get("placement"))].append(r)
    for (test, placement), rs in sorted(by.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if test == "tcp_stream":
            # the largest MSS used (full-size segments); of several, the fastest
            best = max(rs, key=lambda r: ((r.labels.get("params") or {}).get("used") or 0,
                                          spread.of(r, "gbps").mean or 0))
            out.setdefault(placement, {})["tcp"] = _per_cpu(best, "gbps", "gbps_per_cpu")
        elif test == "udp_stream":
            best = max(rs, key=lambda r: spread.of(r, "pps").mean or 0)
            out.setdefault(placement, {})["udp"] = _per_cpu(best, "pps", "pps_per_cpu")
        elif test == "flow_setup":
            conn = new_connections(rs)
            if conn:
                out["new_conn_s"][placement] = conn
    return out


def _per_cpu(r, metric: str, name: str) -> dict:
    """The figure, the data plane's CPU and their ratio per repetition (per 100% of one
    CPU: a cross-host pair's CPU is both hosts' data planes together)."""
    xs, cpu = r.samples.get(metric, []), r.samples.get("cpu_pct", [])
    ratio = [x / (c / 100.0) for x, c in zip(xs, cpu) if x is not None and c is not None and c > TINY]
    return {metric: figure(spread.of(r, metric)), "cpu_pct": figure(spread.of(r, "cpu_pct")),
            name: figure(spread.repetitions(ratio)), "params": r.labels.get("params")}


def new_connections(records) -> dict | None:
    """The highest offered rate every repetition carried with no failed or late
    connection, and the next rate tried (which did not) as its upper bound."""
    def clean(r):
        s = r.samples
        return bool(s.get("ok")) and not any(x for k in ("failed", "late") for x in s.get(k) or ())
    # records of one rate from several runs are pooled: the rate is carried only if every
    # repetition of every run carried it (never compares two records: runs merge freely)
    carried: dict = {}
    for r in records:
        rate = (r.labels.get("params") or {}).get("rate")
        if rate is not None:
            carried[rate] = carried.get(rate, True) and clean(r)
    ok = [rate for rate, c in carried.items() if c]
    if not ok:
        return None
    best = max(ok)
    higher = [rate for rate, c in carried.items() if rate > best and not c]
    return {"mean": best, "kind": "search", "lo": best, "hi": min(higher) if higher else None,
            "how": "highest offered rate carried with no failed or late connection"
                   + ("" if higher else " (the highest tried: the true value may be higher)")}


def figure(s: spread.Spread) -> dict:
    """A figure as the profile stores it: mean, the spread's kind and interval, n."""
    out = {"mean": _round(s.mean), "kind": s.kind, "n": s.repetitions}
    if s.kind in ("ci", "range"):
        out.update(lo=_round(s.lo), hi=_round(s.hi))
    if s.unstable:
        out["unstable"] = True
    return out


def _unstable(cell: dict):
    for role, r in cell["roles"].items():
        for p in r["points"]:
            for k in ("load_gbps", "cpu_pct"):
                if p[k].get("unstable"):
                    yield f"roles.{role}.points[{p['pairs']} pairs, {p['offered']}].{k}"
    for placement, figs in cell["single_pair"].items():
        for test, f in figs.items():
            for k, v in f.items():
                if isinstance(v, dict) and v.get("unstable"):
                    yield f"single_pair.{placement}.{test}.{k}"


def _round(x, digits: int = 4):
    return None if x is None else float(f"{x:.{digits}g}")
