"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no
external resources, so it can be mailed, attached to a ticket or opened offline."""

from __future__ import annotations

import time
from html import escape

from vnetbench.report.charts import Chart, left_out
from vnetbench.report.cpu import router_na, routed
from vnetbench.results.load import Run
from vnetbench.report.provenance import summary
from vnetbench.report.table import NOTES, Row, Table

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:2px 6px}
th{background:#f3f3f3;text-align:left;white-space:nowrap}td.v{text-align:right;white-space:nowrap}
td.na{color:#999;text-align:center}span.cpu{color:#666;font-size:85%}
td.unstable{background:#fde2c8}td.bound{background:#e4e4f7}p.stability{font-weight:bold}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-style:italic}
caption{text-align:left;font-weight:bold}"""


def page(runs: list[Run], table: Table, charts: list[Chart], title="vnetbench comparison",
         functional=()) -> str:
    sources = "".join(f"<li>{escape(r.name or '-')}: {escape(str(r.path or ''))} "
                      f"({len(r.records)} records)</li>" for r in runs)
    body = [f"<h1>{escape(title)}</h1>",
            f"<p>Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} from:</p><ul>{sources}</ul>",
            f"<p id='combined'>{escape(table.combined())}</p>",
            f"<p class='stability' id='stability'>{escape(table.stability())}</p>",
            _bound(table),
            "<h2 id='notes'>Reading notes</h2><ul>" +
            "".join(f"<li>{escape(n)}</li>" for n in NOTES) + "</ul>",
            "<h2 id='charts'>Charts</h2>",
            f"<p class='stability'>{escape(left_out(table))}</p>" if left_out(table) else ""] + \
           [_figure(c) for c in charts] + \
           ["<h2 id='tables'>Tables</h2>"] + [_table(table, t) for t in table.tests()] + \
           [f"<h2 id='functional'>Functional matrix</h2><p>{escape(str(src))}</p>{m.html()}"
            for src, m in functional] + \
           ["<h2 id='provenance'>Provenance</h2>", _provenance(table)]
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>\n" +
            "\n".join(body) + "\n</body></html>\n")


def _bound(table: Table) -> str:
    rows = table.emulation_bound()
    if not rows:
        return ""
    return ("<h2 id='emulation-bound'>Conclusions this machine cannot support</h2><ul>" +
            "".join(f"<li>{escape(r)}</li>" for r in rows) + "</ul>")


def _figure(chart: Chart) -> str:
    return (f"<figure id='{chart.id}'>{chart.svg}"
            f"<figcaption>{escape(chart.caption)}</figcaption></figure>")


def _table(table: Table, test: str) -> str:
    head = "".join(f"<th>{escape(c.label)}</th>" for c in table.columns)
    rows = [r for r in table.rows if r.test == test]
    body = "".join(f"<tr><th>{escape(r.variable)} [{escape(r.metric)}]</th><th>{escape(r.placement)}"
                   f"</th>{''.join(_cell(table, r, c) for c in table.columns)}</tr>" for r in rows)
    return (f"<table id='table-{escape(test)}'><caption>{escape(test)}</caption>"
            f"<tr><th>variable [metric]</th><th>placement</th>{head}</tr>{body}</table>")


def _cell(table: Table, row: Row, column) -> str:
    cell = table.cell(row, column)
    if cell.na:
        return f"<td class='na' title='{escape(cell.na)}'>N/A</td>"
    if not cell.record:
        return "<td></td>"
    s = cell.spread(row.metric)
    hover = s.describe() if s and s.mean is not None else "no value"
    value, _, cpu = cell.text(row.metric).partition(" (")
    cpu = f" <span class='cpu'>({escape(cpu)}</span>" if cpu else ""
    cls = "v unstable" if s and s.unstable else "v"
    if routed(cell.record) and (why := router_na(cell.record)):
        hover += "; router CPU N/A: " + why
    if cell.bound:
        cls += " bound"
        hover += "; emulation-bound: " + "; ".join(b.text() for b in cell.bound)
    return f"<td class='{cls}' title='{escape(hover)}'>{escape(value)}{cpu}</td>"


def _provenance(table: Table) -> str:
    cols = summary(table)
    names = list(dict.fromkeys(k for _, fields in cols for k in fields))
    head = "".join(f"<th>{escape(c.label)}</th>" for c, _ in cols)
    body = "".join(f"<tr><th>{escape(n)}</th>" +
                   "".join(f"<td>{escape(f.get(n, ''))}</td>" for _, f in cols) + "</tr>"
                   for n in names)
    return f"<table id='provenance-table'><tr><th></th>{head}</tr>{body}</table>"
