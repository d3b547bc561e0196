"""The CPU figure beside a cell: the data-plane CPU% of docs/metrics.md, how it was
measured, and records from before the exact split, labelled as such."""

from __future__ import annotations

from vnetbench.results.record import Result

LEGACY = "legacy"
LEGACY_MARK = "†"
NOTE = ("CPU%: host-side data-plane CPU over each repetition's window, the sum of disjoint "
        "parts (vSwitch and controller daemons' runtime without interrupts, network softirq in "
        "their context and elsewhere on the hosts' CPUs, hardirq; docs/metrics.md); 100% = one "
        "CPU; meas. ±N: the measurement's own uncertainty when >= 1%; <=: method tick (parts overlap, an upper bound); "
        f"{LEGACY_MARK}: a record from before the split (vSwitch processes + softirq, which may "
        "count softirq twice)")


ROUTER_NOTE = ("router: of that CPU, the router's kernel IP forwarding (ip_forward and what it "
               "calls, sampled at 997 Hz per CPU, ±2 sigma of the sampling), inside the softirq "
               "parts, never added; shown on routed rows; N/A where the kind routes inside its "
               "vSwitch's pipeline (the reason is listed)")


def routed(record: Result | None) -> bool:
    """A record of a pair whose path crosses a router (labels.path other than l2)."""
    return record is not None and record.labels.get("path", "l2") != "l2"


def router_na(record: Result | None) -> str | None:
    """Why a record has no router CPU (its windows' ``cpu.router.not_applicable``), else None."""
    reps = (record.extra or {}).get("repetitions", []) if record else []
    return next((why for rep in reps if isinstance(rep, dict)
                 if (why := ((rep.get("cpu") or {}).get("router") or {}).get("not_applicable"))), None)


def router_text(record: Result | None) -> str:
    """'router 3.1 ±0.8%' (mean over repetitions, its mean 2 sigma), 'router N/A', or ''
    (not a routed row, or a record from before the router figure)."""
    if not routed(record) or "cpu_pct" not in record.samples:
        return ""
    mean = lambda k: record.metrics.get(k, {}).get("mean")
    if mean("cpu_router_pct") is not None:
        return f"router {mean('cpu_router_pct'):.1f} ±{mean('cpu_router_pct_err') or 0:.1f}%"
    return "router N/A" if router_na(record) else ""


def cpu_method(record: Result | None) -> str | None:
    """bpf / irqtime / tick, 'legacy' for a record with cpu_pct but no method, None without CPU."""
    if record is None or "cpu_pct" not in record.samples:
        return None
    return record.provenance.get("cpu", {}).get("method") or LEGACY


def cpu_text(record: Result | None, shown: str) -> str:
    """``shown`` (the CPU figure with its spread over repetitions, e.g. '86 ±4% CPU')
    marked with how it was measured: '<=' for method tick (an upper bound), '†' for a
    legacy record, ', meas. ±N' when the measurement's own uncertainty is >= 1%."""
    method = cpu_method(record)
    if method == LEGACY:
        return f"{shown}{LEGACY_MARK}"
    err = record.metrics.get("cpu_pct_err", {}).get("mean") if method else None
    bound = "<=" if method == "tick" else ""
    router = router_text(record)
    return (f"{bound}{shown}" + (f", meas. ±{err:.0f}" if err and err >= 1 else "")
            + (f"; {router}" if router else ""))
