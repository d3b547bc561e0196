"""Result -> Rally ``add_output`` payloads (what ``rally task report`` draws)."""

from __future__ import annotations

from vnetbench.cpu import PART_METRICS
from vnetbench.results import spread

METRICS_TITLE = "vnetbench metrics"     # the SLA reads this table


def metrics_table(results, keys) -> dict:
    """Additive table ('<placement> [<path>] <point> <metric>' -> mean over repetitions; the
    path only when routed, so a routed pair's row is not merged with its placement's L2
    one), drawn by VnetbenchStats: Rally's StatsTable would label every value "(sec)"."""
    rows = []
    for r in results:
        where = (r.labels["placement"], r.labels.get("path", ""), r.labels.get("point", ""))
        for k in keys:
            mean = r.metrics.get(k, {}).get("mean")
            if mean is not None:
                rows.append([" ".join(x for x in (*where, k) if x), mean])
    return {"title": METRICS_TITLE, "chart_plugin": "VnetbenchStats", "data": rows,
            "description": "means over repetitions; CPU% = vSwitch processes of all hosts, 100% = one CPU"}


def results_table(title, results, keys, params=()) -> dict:
    """Complete Table: one row per measured point, each value with the spread the report
    shows (vnetbench.results.spread: ±sd for RTT, CI / range / nothing by repetitions);
    PARAMS: parameters of the records shown as columns of their own after the point
    (port_ready's ``chassis``: figures on 8 and on 50 chassis are not read as one)."""
    cols = ["placement", "path", "point", *params] + [f"{k} (mean, spread)" for k in keys]
    rows = []
    for r in results:
        cells = []
        for k in keys:
            s = spread.of(r, k) if k in r.samples else None
            cells.append("-" if s is None else s.text() + (" !" if s.unstable else ""))
        given = [r.labels.get("params", {}).get(p, "-") for p in params]
        rows.append([r.labels["placement"], r.labels.get("path", "l2"), r.labels.get("point", ""),
                     *given] + cells)
    return {"title": title, "chart_plugin": "Table", "data": {"cols": cols, "rows": rows},
            "description": spread.NOTES[0]}


def lines(title, series: dict, label: str, axis_label: str) -> dict:
    """Complete Lines: name -> [[x, y], ...]."""
    return {"title": title, "chart_plugin": "Lines", "label": label, "axis_label": axis_label,
            "data": [[name, pts] for name, pts in series.items()]}


def series(results, param: str, metric: str) -> dict:
    """placement -> [[labels.params[param], mean of metric], ...] for a Lines chart."""
    out: dict = {}
    for r in results:
        out.setdefault(r.labels["placement"], []).append(
            [r.labels["params"][param], r.metrics[metric]["mean"]])
    return out


def cpu(results) -> tuple[dict, dict]:
    """Host-side data-plane CPU% of every point: its disjoint parts stacked, and as a table."""
    parts = tuple((m, p.replace("_", " ")) for m, p in PART_METRICS.items())
    mean = lambda r, k: r.metrics.get(k, {}).get("mean") or 0.0
    area = {"title": "data-plane CPU % per point (100% = one CPU)", "chart_plugin": "StackedArea",
            "label": "CPU %", "axis_label": "point (see the CPU table for names)",
            "data": [[name, [[i, mean(r, k)] for i, r in enumerate(results)]] for k, name in parts]}
    rows = [[i, r.labels.get("placement", ""), r.labels.get("point", ""),
             f"{mean(r, 'cpu_pct'):.1f}"] + [f"{mean(r, k):.1f}" for k, _ in parts]
            for i, r in enumerate(results)]
    table = {"title": "data-plane CPU % (host side, mean over repetitions)", "chart_plugin": "Table",
             "data": {"cols": ["#", "placement", "point", "cpu_pct"] + [n for _, n in parts],
                      "rows": rows}}
    return area, table
