"""Overlay comparison: the seed's data-plane table as bar charts, with the
vSwitch CPU% of the same point on a right axis of every panel, so a number is
never read without its cost."""

from dataclasses import dataclass

from grafana_foundation_sdk.builders import barchart
from grafana_foundation_sdk.builders import dashboard as dash

from . import common

UID = "vnetbench-overlay"
CPU_NAME = "vSwitch CPU%"


@dataclass(frozen=True)
class Metric:
    title: str
    metric: str
    unit: str
    name: str


@dataclass(frozen=True)
class Family:
    """One test of the battery and the label that tells its points apart."""
    title: str
    test: str
    point_label: str
    metrics: tuple[Metric, ...]


FAMILIES = (
    Family("ICMP RTT (single = deferred, flood)", "icmp_rtt", "mode", (
        Metric("RTT mean", "rtt_mean_ms", "ms", "RTT mean"),
        Metric("RTT p99", "rtt_p99_ms", "ms", "RTT p99"),
    )),
    Family("TCP stream by MSS (nominal->used)", "tcp_stream", "point", (
        Metric("TCP throughput by MSS", "gbps", "Gbits", "Gbit/s"),
    )),
    Family("UDP stream by sessions", "udp_stream", "sessions", (
        Metric("UDP throughput by sessions", "gbps", "Gbits", "Gbit/s"),
        Metric("UDP loss by sessions", "loss_pct", "percent", "loss %"),
    )),
    Family("Broadcast (arp, icmp)", "broadcast", "kind", (
        Metric("Broadcast loss", "loss_pct", "percent", "loss %"),
    )),
    Family("Flow setup by rate", "flow_setup", "rate", (
        Metric("Flow-rate loss", "loss_pct", "percent", "loss %"),
    )),
)


def panel(family: Family, metric: Metric, width: int, panel_id: int) -> barchart.Panel:
    """Value (A, left axis) and CPU% (B, right axis) per point and configuration."""
    def query(name: str, ref_id: str):
        return common.instant(common.categorized(common.result(family.test, name),
                                                 family.point_label), ref_id)
    description = (f"{family.test} {metric.metric} (mean over repetitions) and "
                   f"cpu_pct of the same point, per {family.point_label} "
                   "· vswitch/network · placement · run")
    return (common.bars(panel_id, metric.title, description)
            .with_target(query(metric.metric, "A"))
            .with_target(query("cpu_pct", "B"))
            .transformations(common.category_transformations(
                {"Value #A": metric.name, "Value #B": CPU_NAME}))
            .unit(metric.unit)
            .override_by_name(CPU_NAME, common.right_axis("percent"))
            .span(width))


def build() -> dash.Dashboard:
    board = (dash.Dashboard("vnetbench: overlay comparison")
             .uid(UID)
             .tags(["vnetbench"])
             .time("now-24h", "now")
             .variables(common.result_variables())
             .annotation(common.faults()))
    panel_id = 0
    for family in FAMILIES:
        panel_id += 1
        board.with_row(dash.Row(family.title).id(panel_id))
        for metric in family.metrics:
            panel_id += 1
            board.with_panel(panel(family, metric, 24 // len(family.metrics), panel_id))
    return board
