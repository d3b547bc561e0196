"""``history compare A B --html FILE``: the comparison as one self-contained page, with the
chart the history's Grafana dashboard draws: a metric's series per cell, one point a run,
its change points marked.

The page is built like the run report's (``vnetbench.report``: inline CSS and SVG drawn
by matplotlib, no script, no external file). The change points are Otava's, found over
each charted series as ``history regressions`` finds them (same rules; no
acknowledgement file); runs A and B are marked on it. A chart is drawn for each judged
cell and metric, the significant ones first, at most ``MAX_CHARTS``.
"""

from __future__ import annotations

import time
from html import escape

from vnetbench.history import query, regress, render
from vnetbench.report.charts import Chart, _svg
from vnetbench.report.html import CSS

MAX_CHARTS = 24
COLORS = {"regression": "#c0392b", "improvement": "#27ae60", "change": "#7f8c8d"}
SIGNIFICANT = ("worse", "better", "higher", "lower")


def page(conn, doc: dict, rules) -> str:
    a, b = doc["a"], doc["b"]
    rows = sorted(doc["cells"], key=lambda r: r["verdict"] not in SIGNIFICANT)
    drawn = [c for c in (chart(conn, r, a["id"], b["id"], rules.of(r["metric"]), i)
                         for i, r in enumerate(rows[:MAX_CHARTS])) if c]
    body = [f"<h1>vnetbench history compare</h1><p>Generated {escape(time.strftime('%Y-%m-%d %H:%M:%S %Z'))}</p>",
            "<ul>" + "".join(f"<li>{side}: {escape(query.short(r['id']))} {escape(r['name'])} "
                             f"(measured {escape(query.when(r['started']))})</li>" for side, r in (("A", a), ("B", b)))
            + "</ul>", _metadata(doc), "<h2 id='cells'>Cells</h2>", _table(doc),
            "<h2 id='charts'>Series and change points</h2>",
            f"<p>{len(drawn)} chart(s); {len(rows) - min(len(rows), MAX_CHARTS)} more judged cell(s) "
            f"and metric(s) not drawn (at most {MAX_CHARTS}; significant ones first).</p>"
            if len(rows) > MAX_CHARTS else ""]
    body += [f"<figure id='{c.id}'>{c.svg}<figcaption>{escape(c.caption)}</figcaption></figure>" for c in drawn]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>vnetbench history compare"
            f"</title><style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


def _metadata(doc: dict) -> str:
    d = doc["software_metadata_diff"]
    if not d:
        return "<p>Software metadata: the same in both runs.</p>"
    items = "".join(f"<li>{escape(k)}: {escape(str(v['a']))} &rarr; {escape(str(v['b']))}</li>" for k, v in d.items())
    return ("<h2 id='metadata'>Software metadata that differs</h2><p>Cells with a difference are not judged "
            f"(--ignore FIELD judges them anyway).</p><ul>{items}</ul>")


def _table(doc: dict) -> str:
    head = ["cell", "test", "labels", "metric", "A mean", "B mean", "diff", "p (Welch)", "Hedges g", "verdict"]
    rows = [[r["cell"][:8], r["test"], query.label_text(r["labels"]), r["metric"], render.fmt(r["a"]["mean"]),
             render.fmt(r["b"]["mean"]), render.pct(r["diff_pct"]), render.fmt(r["p"], 2),
             render.fmt(r["effect_size"], 2), r["verdict"]] for r in doc["cells"]]
    if not rows:
        return "<p>No cell measured in both runs with the same provenance.</p>"
    cells = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    notes = [f"{len(doc['provenance_differs'])} cell(s) not judged: their provenance differs"
             if doc["provenance_differs"] else ""]
    notes += [f"{len(doc[f'only_in_{s}'])} cell(s) only in {s.upper()}" for s in ("a", "b") if doc[f"only_in_{s}"]]
    return ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + f"</tr>{cells}</table>"
            + "".join(f"<p>{escape(n)}</p>" for n in notes if n))


def chart(conn, row: dict, run_a: str, run_b: str, rule, n: int) -> Chart | None:
    """The series of the row's cell and metric over the whole history, its change points
    (dashed lines, the segments' means drawn between them), runs A and B marked."""
    from matplotlib.figure import Figure
    found = regress.series_of(conn, row["cell"], row["metric"])
    if found is None:
        return None
    _, _, runs, values = found
    changes = (regress.changes(regress.detect(values, rule), runs, rule, 0, row["cell"], row["metric"])
               if len(values) >= rule.min_runs else [])
    xs = range(1, len(values) + 1)
    fig = Figure(figsize=(8, 2.8), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(xs, values, marker=".", linewidth=1, color="#1f77b4")
    bounds = [0, *(c.index for c in changes), len(values)]
    for lo, hi in zip(bounds, bounds[1:]):
        segment = values[lo:hi]
        ax.hlines(sum(segment) / len(segment), lo + 1, hi, colors="#555", linewidth=0.8)
    for c in changes:
        ax.axvline(c.index + 0.5, color=COLORS[c.kind], linestyle="--", linewidth=1.2)
        ax.annotate(f"{c.kind} {c.change_pct:+.1f}%", (c.index + 0.6, max(values)), fontsize=8,
                    color=COLORS[c.kind], va="top")
    for name, rid in (("A", run_a), ("B", run_b)):
        if rid in runs:
            i = runs.index(rid)
            ax.plot([i + 1], [values[i]], marker="o", markersize=8, fillstyle="none", color="black")
            ax.annotate(name, (i + 1, values[i]), textcoords="offset points", xytext=(4, 6), fontsize=9)
    ax.set_xlabel("run (in the order measured)")
    # names and labels are data: a "$" in them is text, never matplotlib's math
    ax.set_ylabel(row["metric"], parse_math=False)
    ax.set_title(f"{row['test']} {query.label_text(row['labels'])}"[:110], fontsize=9, parse_math=False)
    kinds = ", ".join(f"{c.kind} at run {c.index + 1} ({c.change_pct:+.1f}%)" for c in changes) or "none"
    caption = (f"{row['metric']} of cell {row['cell'][:8]} over {len(values)} runs, each point a run's mean; "
               f"horizontal lines: the segments' means; change points (Apache Otava, {rule.min_change_pct:g} % "
               f"minimum change): {kinds}; circles: runs A and B")
    fig_id = f"fig-{n}-{row['cell'][:8]}"
    return Chart(fig_id, caption, _svg(fig, fig_id))
