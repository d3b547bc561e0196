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

**Judged only where the figures can be compared.** Each host's ``verdict`` is one of:

- ``not comparable`` -- the profile's cell was measured on another machine (CPU model,
  kernel, architecture, backend, OVS datapath or port type differ,
  ``vnetbench.capacity.machine``): a capacity belongs to the hardware it was measured on,
  so the errors are reported and nothing is judged (``*_within`` None);
- ``busy`` -- other work took more than ``OTHER_WORK_MAX_PCT`` of the host's CPUs over the
  step (``other_work``): the measured CPU and Gbit/s are not the vSwitch's alone;
- ``within`` / ``off`` -- both figures within the tolerance, or not.

The verdicts never change ``plan``'s exit code (0, or 1 when the network-aware placement
is infeasible): a script reads ``placements.*.verify.hosts[].verdict`` from ``--format json``.
"""

from __future__ import annotations

from vnetbench.capacity.files import Hosts, Workload
from vnetbench.errors import UnsupportedError
from vnetbench.testbed.model import CROSS_HOST, SAME_HOST, Pair

TOLERANCE = 0.25
CPU_FLOOR = 5.0
VNET = "plan"
#: other work (% of a host's CPUs over the step) above which its figures are not judged:
#: twice the CPU floor (the smallest CPU error judged a model failure), well above what an
#: idle machine leaves there (the runner, kernel threads, tick rounding: a few %), and
#: below the ~10 points by which the aware placement's busiest host must undercut the
#: agnostic one's in the integration test -- a neighbour taking more can decide that
OTHER_WORK_MAX_PCT = 10.0


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
        hosts[h] = {"gbps": g, "cpu_pct": cpu.get("dataplane_pct"), "busy_pct": cpu.get("busy_pct"),
                    "cpus": cpu.get("cpus"), "guest_pct": guest_cpu(h, rep["pairs"])}
    return {"hosts": hosts, "failed": rep["failed"], "record": record,
            "machine_cpu": machine_cpu(rep.get("cpu") or {}, hosts)}


def guest_cpu(host: str, pairs: list[dict]) -> float | None:
    """The CPU (% of one CPU) the workload's own processes on ``host`` used over the step:
    each pair's iperf3 client on its source's host and server on its destination's (their
    own rusage figures, ``guest_cpu_pct``); None when a pair through the host has none."""
    total = 0.0
    for row in pairs:
        ends = row.get("hosts") or ()
        cpu = row.get("guest_cpu_pct") or [None, None]
        for end, pct in zip(ends, cpu):
            if end != host:
                continue
            if pct is None:
                return None
            total += float(pct)
    return total


def other_work(busy_pct, dataplane_pct, guest_pct, cpus) -> dict:
    """What else ran on a host's CPUs over the step: their busy time (/proc/stat: anything
    at all) less the vSwitch's data plane and the workload's own processes, in % of the
    host's CPUs (clamped at 0: without IRQ time accounting a guest's rusage holds the
    softirq that interrupted it, which the data plane counts too, so the remainder is a
    low estimate), and whether it is past ``OTHER_WORK_MAX_PCT``."""
    if None in (busy_pct, dataplane_pct, guest_pct) or not cpus:
        missing = [n for n, v in (("busy", busy_pct), ("data-plane", dataplane_pct),
                                  ("guests'", guest_pct)) if v is None] or ["CPU count"]
        return {"other_work_pct": None, "busy": None,
                "why": f"not measured (no {', '.join(missing)} CPU figure)"}
    pct = max(0.0, (busy_pct - dataplane_pct - guest_pct) / cpus)
    return {"other_work_pct": round(pct, 1), "busy": pct > OTHER_WORK_MAX_PCT,
            "busy_pct": round(busy_pct / cpus, 1), "guest_pct": round(guest_pct / cpus, 1)}


def machine_cpu(window: dict, hosts: dict) -> dict:
    """The whole machine over the step: its CPUs' busy total (% of one CPU, summed), the
    testbed's own part (every data plane of the window -- a controller's too -- and the
    workload's processes) and the rest, in % of the machine's CPUs."""
    m = window.get("machine") or {}
    busy, ncpu = m.get("busy_pct"), m.get("cpus")
    dataplane = [v.get("dataplane") for v in (window.get("hosts") or {}).values() if isinstance(v, dict)]
    guests = [h.get("guest_pct") for h in hosts.values()]
    if busy is None or not ncpu or None in dataplane or None in guests:
        return {"cpus": ncpu, "busy_pct": None, "other_work_pct": None}
    own = sum(dataplane) + sum(guests)
    return {"cpus": ncpu, "busy_pct": round(busy / ncpu, 1), "testbed_pct": round(own / ncpu, 1),
            "other_work_pct": round(max(0.0, busy - own) / ncpu, 1)}


def compare(predicted: list[dict], measured: dict, differences=(), profile_machine=None,
            here=None) -> list[dict]:
    """Per host: predicted and measured Gbit/s and CPU, the error in % of the prediction,
    the other work on its CPUs, and the verdict (module doc): judged within the stated
    tolerance or not only on the profile's machine with the host's CPUs not busy with
    other work; ``differences``: ``machine.differences`` of the profile's and this one."""
    from vnetbench.capacity import machine
    out = []
    for p in predicted:
        m = measured["hosts"].get(p["host"])
        if m is None:
            continue
        # errors from the figures as reported, so a reader's arithmetic gives the same
        pg, mg = p["delivered_gbps"], round(sum(m["gbps"].values()), 4)
        pc, mc = p["cpu_pct"], None if m["cpu_pct"] is None else round(m["cpu_pct"], 2)
        other = other_work(m.get("busy_pct"), m["cpu_pct"], m.get("guest_pct"), m.get("cpus"))
        row = {"host": p["host"], "predicted_gbps": pg, "measured_gbps": mg,
               "gbps_error_pct": _err(pg, mg), "gbps_within": _within(pg, mg, 0.0),
               "predicted_cpu_pct": pc, "measured_cpu_pct": mc,
               "cpu_error_pct": _err(pc, mc), "cpu_within": _within(pc, mc, CPU_FLOOR),
               "overloaded_pct": p["overloaded_pct"], "other_work": other}
        if differences:
            row.update(gbps_within=None, cpu_within=None, verdict="not comparable",
                       why=f"not comparable: profile measured on {machine.describe(profile_machine)}, "
                           f"verified on {machine.describe(here)}")
        elif other["busy"]:
            row.update(gbps_within=None, cpu_within=None, verdict="busy",
                       why=f"not judged: other work took {other['other_work_pct']:g}% of the host's "
                           f"CPUs (more than {OTHER_WORK_MAX_PCT:g}%): the figures are not the vSwitch's")
        else:
            ok = row["gbps_within"] is not False and row["cpu_within"] is not False
            row.update(verdict="within" if ok else "off",
                       why="within the tolerance" if ok else "outside the tolerance")
        out.append(row)
    return out


def _err(pred, meas):
    if pred is None or meas is None or not pred:
        return None
    return round(100.0 * (meas - pred) / pred, 1)


def _within(pred, meas, floor) -> bool | None:
    if pred is None or meas is None:
        return None
    return abs(meas - pred) <= max(TOLERANCE * abs(pred), floor)


def here(dep) -> dict:
    """The machine a running deployment verifies on (``machine.FACTS``), read as a result
    record's provenance reads it (``vnetbench.results.provenance``)."""
    import platform

    from vnetbench.results.provenance import cpu_model
    meta = dep.run.meta()
    return {"cpu_model": cpu_model(), "kernel": platform.release(), "arch": platform.machine(),
            "backend": getattr(dep, "backend", None), "datapath": meta.get("ovs_datapath"),
            "ports": meta.get("ovs_ports")}


def run(workload: Workload, hosts: Hosts, predicted: list[dict], where: dict[str, str], online_cpus,
        seconds: int = 5, progress=lambda m: None, name="plan-verify", profile_machine=None) -> dict:
    """Build the placement, measure it, tear it down: the comparison with ``predicted``
    (``place.predict``'s rows, as the plan shows them) per host, judged only where the
    profile's machine (``profile_machine``, its cell's ``machine``) is this one."""
    import yaml

    from vnetbench.capacity import machine

    from vnetbench.testbed import deployment
    from vnetbench.testbed.loader import loads
    doc = testbed_doc(workload, hosts, where, list(online_cpus), name=name)
    tb = loads(yaml.safe_dump(doc), source=f"<{name}>", online_cpus=online_cpus)
    progress(f"plan --verify: building {len(doc['hosts'])} host(s), {len(doc['vms'])} VM(s) ({doc['vswitch']}/"
             f"{hosts.network})")
    dep = deployment.build("netns", tb, progress=progress)
    try:
        this = here(dep)
        measured = measure(dep, workload, where, seconds, progress)
    finally:
        errors = dep.down()
        if errors:
            progress(f"plan --verify: teardown of {dep.run_id} incomplete ({errors[0]}); run "
                     f"'vnetbench cleanup --run {dep.run_id}'")
    diffs = machine.differences(profile_machine, this)
    return {"hosts": compare(predicted, measured, diffs, profile_machine, this),
            "failed": measured["failed"],
            "machine": {"profile": profile_machine, "here": this, "comparable": not diffs,
                        "differences": diffs},
            "machine_cpu": measured["machine_cpu"],
            "tolerance": {"relative": TOLERANCE, "cpu_floor_pct": CPU_FLOOR,
                          "other_work_max_pct": OTHER_WORK_MAX_PCT}}
