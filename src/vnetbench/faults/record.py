"""Every fault is a timestamped record in the results and a Prometheus annotation series.

A fault is a ``Result`` with ``test="fault"``: labels name the fault, its target
and the testbed; ``started``/``finished`` bracket the action; measured values
(e.g. migration downtime) are its samples. When the testbed is attached to a
monitor, the fault is also pushed to its Pushgateway (one group per fault):
``vnetbench_fault_start_timestamp_seconds`` / ``..._end_...`` (Grafana
annotations with "use series value as timestamp") and its measured values as
``vnetbench_fault_value{metric=...}`` (docs/metrics.md).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from prometheus_client.metrics_core import Metric

from vnetbench.results.record import Result
from vnetbench.results.store import ResultStore

TEST = "fault"
HELP = {
    "vnetbench_fault_start_timestamp_seconds": "When a fault was injected (Unix time)",
    "vnetbench_fault_end_timestamp_seconds": "When the fault action returned (Unix time)",
    "vnetbench_fault_value": "A value measured around a fault (label metric), e.g. downtime_ms",
}


class FaultLog:
    """Where a deployment's faults go: a results file and, if attached, the monitor."""

    def __init__(self, dep, results: Path | None = None):
        self.dep = dep
        self.store = ResultStore(results) if results else None
        self.records: list[Result] = []

    def add(self, fault: str, target: str, started: float, finished: float,
            values: dict | None = None, params: dict | None = None) -> Result:
        tb = self.dep.testbed
        labels = {"run_id": self.dep.run_id, "testbed": tb.name, "vswitch": tb.vswitch.kind.value,
                  "network": tb.network.type.value, "fault": fault, "target": target,
                  "fault_id": secrets.token_hex(4), "params": dict(params or {})}
        rec = Result(test=TEST, labels=labels, samples={k: [v] for k, v in (values or {}).items()
                                                       if v is not None},
                     started=started, finished=finished)
        self.records.append(rec)
        if self.store:
            self.store.append(rec)
        self._push(rec)
        return rec

    def _push(self, rec: Result) -> None:
        monitor = self.dep.run.meta().get("monitor")
        if not monitor:
            return
        from vnetbench.monitor import publish, server
        try:
            mon = server.attach(monitor)
        except Exception:          # the monitor is gone: the results file still has it
            return
        publish.push(mon, {"run_id": rec.labels["run_id"], "fault_id": rec.labels["fault_id"]},
                     families(rec))


def families(rec: Result) -> list[Metric]:
    labels = {k: str(rec.labels[k]) for k in ("testbed", "vswitch", "network", "fault", "target")}
    fams = {name: Metric(name, doc, "gauge") for name, doc in HELP.items()}
    fams["vnetbench_fault_start_timestamp_seconds"].add_sample(
        "vnetbench_fault_start_timestamp_seconds", labels, rec.started)
    fams["vnetbench_fault_end_timestamp_seconds"].add_sample(
        "vnetbench_fault_end_timestamp_seconds", labels, rec.finished)
    for metric, values in sorted(rec.samples.items()):
        fams["vnetbench_fault_value"].add_sample("vnetbench_fault_value",
                                                 {**labels, "metric": metric}, values[0])
    return [f for f in fams.values() if f.samples]
