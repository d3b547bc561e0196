"""vSwitch CPU live: where the vSwitch spends CPU while a run goes on, with the
test windows marked so a burst can be tied to the test that caused it."""

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, timeseries
from grafana_foundation_sdk.builders.common import StackingConfig
from grafana_foundation_sdk.models.common import LineStyle, StackingMode
from grafana_foundation_sdk.models.dashboard import DynamicConfigValue

from . import common

UID = "vnetbench-vswitch-cpu"
RATE = "[$__rate_interval]"
COLLECTOR_FILTER = 'run_id=~"$run_id", host=~"$host"'
VSWITCH_FILTER = f'{COLLECTOR_FILTER}, vswitch=~"$vswitch"'
KSOFTIRQD = "of which ksoftirqd"


def test_windows() -> common.PrometheusAnnotation:
    """vnetbench_test_running == 1: Grafana joins consecutive points into a region."""
    return (common.PrometheusAnnotation()
            .name("Test windows")
            .datasource(common.DATASOURCE)
            .enable(True)
            .icon_color("rgba(255, 176, 0, 0.4)")
            .expr(f"vnetbench_test_running{{{common.RESULT_FILTER}}} == 1")
            .formats(title="{{test}} {{pair}}",
                     text="{{vswitch}}/{{network}} {{placement}} run {{run_id}}",
                     tag_keys="test,pair,vswitch,network", step="1s"))


def query(expr: str, legend: str, ref_id: str) -> prometheus.Dataquery:
    return (prometheus.Dataquery().expr(expr).range().legend_format(legend)
            .ref_id(ref_id).datasource(common.DATASOURCE))


def graph(title: str, description: str, unit: str, panel_id: int) -> timeseries.Panel:
    return (timeseries.Panel().id(panel_id).title(title).description(description)
            .datasource(common.DATASOURCE).unit(unit).fill_opacity(10)
            .height(9).span(12))


DATAPLANE = "vnetbench_dataplane_cpu_seconds_total"


def by_part(panel_id: int) -> timeseries.Panel:
    """The data-plane CPU's disjoint parts, stacked: the stack's top is the headline."""
    expr = (f"100 * sum by (host, part) (rate({DATAPLANE}{{{VSWITCH_FILTER}}}{RATE}))")
    return (graph("Data-plane CPU by part", "vswitch, controller, softirq_in_vswitch, "
                  "softirq_other, hardirq: disjoint, stacked; the top is the data-plane CPU "
                  "(docs/metrics.md; 100% = one CPU)", "percent", panel_id)
            .with_target(query(expr, "{{host}} {{part}}", "A"))
            .stacking(StackingConfig().mode(StackingMode.NORMAL)))


def by_component(panel_id: int) -> timeseries.Panel:
    expr = ("100 * sum by (host, part, component, thread_class) "
            f"(rate({DATAPLANE}{{{VSWITCH_FILTER}, "
            f'component=~"$component"}}{RATE}))')
    return (graph("Data-plane CPU by component", "each part by daemon thread class (vswitch, "
                  "controller, and the interrupts in their context) or by context (softirq_other: "
                  "idle, ksoftirqd, task), stacked (100% = one CPU)", "percent", panel_id)
            .with_target(query(expr, "{{host}} {{part}} {{component}}/{{thread_class}}", "A"))
            .stacking(StackingConfig().mode(StackingMode.NORMAL)))


def softirq(panel_id: int) -> timeseries.Panel:
    """ksoftirqd time is part of softirq time: drawn dashed, never stacked on it."""
    def rate(metric: str) -> str:
        return f"100 * sum by (host) (rate({metric}{{{COLLECTOR_FILTER}}}{RATE}))"
    return (graph("softirq CPU per host (tick-sampled, /proc/stat)", "softirq CPU of all "
                  "CPUs of a host, every vector, as the kernel's tick accounting sees it; the "
                  "dashed line is the part run by ksoftirqd", "percent", panel_id)
            .with_target(query(rate("vnetbench_softirq_cpu_seconds_total"),
                               "{{host}} softirq", "A"))
            .with_target(query(rate("vnetbench_ksoftirqd_cpu_seconds_total"),
                               f"{{{{host}}}} {KSOFTIRQD}", "B"))
            .override_by_regexp(f".*{KSOFTIRQD}", [DynamicConfigValue(
                id_val="custom.lineStyle",
                value=LineStyle(fill="dash", dash=[10, 10]).to_json())]))


def host_total(panel_id: int) -> timeseries.Panel:
    """The docs/metrics.md data-plane CPU% of a host: the sum of the parts."""
    expr = f"100 * sum by (run_id, host) (rate({DATAPLANE}{{{VSWITCH_FILTER}}}{RATE}))"
    return (graph("Data-plane CPU% per host", "the sum of the parts: what the results' "
                  "cpu_pct averages over a point", "percent", panel_id)
            .with_target(query(expr, "{{host}} run {{run_id}}", "A")))


def net_softirqs(panel_id: int) -> timeseries.Panel:
    expr = ("sum by (host, type) (rate(vnetbench_softirqs_total"
            f"{{{COLLECTOR_FILTER}}}{RATE}))")
    return (graph("NET_RX / NET_TX softirqs", "softirqs handled per second",
                  "ops", panel_id)
            .with_target(query(expr, "{{host}} {{type}}", "A")))


def lookups(panel_id: int) -> timeseries.Panel:
    expr = ("sum by (host, result) (rate(vnetbench_datapath_lookups_total"
            f"{{{VSWITCH_FILTER}}}{RATE}))")
    return (graph("Datapath lookups (hit / missed / lost)", "OVS datapath lookups "
                  "per second: missed go to the slow path, lost are dropped",
                  "ops", panel_id)
            .with_target(query(expr, "{{host}} {{result}}", "A")))


def flows(panel_id: int) -> timeseries.Panel:
    expr = f"sum by (host) (vnetbench_datapath_flows{{{VSWITCH_FILTER}}})"
    return (graph("Datapath flows", "flows installed in the OVS datapath",
                  "short", panel_id)
            .with_target(query(expr, "{{host}}", "A")))


def variables() -> list[dash.QueryVariable]:
    """The result variables (they filter the test windows too), then host and
    component from the collector."""
    cpu = DATAPLANE
    return [*common.result_variables(),
            common.variable("host", "host", cpu, 'run_id=~"$run_id"'),
            common.variable("component", "component", cpu,
                            'run_id=~"$run_id", host=~"$host"')]


def build() -> dash.Dashboard:
    board = (dash.Dashboard("vnetbench: vSwitch CPU live")
             .uid(UID)
             .tags(["vnetbench"])
             .time("now-30m", "now")
             .refresh("10s")
             .variables(variables())
             .annotation(test_windows())
             .annotation(common.faults()))
    panels = (by_part, by_component, host_total, softirq, net_softirqs, lookups, flows)
    for panel_id, make in enumerate(panels, start=1):
        board.with_panel(make(panel_id))
    return board
