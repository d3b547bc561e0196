"""``history compare A B``: two runs judged cell by cell, with a test fit for few repetitions.

A cell is a test and its configuration labels; in each cell both runs measured, each
metric's repetitions are compared with Welch's t-test (unequal variances: an upgrade
may change the spread as well as the mean) and Hedges' g as the effect size (Cohen's d
corrected for small samples). With fewer than ``MIN_N`` repetitions on either side the
verdict is "cannot tell": at n = 2 Welch's test has a single degree of freedom and
calls nearly nothing, and at n = 1 there is no variance to test against at all.

Cells are judged only when their provenance matches (the Browbeat lesson: a 10x change
came from a configuration difference, not the build); otherwise the cell lists what
differs, field by field. ``--ignore FIELD`` compares across a difference on purpose
(a kernel upgrade under test).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

from vnetbench.history import query
from vnetbench.history.ingest import VOLATILE, cell_labels
from vnetbench.inputs import one_line

MIN_N = 3          # repetitions a side before any verdict
ALPHA = 0.05


def flatten(node, prefix="") -> dict:
    """Nested provenance -> {"tools.ovs-vswitchd": "...", ...}."""
    out = {}
    if isinstance(node, dict):
        for k, v in node.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        out[prefix] = node
    return out


def metadata(provenance: dict, ignore=()) -> dict:
    flat = flatten({k: v for k, v in provenance.items() if k not in VOLATILE})
    return {k: v for k, v in flat.items() if not any(k == i or k.startswith(i + ".") for i in ignore)}


def diff(a: dict, b: dict) -> dict:
    """{field: (value in A, value in B)} for every field that differs (absent: None)."""
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


@dataclass
class Cell:
    cell: str
    test: str
    labels: dict
    provenance: dict
    samples: dict = field(default_factory=dict)     # metric -> pooled repetitions


def cells(records, ignore=()) -> dict:
    """A run's records grouped by cell (several records of one cell pool their repetitions)."""
    out = {}
    for r in records:
        c = out.get(r["cell"])
        if c is None:
            c = out[r["cell"]] = Cell(r["cell"], r["test"], cell_labels(r["labels"]),
                                      metadata(r["provenance"], ignore))
        for metric, m in r["metrics"].items():
            c.samples.setdefault(metric, []).extend(x for x in m["samples"] if x is not None)
    return out


def _mean(xs):
    return math.fsum(xs) / len(xs) if xs else None


def hedges_g(a, b) -> float | None:
    n1, n2 = len(a), len(b)
    if n1 < 2 or n2 < 2:
        return None
    m1, m2 = _mean(a), _mean(b)
    v1 = math.fsum((x - m1) ** 2 for x in a) / (n1 - 1)
    v2 = math.fsum((x - m2) ** 2 for x in b) / (n2 - 1)
    pooled = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2))
    if pooled == 0:
        return None
    return (m2 - m1) / pooled * (1 - 3 / (4 * (n1 + n2) - 9))


#: repetitions closer than this (relative to their mean) have no spread: 53.8 and
#: 53.800000000000004 are one value printed twice, and a t-test over them is rounding
SPREAD_EPS = 1e-9


def _no_spread(xs) -> bool:
    return max(xs) - min(xs) <= SPREAD_EPS * max(abs(max(xs)), abs(min(xs)))


def judge(a, b, better: str, alpha: float = ALPHA) -> dict:
    """Two metrics' repetitions -> means, % difference, Welch's p, Hedges' g and a verdict."""
    from scipy import stats
    ma, mb = _mean(a), _mean(b)
    out = {"a": {"n": len(a), "mean": ma}, "b": {"n": len(b), "mean": mb},
           "diff_pct": (mb - ma) / abs(ma) * 100 if ma not in (None, 0) and mb is not None else None,
           "stat_test": "welch_t", "p": None, "effect": "hedges_g", "effect_size": None}
    if min(len(a), len(b)) < MIN_N:
        out["verdict"] = f"cannot tell (n={min(len(a), len(b))}, the test needs {MIN_N} a side)"
        return out
    if _no_spread(a) and _no_spread(b):
        same = abs(mb - ma) <= SPREAD_EPS * max(abs(ma), abs(mb))
        out["verdict"] = "no difference" if same else "cannot tell (no spread in either run)"
        return out
    with warnings.catch_warnings():     # one run without spread: scipy warns of precision, p stands
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    out["p"], out["effect_size"] = p, hedges_g(a, b)
    if not math.isfinite(p) or p >= alpha:
        out["verdict"] = "no significant difference"
    elif better == "either":
        out["verdict"] = "higher" if mb > ma else "lower"
    else:
        out["verdict"] = "better" if (mb > ma) == (better == "higher") else "worse"
    return out


def compare(conn, ref_a: str, ref_b: str, rules, ignore=(), metrics=None, alpha: float = ALPHA) -> dict:
    """The whole comparison of two runs as a JSON-able document."""
    import fnmatch
    run_a, run_b = query.resolve(conn, ref_a), query.resolve(conn, ref_b)
    ca = cells(query.records_of(conn, run_a["id"]), ignore)
    cb = cells(query.records_of(conn, run_b["id"]), ignore)
    rows, differing = [], []
    run_diff = {}
    for key in [k for k in ca if k in cb]:
        x, y = ca[key], cb[key]
        d = diff(x.provenance, y.provenance)
        for k, v in d.items():
            run_diff.setdefault(k, v)
        if d:
            differing.append({"cell": key, "test": x.test, "labels": x.labels,
                              "differs": {k: {"a": v[0], "b": v[1]} for k, v in d.items()}})
            continue
        for metric in [m for m in x.samples if m in y.samples]:
            if metrics and not any(fnmatch.fnmatchcase(metric, p) for p in metrics):
                continue
            rule = rules.of(metric)
            rows.append({"cell": key, "test": x.test, "labels": x.labels, "metric": metric,
                         "better": rule.better, **judge(x.samples[metric], y.samples[metric], rule.better, alpha)})
    return {"a": _run(run_a), "b": _run(run_b), "alpha": alpha, "min_n": MIN_N,
            "software_metadata_diff": {k: {"a": v[0], "b": v[1]} for k, v in sorted(run_diff.items())},
            "cells": rows, "provenance_differs": differing,
            "only_in_a": [_cell(c) for k, c in ca.items() if k not in cb],
            "only_in_b": [_cell(c) for k, c in cb.items() if k not in ca]}


def _run(row) -> dict:
    return {"id": row["id"], "name": row["name"], "started": row["started"]}


def _cell(c: Cell) -> dict:
    return {"cell": c.cell, "test": c.test, "labels": c.labels}


def text(doc: dict) -> str:
    """The comparison for people: what differs, then the cells' verdicts."""
    from vnetbench.history import render
    a, b = doc["a"], doc["b"]
    lines = [f"A: {query.short(a['id'])} {a['name']} ({query.when(a['started'])})",
             f"B: {query.short(b['id'])} {b['name']} ({query.when(b['started'])})"]
    if doc["software_metadata_diff"]:
        lines.append("software metadata that differs (cells with a difference are not judged; "
                     "--ignore FIELD to judge them anyway):")
        for k, v in doc["software_metadata_diff"].items():
            lines.append(f"  {k}: {one_line(str(v['a']), 80)} -> {one_line(str(v['b']), 80)}")
    rows = [[r["cell"][:8], r["test"], query.label_text(r["labels"]), r["metric"], render.fmt(r["a"]["mean"]),
             render.fmt(r["b"]["mean"]), render.pct(r["diff_pct"]), render.fmt(r["p"], 2),
             render.fmt(r["effect_size"], 2), r["verdict"]] for r in doc["cells"]]
    if rows:
        lines.append(render.table(["cell", "test", "labels", "metric", "A mean", "B mean", "diff", "p (Welch)",
                                   "Hedges g", "verdict"], rows))
    else:
        lines.append("no cell measured in both runs with the same provenance")
    if doc["provenance_differs"]:
        lines.append(f"{len(doc['provenance_differs'])} cell(s) not judged: their provenance differs")
    for side in ("a", "b"):
        if doc[f"only_in_{side}"]:
            lines.append(f"{len(doc[f'only_in_{side}'])} cell(s) only in {side.upper()}")
    return "\n".join(lines)
