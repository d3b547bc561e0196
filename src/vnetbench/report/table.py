"""The one comparison table every format renders: rows = test x variable x placement,
columns = configurations (vswitch/network, per run when several runs are compared),
cells = the test's headline metric with the spread that fits it (vnetbench.results.spread),
flagged when unstable, and the vSwitch CPU% beside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from vnetbench.errors import VnetbenchError
from vnetbench.report.cpu import NOTE as CPU_NOTE
from vnetbench.report.cpu import ROUTER_NOTE
from vnetbench.report.cpu import cpu_text
from vnetbench.results.load import Run
from vnetbench.results.load import show
from vnetbench.results import bound as emulation
from vnetbench.results import spread
from vnetbench.results.record import Result

# What one report compares at most, so that any input the record schema admits renders in
# seconds (README, promises; bench/bench_report_bounds.py): a table wider than this is
# not readable anyway, and 5,000 configurations x 5,000 points once took 76 s
MAX_COLUMNS = 64           # configurations (vswitch/network, per run with several runs)
MAX_ROWS = 500             # test x variable x placement
# test -> the metrics its table cells show, first one a record has
HEADLINE = {"icmp_rtt": ("rtt_mean_ms",), "tcp_stream": ("gbps",), "udp_stream": ("gbps",),
            "broadcast": ("answered_loss_pct", "loss_pct"), "flow_setup": ("loss_pct",),
            "rfc2544_throughput": ("ndr_fps",), "rfc2544_latency": ("rtt_avg_ms",),
            "rfc2544_frame_loss": ("frame_loss_pct",), "rfc2544_back_to_back": ("burst_frames",),
            "udp_fairness": ("jain_index",), "scale": ("aggregate_gbps", "aggregate_cps"),
            "port_ready": ("first_packet_p95_ms",)}


@dataclass
class Column:
    label: str                  # "ovs/vxlan", "ovs/vlan svi", or "ovs/vxlan (run)" with several runs
    vswitch: str
    network: str
    run: str
    records: list = field(default_factory=list)    # every record of it, N/A ones too
# test -> (metric, variable suffix): a second definition of the same measurement, shown as
# a row of its own beside the headline. Broadcast: the headline is loss as the sender sees
# it (requests not answered), which reproduces seed 003's three columns (OpenContrail's 0%
# ARP loss is its proxy ARP answering); requests not delivered to the peer beside it
BESIDE = {"broadcast": (("loss_pct", "delivered"),),
          # port_ready: the headline is a step's p95 to first packet; the other stages beside
          "port_ready": (("programmed_p50_ms", "programmed p50"), ("programmed_p95_ms", "programmed p95"),
                         ("first_packet_p50_ms", "first packet p50"), ("not_ready", "never ready"))}


@dataclass(frozen=True)
class Row:
    test: str
    variable: str               # mode / point, e.g. "flood", "mss 1468", "p=5", "100/s"
    placement: str
    metric: str

    @property
    def label(self) -> str:
        return " ".join(x for x in (self.test, self.variable) if x)


@dataclass(frozen=True)
class Cell:
    record: Result | None = None
    na: str = ""                # why this configuration could not be measured
    # spreads computed once: every format asks for them (a 64-column table has thousands)
    _spreads: dict = field(default_factory=dict, compare=False, repr=False)

    def stat(self, metric: str) -> dict:
        return self.record.metrics.get(metric, {}) if self.record else {}

    @property
    def mss_used(self):
        """The MSS a tcp_stream point really ran at, when the path forced another one."""
        p = self.record.labels.get("params", {}) if self.record else {}
        return p.get("used") if p.get("used") not in (None, p.get("nominal")) else None

    def spread(self, metric: str) -> spread.Spread | None:
        """The metric's spread by the rules of vnetbench.results.spread (None: no value)."""
        if not self.record or metric not in self.record.samples:
            return None
        if metric not in self._spreads:
            self._spreads[metric] = spread.of(self.record, metric)
        return self._spreads[metric]

    @cached_property
    def bound(self) -> list[emulation.Bound]:
        """The emulating components at their CPU ceiling while this cell was measured."""
        return emulation.bound(self.record)

    def text(self, metric: str) -> str:
        """e.g. '1.02 ±0.05 ci @1410 (86% CPU ±4 ci)', '9.4 [3–16] ! ‡ (86% CPU [80–90])';
        'N/A'; '' when not measured."""
        if self.na or not self.record:
            return "N/A" if self.na else ""
        s, cpu = self.spread(metric), self.spread("cpu_pct")
        value = s.text() + (" !" if s.unstable else "") if s else "-"
        value += f" @{self.mss_used}" if self.mss_used else ""
        value += f" {emulation.MARK}" if self.bound else ""
        if cpu is None or cpu.mean is None:
            return value
        return value + f" ({cpu_text(self.record, cpu.text('% CPU', lambda x: f'{x:.0f}'))})"


@dataclass
class Table:
    columns: list
    rows: list
    cells: dict                 # (row, column label) -> Cell

    def cell(self, row: Row, column: Column) -> Cell:
        return self.cells.get((row, column.label), Cell())

    def tests(self) -> list[str]:
        return list(dict.fromkeys(r.test for r in self.rows))

    def spreads(self) -> list[spread.Spread]:
        """The headline spread of every measured cell."""
        return [s for row in self.rows for c in self.columns
                if (s := self.cell(row, c).spread(row.metric)) is not None and s.mean is not None]

    def emulation_bound(self) -> list[str]:
        """The conclusions this machine cannot support: per row, the columns whose cell was
        emulation-bound and by what (one line each), for the summary under the table."""
        out = []
        userspace = [c.label for c in self.columns
                     if any((r.provenance or {}).get("ovs_datapath") == "netdev" for r in c.records)]
        if userspace:
            ports = sorted({str((r.provenance or {}).get("ovs_ports") or "AF_PACKET").replace("afxdp", "AF_XDP")
                            .replace("afpacket", "AF_PACKET") for c in self.columns for r in c.records
                            if (r.provenance or {}).get("ovs_datapath") == "netdev"})
            out.append(f"{', '.join(userspace)}: OVS's userspace datapath (netdev on {' / '.join(ports)} ports; the "
                       "modelled systems forward in a kernel module): their throughput and latency are the "
                       "emulation's on every row, CPU-bound or not; ‡ marks where it ran out of CPU")
        for row in self.rows:
            hit = [(c.label, b) for c in self.columns for b in self.cell(row, c).bound]
            if hit:
                cols = ", ".join(dict.fromkeys(label for label, _ in hit))
                why = "; ".join(dict.fromkeys(f"{b.component} up to {b.peak_pct:.0f}%" for _, b in hit))
                out.append(f"{row.label} {row.placement}: {cols} emulation-bound ({why}): this row "
                           f"does not rank {'that column' if len({label for label, _ in hit}) == 1 else 'those columns'} "
                           f"against the others")
        return out

    def combined(self) -> str:
        """How the report combines the records it was given (several runs, repeated cells)."""
        runs = list(dict.fromkeys(c.run for c in self.columns if c.run))
        out = "each configuration is one column; a later record of a cell replaces an earlier one of the same run"
        if runs:
            out = (f"{len(runs)} runs ({', '.join(runs[:8])}{', ...' if len(runs) > 8 else ''}): each run's "
                   "configurations are columns of their own, side by side (never pooled); within a run, a "
                   "later record of a cell replaces an earlier one")
        return out

    def stability(self) -> str:
        """How many cells are unstable or have no spread at all, and what to do about it."""
        cells = self.spreads()
        bad = sum(s.unstable for s in cells)
        single = sum(s.kind == "none" for s in cells)
        out = f"stability: {bad} of {len(cells)} cells unstable (marked !)"
        out += f", {single} from a single repetition (no spread)" if single else ""
        if bad or single:
            out += f"; to firm them up: {spread.UNSTABLE_FIX}"
        return out


def build(runs: list[Run]) -> Table:
    """A later record of the same row and column replaces an earlier one (records are
    appended as they are measured). An N/A record covers its test's rows in its column.
    Several runs: each run's configurations are columns of their own, side by side
    (``combined``). More than MAX_COLUMNS columns or MAX_ROWS rows: refused, naming the
    run that went past the limit."""
    columns, cells, na, rows, distinct = {}, {}, [], [], set()
    for run in runs:
        for r in run.records:
            if r.test == "fault":          # an event (vnetbench.faults), not a measured point
                continue
            col = _column(columns, r, run.name if len(runs) > 1 else "")
            if len(columns) > MAX_COLUMNS:
                raise VnetbenchError(
                    f"{show(run.path or run.name)}: more than {MAX_COLUMNS} configurations to compare "
                    f"(vswitch/network{' per run' if len(runs) > 1 else ''}); a report compares at most "
                    f"{MAX_COLUMNS}: report fewer runs or split the records by configuration")
            col.records.append(r)
            if "not_applicable" in r.extra:
                na.append((r, col))
                continue
            rows.append(_row(r))
            distinct.add(rows[-1])
            if len(distinct) > MAX_ROWS:
                raise VnetbenchError(
                    f"{show(run.path or run.name)}: more than {MAX_ROWS} rows (test x point x placement); "
                    f"a report shows at most {MAX_ROWS}: split the records by test")
            cells[(rows[-1], col.label)] = Cell(r)
            head = rows[-1]                 # each beside-row hangs off the headline's
            for metric, suffix in BESIDE.get(r.test, ()):
                if metric in r.samples and metric != head.metric:
                    rows.append(Row(head.test, f"{head.variable} {suffix}".strip(), head.placement, metric))
                    cells[(rows[-1], col.label)] = Cell(r)
    rows += [Row(r.test, "", "-", "") for r, _ in na if not any(covers(r.test, x.test) for x in rows)]
    for r, col in na:
        for row in (x for x in rows if covers(r.test, x.test)):
            cells.setdefault((row, col.label), Cell(na=r.extra["not_applicable"]))
    return Table(_ordered_columns(columns.values()), _ordered_rows(rows), cells)


def covers(na_test: str, test: str) -> bool:
    """An N/A record of 'rfc2544' stands for rfc2544_throughput, _latency, ..."""
    return test == na_test or test.startswith(na_test + "_")


def _column(columns: dict, r: Result, run: str) -> Column:
    vswitch, network = r.labels["vswitch"], r.labels["network"]
    routing = r.labels.get("routing")           # seed 000's testbeds: "ovs/vlan svi", "ovs/vlan stick"
    label = f"{vswitch}/{network}" + (f" {routing}" if routing else "") + (f" ({run})" if run else "")
    return columns.setdefault(label, Column(label, vswitch, network, run))


def _row(r: Result) -> Row:
    params = r.labels.get("params", {})
    if r.test == "tcp_stream" and "nominal" in params:     # the MSS used goes in the cell
        variable = f"mss {params['nominal']}"
    else:
        variable = " ".join(str(x) for x in (params.get("mode"), r.labels.get("point")) if x)
    metric = next((k for k in HEADLINE.get(r.test, ()) if k in r.samples), "")
    placement = r.labels.get("placement", "-")
    if r.labels.get("path", "l2") != "l2":          # a routed pair: its own row beside the L2 one
        placement = f"{placement} {r.labels['path']}"
    return Row(r.test, variable, placement, metric)


def _ordered_columns(columns) -> list[Column]:
    """Configurations in first-seen order, the runs of one configuration side by side."""
    columns = list(columns)
    configs = list(dict.fromkeys((c.vswitch, c.network) for c in columns))
    return sorted(columns, key=lambda c: configs.index((c.vswitch, c.network)))


def _ordered_rows(rows) -> list[Row]:
    """Grouped by test, then variable, then placement, each in first-seen order."""
    rows = list(dict.fromkeys(rows))
    first = lambda attr: {v: i for i, v in enumerate(dict.fromkeys(getattr(x, attr) for x in rows))}
    test, variable, placement = first("test"), first("variable"), first("placement")
    return sorted(rows, key=lambda x: (test[x.test], variable[x.variable], placement[x.placement]))


# how to read a cell; every format prints these
NOTES = ("cell: the test's headline metric with its spread, "
         "@N: the MSS the path really used when not the nominal one",
         *spread.NOTES,
         CPU_NOTE + "; its spread follows the rule for repetitions",
         ROUTER_NOTE,
         emulation.NOTE,
         "N/A: the configuration cannot be built on the machine that ran it (the reason is "
         "listed, and shown on hover in HTML); blank: not measured")
