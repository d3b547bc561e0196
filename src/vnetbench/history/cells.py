"""A cell's identity in the history: its test and the labels that configure it.

Two records of different runs are the same cell, and so one series, when their test and
labels agree once what names the run (``RUN_LABELS``, ``RUN_PARAMS``) and what the run
measured (``RUN_PARAMS``) are left out. What configures the measurement stays in, even
where the run's testbed decides it: port_ready's ``chassis`` (the hosts its steps ran
against: every one follows every change) makes 8 and 50 chassis two cells, as do its
``existing`` ports. Below ``db`` and ``ingest``: the schema's migrations recompute cells
with it.
"""

from __future__ import annotations

import hashlib
import json

#: labels that name a run, not a configuration: left out of a cell's identity
RUN_LABELS = ("run_id",)
#: per test, the ``params`` that belong to the run rather than to the configuration: a
#: value it measured (the zero-loss rate the RFC 2544 latency stream ran at is the same
#: run's search result) or a name holding its run id (the fairness bottleneck's qdisc
#: command names the run's own device; its rate is ``bottleneck_bps``). Kept in the
#: record's labels, left out of its cell, or no two runs would ever share that cell
RUN_PARAMS = {"rfc2544_latency": ("rate_fps",), "udp_fairness": ("qdisc",)}


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def cell_labels(labels: dict) -> dict:
    """A record's labels without what differs from run to run of the same cell."""
    out = {k: v for k, v in labels.items() if k not in RUN_LABELS}
    run_params = RUN_PARAMS.get(out.get("test"), ())
    if run_params and isinstance(out.get("params"), dict):
        out["params"] = {k: v for k, v in out["params"].items() if k not in run_params}
    return out


def cell_of(test: str, labels: dict) -> str:
    """A cell's identity: its test and configuration labels (not the run id), hashed."""
    return hashlib.sha256(canonical([test, cell_labels(labels)]).encode()).hexdigest()[:32]
