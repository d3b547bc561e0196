"""Efficiency: vSwitch CPU-seconds spent per unit of work, so configurations with
different throughput can be compared on cost (cpu_pct/100 = CPU-seconds per second)."""

from dataclasses import dataclass

from grafana_foundation_sdk.builders import barchart
from grafana_foundation_sdk.builders import dashboard as dash

from . import common

UID = "vnetbench-efficiency"


@dataclass(frozen=True)
class Ratio:
    """CPU-seconds per (metric / divisor) of one test."""
    title: str
    test: str
    point_label: str
    metric: str
    divisor: str
    name: str


RATIOS = (
    Ratio("TCP: CPU-seconds per Gbit", "tcp_stream", "point", "gbps", "1",
          "CPU-s/Gbit"),
    Ratio("UDP: CPU-seconds per Gbit", "udp_stream", "sessions", "gbps", "1",
          "CPU-s/Gbit"),
    Ratio("UDP: CPU-seconds per Mpps", "udp_stream", "sessions", "pps", "1e6",
          "CPU-s/Mpps"),
    Ratio("Flow setup: CPU-seconds per 1,000 new flows/s", "flow_setup", "rate",
          "achieved_rate", "1000", "CPU-s per 1k flows/s"),
)


def expr(ratio: Ratio) -> str:
    """(cpu_pct/100) / (metric/divisor), matched on every label but `metric`;
    points with no work done are left out rather than shown as +Inf."""
    cpu = f"({common.result(ratio.test, 'cpu_pct')} / 100)"
    work = f"({common.result(ratio.test, ratio.metric)} / {ratio.divisor} > 0)"
    return f"{cpu} / ignoring(metric) {work}"


def panel(ratio: Ratio, panel_id: int) -> barchart.Panel:
    description = (f"(cpu_pct/100) / ({ratio.metric}/{ratio.divisor}) of "
                   f"{ratio.test}, per {ratio.point_label} "
                   "· vswitch/network · placement · run; lower is better")
    return (common.bars(panel_id, ratio.title, description)
            .with_target(common.instant(common.categorized(expr(ratio),
                                                           ratio.point_label), "A"))
            .transformations(common.category_transformations({"Value": ratio.name}))
            .unit("s")
            .span(12))


def build() -> dash.Dashboard:
    board = (dash.Dashboard("vnetbench: efficiency")
             .uid(UID)
             .tags(["vnetbench"])
             .time("now-24h", "now")
             .variables(common.result_variables())
             .annotation(common.faults()))
    for panel_id, ratio in enumerate(RATIOS, start=1):
        board.with_panel(panel(ratio, panel_id))
    return board
