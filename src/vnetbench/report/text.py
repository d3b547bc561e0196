"""The table as plain text (the seed's layout, printed by `vnetbench compare`), as
Markdown (one table per test, for pull requests and wikis) and as CSV (one line per
cell with the numbers unformatted, for spreadsheets and scripts)."""

from __future__ import annotations

import csv
import io

from vnetbench.cpu import PART_METRICS
from vnetbench.report.cpu import cpu_method, routed, router_na
from vnetbench.report.table import NOTES, Table
from vnetbench.results.bound import MARK


def plain(table: Table) -> str:
    head = ["test [metric]", "placement"] + [c.label for c in table.columns]
    body = [[f"{row.label} [{row.metric}]", row.placement] +
            [table.cell(row, c).text(row.metric) for c in table.columns] for row in table.rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    fmt = lambda line: " | ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip()
    lines = [fmt(head), "-+-".join("-" * w for w in widths)] + [fmt(b) for b in body]
    return "\n".join(lines + ["", table.stability(), table.combined()] + bound_list(table) + list(NOTES) + na_list(table)) + "\n"


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
    notes = [table.stability(), table.combined(), *bound_list(table), *NOTES, *na_list(table)]
    return "\n".join(out + [f"- {n}" for n in notes]) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def bound_list(table: Table) -> list[str]:
    """The summary's list of what this machine cannot conclude (emulation-bound rows)."""
    rows = table.emulation_bound()
    return (["conclusions this machine cannot support (emulated datapaths; rows marked "
             f"{MARK}: emulation-bound):"] + [f"  {r}" for r in rows]) if rows else []


def na_list(table: Table) -> list[str]:
    """'N/A linuxbridge/vlan: kernel lacks ...', once per configuration and reason; the
    same for the router CPU of routed rows ('router CPU N/A ovn/geneve: ...')."""
    tests = list(dict.fromkeys(f"N/A {c.label}: {r.extra['not_applicable']}"
                               for c in table.columns for r in c.records if "not_applicable" in r.extra))
    routers = list(dict.fromkeys(f"router CPU N/A {c.label}: {why}" for c in table.columns
                                 for r in c.records if routed(r) and (why := router_na(r))))
    return tests + routers


CSV_FIELDS = ("configuration", "run", "vswitch", "network", "test", "variable", "placement",
              "metric", "mean", "spread", "lo", "hi", "unstable", "ci95", "sd", "n", "repetitions",
              "p50", "p99", "cpu_pct", "cpu_lo", "cpu_hi", "cpu_pct_err", *PART_METRICS,
              "cpu_router_pct", "cpu_router_pct_err", "cpu_router_na", "cpu_method",
              "vswitch_proc_pct", "softirq_pct",
              "mss_used", "emulation_bound", "not_applicable")


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
    """spread: sd | ci | range | search | none (vnetbench.results.spread); lo/hi: its bounds."""
    mean = lambda k: cell.stat(k).get("mean")
    out = {"configuration": column.label, "run": column.run, "vswitch": column.vswitch,
           "network": column.network, "test": row.test, "variable": row.variable,
           "placement": row.placement, "metric": row.metric,
           "cpu_pct_err": mean("cpu_pct_err"), **{k: mean(k) for k in PART_METRICS},
           "cpu_router_pct": mean("cpu_router_pct"), "cpu_router_pct_err": mean("cpu_router_pct_err"),
           "cpu_router_na": router_na(cell.record) if cell.record else None,
           "cpu_method": cpu_method(cell.record),
           "vswitch_proc_pct": mean("vswitch_proc_pct"), "softirq_pct": mean("softirq_pct"),
           "mss_used": cell.mss_used, "not_applicable": cell.na,
           "emulation_bound": "; ".join(b.text() for b in cell.bound)}
    s, cpu = cell.spread(row.metric), cell.spread("cpu_pct")
    if s:
        out.update(mean=s.mean, spread=s.kind, lo=s.lo, hi=s.hi, unstable=int(s.unstable),
                   ci95=s.ci95, sd=s.sd, n=s.n, repetitions=s.repetitions, p50=s.p50, p99=s.p99)
    if cpu:
        out.update(cpu_pct=cpu.mean, cpu_lo=cpu.lo, cpu_hi=cpu.hi)
    return out
