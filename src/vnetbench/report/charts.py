"""The report's charts as inline SVG (matplotlib, no pyplot state, no JS, no external
files): RTT, TCP Gbit/s vs MSS used, UDP Gbit/s and loss vs sessions, broadcast loss,
flow-setup loss vs rate, CPU% per test. A chart without data is left out. Charts show
means; the tables beside them carry the confidence intervals."""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib
from matplotlib.figure import Figure

from vnetbench.report.table import Table

PLACEMENTS = ("same-host", "cross-host")


@dataclass(frozen=True)
class Chart:
    id: str
    caption: str
    svg: str


def charts(table: Table) -> list[Chart]:
    colors = {c.label: matplotlib.colormaps["tab20" if len(table.columns) > 10 else "tab10"](i % 20)
              for i, c in enumerate(table.columns)}
    made = [
        _bars("fig-rtt", "ICMP RTT per configuration (mean of rtt_mean_ms; time-deferred = "
              "first packet of a flow, flood = steady state)", "RTT (ms)",
              _by_row(table, "icmp_rtt", "rtt_mean_ms")),
        _lines("fig-tcp", "TCP throughput vs the MSS really used on the wire, one line per "
               "configuration", "Gbit/s", "MSS used (bytes)", colors,
               _series(table, "tcp_stream", "used", "gbps")),
        _lines("fig-udp", "UDP throughput and receiver loss vs parallel sessions", "Gbit/s",
               "sessions", colors, _series(table, "udp_stream", "sessions", "gbps"),
               ("loss %", _series(table, "udp_stream", "sessions", "loss_pct"))),
        _bars("fig-broadcast", "Broadcast loss per configuration (ARP requests, ICMP to the "
              "broadcast address)", "loss %", _by_row(table, "broadcast", "loss_pct")),
        _lines("fig-flow", "Flow-setup loss (failed or late connections) vs new TCP flows per "
               "second", "loss %", "new connections/s (log)", colors,
               _series(table, "flow_setup", "rate", "loss_pct"), logx=True),
        _bars("fig-cpu", "Host-side vSwitch CPU% per test (mean over the test's points; "
              "100% = one CPU)", "CPU %", _cpu(table), colors=colors),
    ]
    return [c for c in made if c]


def _by_row(table, test, metric) -> dict:
    """{bar series 'variable placement': {column: mean}} of one test."""
    out = {}
    for row in (r for r in table.rows if r.test == test):
        for c in table.columns:
            mean = table.cell(row, c).stat(metric).get("mean")
            if mean is not None:
                out.setdefault(f"{row.variable} {row.placement}".strip(), {})[c.label] = mean
    return out


def _series(table, test, param, metric) -> dict:
    """{placement: {column: [(x, mean), ...] sorted by x}} with x = params[param]."""
    out = {}
    for row in (r for r in table.rows if r.test == test):
        for c in table.columns:
            cell = table.cell(row, c)
            x = cell.record.labels.get("params", {}).get(param) if cell.record else None
            y = cell.stat(metric).get("mean")
            if x is not None and y is not None:
                out.setdefault(row.placement, {}).setdefault(c.label, []).append((x, y))
    return {p: {c: sorted(xy) for c, xy in cols.items()} for p, cols in out.items()}


def _cpu(table) -> dict:
    """{column: {'test placement': mean cpu_pct over the test's points}}."""
    sums = {}
    for row in table.rows:
        for c in table.columns:
            cpu = table.cell(row, c).stat("cpu_pct").get("mean")
            if cpu is not None:
                sums.setdefault(c.label, {}).setdefault(f"{row.test} {row.placement}", []).append(cpu)
    return {col: {k: sum(v) / len(v) for k, v in groups.items()} for col, groups in sums.items()}


def _bars(fig_id, caption, ylabel, series: dict, colors=None) -> Chart | None:
    """Grouped bars: one group per x label, one bar (and legend entry) per series."""
    if not series:
        return None
    groups = list(dict.fromkeys(g for values in series.values() for g in values))
    width = 0.8 / len(series)
    fig = Figure(figsize=(min(14.0, max(7.0, 0.4 * len(groups) * len(series) ** 0.5)), 3.8),
                 layout="constrained")
    ax = fig.add_subplot()
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g, label in enumerate(groups)
              if label in values]
        ax.bar(xs, [values[g] for g in groups if g in values], width, label=name,
               color=(colors or {}).get(name))
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    if not any(v for values in series.values() for v in values.values()):
        caption += "; every value is 0"
    return Chart(fig_id, caption, _svg(fig, fig_id))


def _lines(fig_id, caption, ylabel, xlabel, colors, series: dict, second=None,
           logx=False) -> Chart | None:
    """One panel per placement (and a second row of panels for another metric)."""
    if not series:
        return None
    panels = [(ylabel, series)] + ([second] if second else [])
    places = [p for p in PLACEMENTS if p in series] + [p for p in series if p not in PLACEMENTS]
    fig = Figure(figsize=(4.2 * len(places) + 2, 3.2 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), len(places), squeeze=False)
    for (label, data), row in zip(panels, axes):
        for place, ax in zip(places, row):
            for col, xy in data.get(place, {}).items():
                ax.plot(*zip(*xy), marker="o", label=col, color=colors[col])
            ax.set(title=place, xlabel=xlabel, ylabel=label)
            ax.set_xscale("log" if logx else "linear")
            ax.grid(alpha=0.3)
    handles = {h.get_label(): h for ax in axes.flat for h in ax.get_lines()}
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=8)
    return Chart(fig_id, caption, _svg(fig, fig_id))


def _svg(fig: Figure, fig_id: str) -> str:
    """The <svg> element alone, text kept as text, ids salted per chart so several
    charts can live in one HTML page."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": fig_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]
