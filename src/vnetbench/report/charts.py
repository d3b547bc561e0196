"""The report's charts as inline SVG (matplotlib, no pyplot state, no JS, no external
files): RTT, TCP Gbit/s vs MSS used, UDP Gbit/s and loss vs sessions, broadcast loss,
flow-setup loss vs rate, RFC 2544 NDR, CPU% per test. A chart without data is left out.
Every point carries an error bar with the same spread as its table cell
(vnetbench.results.spread) and every caption says what the bars are."""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from vnetbench.report.table import Table
from vnetbench.results.spread import num

PLACEMENTS = ("same-host", "cross-host")
BARS = ("error bars: the cell's spread -- RTT ±sd of the echoes; other metrics 95% CI "
        "from 3 repetitions, min–max with 2, none with 1")
SEARCH_BARS = ("error bars: the search's final bracket (highest passing to lowest failing "
               "rate), an arrow when even its top rate passed")
# what one chart draws at most: beyond it the legend is unreadable and matplotlib takes
# seconds a chart (64 configurations: 3 s); the report then leaves the charts out and
# says so (every figure is still in the tables)
MAX_SERIES = 16            # configurations (columns)
MAX_ROWS = 100             # rows of the table (bar groups, line points)
CPU_BARS = ("error bars: the lowest and highest point of the test (its points differ in "
            "load, e.g. MSS or rate)")


@dataclass(frozen=True)
class Chart:
    id: str
    caption: str
    svg: str


def left_out(table: Table) -> str:
    """Why the report draws no charts for ``table`` ('' when it draws them)."""
    if len(table.columns) > MAX_SERIES:
        return (f"charts left out: {len(table.columns)} configurations, a chart draws at most "
                f"{MAX_SERIES}; every figure is in the tables (report fewer runs for charts)")
    if len(table.rows) > MAX_ROWS:
        return (f"charts left out: {len(table.rows)} rows, a chart draws at most {MAX_ROWS}; "
                "every figure is in the tables")
    return ""


def charts(table: Table) -> list[Chart]:
    if left_out(table):
        return []
    colors = {c.label: matplotlib.colormaps["tab20" if len(table.columns) > 10 else "tab10"](i % 20)
              for i, c in enumerate(table.columns)}
    colors.update(_port_ready_colors(table, colors))
    made = [
        _bars("fig-rtt", "ICMP RTT per configuration (mean over all echoes; time-deferred = "
              f"first packet of a flow, flood = steady state); {BARS}", "RTT (ms)",
              _by_row(table, "icmp_rtt", "rtt_mean_ms")),
        _lines("fig-tcp", "TCP throughput vs the MSS really used on the wire, one line per "
               f"configuration; {BARS}", "Gbit/s", "MSS used (bytes)", colors,
               _series(table, "tcp_stream", "used", "gbps")),
        _lines("fig-udp", f"UDP throughput and receiver loss vs parallel sessions; {BARS}",
               "Gbit/s", "sessions", colors, _series(table, "udp_stream", "sessions", "gbps"),
               ("loss %", _series(table, "udp_stream", "sessions", "loss_pct"))),
        _bars("fig-broadcast", "Broadcast loss per configuration (ARP requests, ICMP to the "
              f"broadcast address); {BARS}", "loss %", _by_row(table, "broadcast", "loss_pct")),
        _lines("fig-flow", "Flow-setup loss (failed or late connections) vs new TCP flows per "
               f"second; {BARS}", "loss %", "new connections/s (log)", colors,
               _series(table, "flow_setup", "rate", "loss_pct"), logx=True),
        _bars("fig-rfc2544", "RFC 2544 throughput (NDR, zero loss) per frame size and "
              f"configuration; {SEARCH_BARS}", "frames/s",
              _by_row(table, "rfc2544_throughput", "ndr_fps")),
        _lines("fig-port-ready", "New ports: ms from the request to programmed (the kind's own "
               "signal, top) and to the first packet both ways (bottom), p50 / p95 / max of a step, "
               "vs the ports that already exist, a line per configuration and chassis count "
               "(docs/control-plane.md)", "programmed (ms)",
               "existing ports", colors, _port_ready(table, "programmed"),
               ("first packet (ms)", _port_ready(table, "first_packet"))),
        _bars("fig-cpu", "Host-side vSwitch CPU% per test (mean over the test's points; "
              f"100% = one CPU); {CPU_BARS}", "CPU %", _cpu(table), colors=colors),
    ]
    return [c for c in made if c]


@dataclass(frozen=True)
class Point:
    """A plotted mean with the bounds of its error bar (hi None: open upwards)."""
    y: float
    lo: float | None = None
    hi: float | None = None
    open_top: bool = False


def _point(spread) -> Point:
    return Point(spread.mean, spread.lo, spread.hi, spread.kind == "search" and spread.hi is None)


def _by_row(table, test, metric) -> dict:
    """{bar series 'variable placement': {column: Point}} of one test."""
    out = {}
    for row in (r for r in table.rows if r.test == test):
        for c in table.columns:
            s = table.cell(row, c).spread(metric)
            if s is not None and s.mean is not None:
                out.setdefault(f"{row.variable} {row.placement}".strip(), {})[c.label] = _point(s)
    return out


def _series(table, test, param, metric) -> dict:
    """{placement: {column: [(x, Point), ...] sorted by x}} with x = params[param]."""
    out = {}
    for row in (r for r in table.rows if r.test == test):
        for c in table.columns:
            cell = table.cell(row, c)
            x = cell.record.labels.get("params", {}).get(param) if cell.record else None
            s = cell.spread(metric)
            if x is not None and s is not None and s.mean is not None:
                out.setdefault(row.placement, {}).setdefault(c.label, []).append((x, _point(s)))
    return {p: {c: sorted(xy, key=lambda t: t[0]) for c, xy in cols.items()}
            for p, cols in out.items()}


def _port_ready(table, stage) -> dict:
    """{quantile: {line: [(existing ports, Point)]}} of one port_ready stage, a line per
    configuration and chassis count ("ovn/geneve, 50 chassis"): steps on 8 and on 50
    chassis are never one line."""
    out: dict = {}
    for row in (r for r in table.rows if r.test == "port_ready"):
        for c in table.columns:
            cell = table.cell(row, c)
            params = cell.record.labels.get("params", {}) if cell.record else {}
            for q in ("p50", "p95", "max") if params.get("existing") is not None else ():
                s = cell.spread(f"{stage}_{q}_ms")
                if s is not None and s.mean is not None:     # a beside-row holds the same record
                    line = out.setdefault(q, {}).setdefault(_port_ready_line(c.label, params), {})
                    line[params["existing"]] = _point(s)
    return {q: {name: sorted(xy.items()) for name, xy in lines.items()} for q, lines in out.items()}


def _port_ready_line(column: str, params: dict) -> str:
    return f"{column}, {params['chassis']} chassis" if params.get("chassis") else column


def _port_ready_colors(table, colors: dict) -> dict:
    """Each port_ready line in its configuration's colour."""
    return {_port_ready_line(c.label, r.labels.get("params", {})): colors[c.label]
            for c in table.columns for r in c.records if r.test == "port_ready"}


def _cpu(table) -> dict:
    """{column: {'test placement': Point(mean over the test's points, lowest, highest)}}."""
    groups = {}
    for row in table.rows:
        for c in table.columns:
            cpu = table.cell(row, c).stat("cpu_pct").get("mean")
            if cpu is not None:
                groups.setdefault(c.label, {}).setdefault(f"{row.test} {row.placement}", []).append(cpu)
    return {col: {k: Point(sum(v) / len(v), min(v), max(v)) for k, v in g.items()}
            for col, g in groups.items()}


def _yerr(points) -> list:
    """Asymmetric error bar lengths [[below...], [above...]] (0 where there is no spread)."""
    return [[p.y - p.lo if p.lo is not None else 0.0 for p in points],
            [p.hi - p.y if p.hi is not None else 0.0 for p in points]]


def _tag(container, gid: str) -> None:
    """Name the error bar lines in the SVG (<g id=...>) so a reader or test can find them."""
    for lines in container.lines[2]:
        lines.set_gid(gid)


def _open_tops(ax, xs, points, color) -> None:
    """An upward arrow where a search found no failing rate (the value is a lower bound)."""
    for x, p in zip(xs, points):
        if p.open_top:
            ax.annotate("", (x, p.y * 1.15), (x, p.y), arrowprops={"arrowstyle": "->", "color": color})


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
        points = [values[g] for g in groups if g in values]
        bars = ax.bar(xs, [p.y for p in points], width, label=name, color=(colors or {}).get(name),
                      yerr=_yerr(points), capsize=2, error_kw={"elinewidth": 0.8})
        _tag(bars.errorbar, f"{fig_id}-err-{i}")
        _open_tops(ax, xs, points, "black")
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_formatter(_numbers())
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    if not any(p.y for values in series.values() for p in values.values()):
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
    for k, ((label, data), row) in enumerate(zip(panels, axes)):
        for j, (place, ax) in enumerate(zip(places, row)):
            for i, (col, xy) in enumerate(data.get(place, {}).items()):
                xy = [(x, p) for x, p in xy if x > 0] if logx else xy     # a log axis has no 0
                xs, points = [x for x, _ in xy], [p for _, p in xy]
                bars = ax.errorbar(xs, [p.y for p in points], yerr=_yerr(points), marker="o",
                                   label=col, color=colors[col], capsize=3, elinewidth=0.8)
                _tag(bars, f"{fig_id}-err-{k}-{j}-{i}")
            ax.set(title=place, xlabel=xlabel, ylabel=label)
            ax.yaxis.set_major_formatter(_numbers())
            _integer_x(ax, sorted({x for xy in data.get(place, {}).values() for x, _ in xy
                                   if x > 0 or not logx}), logx)
            ax.grid(alpha=0.3)
    handles = {label: h for ax in axes.flat for h, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(handles.values()), list(handles), loc="outside right upper", fontsize=8)
    return Chart(fig_id, caption, _svg(fig, fig_id))


def _numbers() -> FuncFormatter:
    """Value ticks as the tables print numbers: 160,000 frames/s, not 1.6e5 or 160000."""
    return FuncFormatter(lambda y, _: num(y, 6))


def _integer_x(ax, xs, logx) -> None:
    """Counts (sessions, flows/s, bytes) get whole-number ticks: the measured points on a
    log axis (10, 100, 1,000, 10,000 -- no 10^3), integers only on a linear one."""
    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_minor_locator(NullLocator())
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))


def _svg(fig: Figure, fig_id: str) -> str:
    """The <svg> element alone, text kept as text, ids salted per chart so several
    charts can live in one HTML page."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": fig_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]
