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
    return f"{bound}{shown}" + (f", meas. ±{err:.0f}" if err and err >= 1 else "")
