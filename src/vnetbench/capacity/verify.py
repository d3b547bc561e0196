"""``plan --verify``: a planned placement built on the embedded testbed and run, so each
host's predicted vSwitch load and data-plane CPU stand beside measured ones.

Each planned host becomes an emulated host on a CPU of its own (so its data-plane CPU is
its own, as the profile measured it), each VM with a flow a VM on its planned host, one
vnet for all; every flow a pair offering its planned Gbit/s (iperf3 TCP at ``-b``), all
at once (the scale family's step: synchronised start, each host's data-plane CPU over the
step, ``vnetbench.scale.run``). Per host: predicted vs measured Gbit/s through its
vSwitch and data-plane CPU, with the error in % of the prediction.

A prediction is *within* when the measured value is inside ``TOLERANCE`` of it, or
``CPU_FLOOR`` CPU points for CPU (a 3% prediction measured at 5% is no model failure).
"""

from __future__ import annotations

from vnetbench.capacity.files import Hosts, Workload
from vnetbench.errors import UnsupportedError
from vnetbench.testbed.model import CROSS_HOST, SAME_HOST, Pair

TOLERANCE = 0.25
CPU_FLOOR = 5.0
VNET = "plan"


def testbed_doc(workload: Workload, hosts: Hosts, where: dict[str, str], online_cpus: list[int],
                name: str = "plan-verify") -> dict:
    """The testbed that puts the placement in place: hosts that got a VM with a flow, each
    on a CPU of its own."""
    flowing = [v.name for v in workload.vms if any(v.name in (f.src, f.dst) for f in workload.flows)]
    used = [h.name for h in hosts.hosts if any(where[v] == h.name for v in flowing)]
    if len(used) > len(online_cpus):
        raise UnsupportedError(f"plan --verify: the placement uses {len(used)} hosts and this machine "
                               f"has {len(online_cpus)} CPUs; each emulated host needs a CPU of its "
                               "own (its data-plane CPU is what is checked): plan for fewer hosts")
    kinds = {h.vswitch for h in hosts.hosts if h.name in used}
    if len(kinds) > 1:
        raise UnsupportedError(f"plan --verify: the placement mixes vSwitch kinds ({', '.join(sorted(kinds))}); "
                               "the embedded testbed runs one kind: verify one kind at a time")
    return {"name": name, "vswitch": kinds.pop(), "network": {"type": hosts.network},
            "hosts": [{"name": h, "cpus": [online_cpus[i]]} for i, h in enumerate(used)],
            "vnets": [{"name": VNET}],
            "vms": [{"name": v, "host": where[v]} for v in flowing]}


def pairs(workload: Workload, where: dict[str, str]) -> list[Pair]:
    return [Pair(f"f{i + 1}", SAME_HOST if where[f.src] == where[f.dst] else CROSS_HOST, VNET, (f.src, f.dst))
            for i, f in enumerate(workload.flows)]


def measure(dep, workload: Workload, where: dict[str, str], seconds: int = 5,
            progress=lambda m: None) -> dict:
    """Every flow at its planned rate at once on the running deployment: per host the
    measured Gbit/s through its vSwitch (by role) and data-plane CPU, failed flows named."""
    from vnetbench.scale import run as scale_run
    ps = pairs(workload, where)
    rates = {p.name: max(1, int(f.gbps * 1e9)) for p, f in zip(ps, workload.flows)}
    progress(f"plan --verify: {len(ps)} flow(s) at their planned rates for {seconds} s")
    record = scale_run.run(dep, ps, progression=[len(ps)], tests=("tcp",), seconds=seconds,
                           latency=False, rates=rates)[0]
    rep = record.extra["repetitions"][0]
    hosts = {}
    for h, cpu in rep["hosts"].items():
        g = {"tx": 0.0, "rx": 0.0, "same": 0.0}
        for row in rep["pairs"]:
            if not row.get("ok") or h not in row["hosts"]:
                continue
            a, b = row["hosts"]
            g["same" if a == b else "tx" if a == h else "rx"] += row["gbps"]
        hosts[h] = {"gbps": g, "cpu_pct": cpu.get("dataplane_pct"), "busy_pct": cpu.get("busy_pct")}
    return {"hosts": hosts, "failed": rep["failed"], "record": record}


def compare(predicted: list[dict], measured: dict) -> list[dict]:
    """Per host: predicted and measured Gbit/s and CPU, the error in % of the prediction,
    and whether each is within the stated tolerance."""
    out = []
    for p in predicted:
        m = measured["hosts"].get(p["host"])
        if m is None:
            continue
        # errors from the figures as reported, so a reader's arithmetic gives the same
        pg, mg = p["delivered_gbps"], round(sum(m["gbps"].values()), 4)
        pc, mc = p["cpu_pct"], None if m["cpu_pct"] is None else round(m["cpu_pct"], 2)
        out.append({"host": p["host"], "predicted_gbps": pg, "measured_gbps": mg,
                    "gbps_error_pct": _err(pg, mg), "gbps_within": _within(pg, mg, 0.0),
                    "predicted_cpu_pct": pc, "measured_cpu_pct": mc,
                    "cpu_error_pct": _err(pc, mc), "cpu_within": _within(pc, mc, CPU_FLOOR),
                    "overloaded_pct": p["overloaded_pct"]})
    return out


def _err(pred, meas):
    if pred is None or meas is None or not pred:
        return None
    return round(100.0 * (meas - pred) / pred, 1)


def _within(pred, meas, floor) -> bool | None:
    if pred is None or meas is None:
        return None
    return abs(meas - pred) <= max(TOLERANCE * abs(pred), floor)


def run(workload: Workload, hosts: Hosts, predicted: list[dict], where: dict[str, str], online_cpus,
        seconds: int = 5, progress=lambda m: None, name="plan-verify") -> dict:
    """Build the placement, measure it, tear it down: the comparison with ``predicted``
    (``place.predict``'s rows, as the plan shows them) per host."""
    import yaml

    from vnetbench.testbed.loader import loads
    from vnetbench.testbed.netns import builder
    doc = testbed_doc(workload, hosts, where, list(online_cpus), name=name)
    tb = loads(yaml.safe_dump(doc), source=f"<{name}>", online_cpus=online_cpus)
    progress(f"plan --verify: building {len(doc['hosts'])} host(s), {len(doc['vms'])} VM(s) ({doc['vswitch']}/"
             f"{hosts.network})")
    dep = builder.up(tb, progress=progress)
    try:
        measured = measure(dep, workload, where, seconds, progress)
    finally:
        errors = dep.down()
        if errors:
            progress(f"plan --verify: teardown of {dep.run_id} incomplete ({errors[0]}); run "
                     f"'vnetbench cleanup --run {dep.run_id}'")
    return {"hosts": compare(predicted, measured), "failed": measured["failed"],
            "tolerance": {"relative": TOLERANCE, "cpu_floor_pct": CPU_FLOOR}}
