"""The table as plain text (the seed's layout, printed by `vnetbench compare`), as
Markdown (one table per test, for pull requests and wikis) and as CSV (one line per
cell with the numbers unformatted, for spreadsheets and scripts)."""

from __future__ import annotations

import csv
import io

from vnetbench.report.table import NOTES, Table


def plain(table: Table) -> str:
    head = ["test [metric]", "placement"] + [c.label for c in table.columns]
    body = [[f"{row.label} [{row.metric}]", row.placement] +
            [table.cell(row, c).text(row.metric) for c in table.columns] for row in table.rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    fmt = lambda line: " | ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip()
    lines = [fmt(head), "-+-".join("-" * w for w in widths)] + [fmt(b) for b in body]
    return "\n".join(lines + [""] + list(NOTES) + na_list(table)) + "\n"


def markdown(table: Table, title="vnetbench comparison") -> str:
    out = [f"# {title}", ""]
    for test in table.tests():
        rows = [r for r in table.rows if r.test == test]
        out += [f"## {test}", "",
                "| " + " | ".join(["variable [metric]", "placement"] +
                                   [c.label for c in table.columns]) + " |",
                "|" + "---|" * (2 + len(table.columns))]
        out += ["| " + " | ".join([f"{r.variable} [{r.metric}]", r.placement] +
                                  [_md(table.cell(r, c).text(r.metric)) for c in table.columns]) + " |"
                for r in rows]
        out.append("")
    return "\n".join(out + [f"- {n}" for n in NOTES] + [f"- {n}" for n in na_list(table)]) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def na_list(table: Table) -> list[str]:
    """'N/A linuxbridge/vlan: kernel lacks ...', once per configuration and reason."""
    return list(dict.fromkeys(f"N/A {c.label}: {r.extra['not_applicable']}"
                              for c in table.columns for r in c.records if "not_applicable" in r.extra))


CSV_FIELDS = ("configuration", "run", "vswitch", "network", "test", "variable", "placement",
              "metric", "mean", "ci95", "sd", "n", "cpu_pct", "vswitch_proc_pct", "softirq_pct",
              "mss_used", "not_applicable")


def csv_text(table: Table) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in table.rows:
        for c in table.columns:
            cell = table.cell(row, c)
            if cell.record or cell.na:
                w.writerow(_csv_row(row, c, cell))
    return buf.getvalue()


def _csv_row(row, column, cell) -> dict:
    m = cell.stat(row.metric)
    mean = lambda k: cell.stat(k).get("mean")
    return {"configuration": column.label, "run": column.run, "vswitch": column.vswitch,
            "network": column.network, "test": row.test, "variable": row.variable,
            "placement": row.placement, "metric": row.metric, "mean": m.get("mean"),
            "ci95": m.get("ci95"), "sd": m.get("sd"), "n": m.get("n"), "cpu_pct": mean("cpu_pct"),
            "vswitch_proc_pct": mean("vswitch_proc_pct"), "softirq_pct": mean("softirq_pct"),
            "mss_used": cell.mss_used, "not_applicable": cell.na}
