"""Results and test windows of the battery, pushed to the monitor's Pushgateway so
they sit in Prometheus beside the CPU series, with the labels to compare runs
and configurations (metric names: docs/metrics.md).

One Pushgateway group per window (run, test family, pair, start in ms): a window
pushes ``vnetbench_test_running 1`` when the family starts on the pair, then replaces
the group with the results and ``vnetbench_test_running 0`` when it ends. The start
is in the group because one run measures a family on a pair more than once (ICMP RTT
deferred, then flood, on a borrowed testbed): a group per family kept only the last.
"""

from __future__ import annotations

import contextlib
import re
import time
import urllib.parse

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

from vnetbench.monitor import nshttp
from vnetbench.monitor.server import PUSHGATEWAY_PORT, Monitor

JOB = "vnetbench"
BASE = ("run_id", "testbed", "vswitch", "network", "placement", "pair", "test")
GROUP = ("run_id", "pair", "family", "window")
HELP = {
    "vnetbench_result": "Mean over repetitions of one result metric (label metric)",
    "vnetbench_result_ci95": "Half width of the Student-t 95% CI of vnetbench_result",
    "vnetbench_result_start_timestamp_seconds": "When the measured point started (Unix time)",
    "vnetbench_result_end_timestamp_seconds": "When the measured point ended (Unix time)",
    "vnetbench_test_running": "1 while a test family runs on a pair: the test windows",
}
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RESERVED = frozenset((*BASE, *GROUP, "point", "metric", "job", "instance"))


def _value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _is_parameter(k: str, v) -> bool:
    """A scalar setting worth a label; free text (explanations) stays in the record."""
    if not _LABEL.match(k) or k.startswith("__") or k in RESERVED:
        return False
    if isinstance(v, str):
        return 0 < len(v) <= 40 and " " not in v
    return isinstance(v, (int, float, bool))


def result_labels(r) -> dict:
    """The record's configuration labels, its point and its scalar parameters."""
    out = {k: _value(r.labels[k]) for k in BASE if r.labels.get(k) not in (None, "")}
    if r.labels.get("point"):
        out["point"] = _value(r.labels["point"])
    for k, v in sorted(r.labels.get("params", {}).items()):
        if _is_parameter(k, v):
            out[k] = _value(v)
    return out


def families(results, running: dict | None) -> list[Metric]:
    """The exposition of one group: results (means, CI, timestamps) and the window flag."""
    fams = {name: Metric(name, doc, "gauge") for name, doc in HELP.items()}

    def add(name, labels, value):
        fams[name].add_sample(name, labels, value)
    for r in results:
        labels = result_labels(r)
        for metric, summary in sorted(r.metrics.items()):
            if summary.get("mean") is None:
                continue
            add("vnetbench_result", {**labels, "metric": metric}, summary["mean"])
            if summary.get("ci95") is not None:          # none below 3 repetitions
                add("vnetbench_result_ci95", {**labels, "metric": metric}, summary["ci95"])
        for metric, by_host in sorted((r.extra or {}).get("per_host", {}).items()):
            for host, value in sorted(by_host.items()):      # e.g. a scale step's CPU per host
                if value is not None:
                    add("vnetbench_result", {**labels, "metric": metric, "host": host}, value)
        add("vnetbench_result_start_timestamp_seconds", labels, r.started)
        add("vnetbench_result_end_timestamp_seconds", labels, r.finished)
    if running is not None:
        add("vnetbench_test_running", running["labels"], running["value"])
    return [f for f in fams.values() if f.samples]


class _Static:
    def __init__(self, fams):
        self.fams = fams

    def collect(self):
        return self.fams


def push(mon: Monitor, group: dict, fams: list[Metric]) -> None:
    """PUT: the group's metrics are replaced as a whole."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Static(fams))
    path = f"/metrics/job/{JOB}" + "".join(
        f"/{k}/{urllib.parse.quote(str(v), safe='')}" for k, v in group.items())
    status, body = nshttp.request(mon.ns, PUSHGATEWAY_PORT, "PUT", path, generate_latest(registry),
                                  {"Content-Type": "text/plain; version=0.0.4"})
    if status not in (200, 202):
        raise RuntimeError(f"Pushgateway {path}: HTTP {status}: {body[:200]!r}")


@contextlib.contextmanager
def window(mon: Monitor | None, dep, family: str, pair):
    """Mark a test family's run on a pair; ``results`` collected in the block are
    pushed at its end. With no monitor, only collects (nothing is pushed)."""
    results: list = []
    if mon is None:
        yield results
        return
    tb = dep.testbed
    labels = {"testbed": tb.name, "vswitch": tb.vswitch.kind.value, "network": tb.network.type.value,
              "placement": pair.placement, "test": family}
    group = {"run_id": dep.run_id, "pair": pair.name, "family": family,
             "window": str(time.time_ns() // 1_000_000)}
    push(mon, group, families([], {"labels": labels, "value": 1}))
    try:
        yield results
    finally:
        push(mon, group, families(results, {"labels": labels, "value": 0}))
