"""What the three dashboards share: the datasource, the template variables and
the result selectors, so that every query names metrics and labels the same way
(docs/metrics.md is the contract)."""

from grafana_foundation_sdk.builders import barchart
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.models.common import GraphGradientMode, VizOrientation
from grafana_foundation_sdk.models.prometheus import PromQueryFormat
from grafana_foundation_sdk.models.dashboard import (
    AnnotationQuery,
    DataSourceRef,
    DataTransformerConfig,
    DynamicConfigValue,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

DATASOURCE_UID = "vnetbench-prometheus"
DATASOURCE = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)

# What Grafana substitutes for "All": a regex, so an absent label matches too.
ALL_VALUE = ".*"
# Grafana's own value of the "All" option.
ALL = "$__all"

RESULT_FILTER = ('run_id=~"$run_id", vswitch=~"$vswitch", '
                 'network=~"$network", placement=~"$placement"')
# faults carry no placement (a fault hits the testbed, not a pair)
FAULT_FILTER = 'run_id=~"$run_id", vswitch=~"$vswitch", network=~"$network"'


def variable(name: str, label: str, metric: str, selector: str = "") -> dash.QueryVariable:
    """A multi-select Prometheus label_values variable with All (= .*)."""
    return (dash.QueryVariable(name)
            .label(label)
            .datasource(DATASOURCE)
            .query(f"label_values({metric}{{{selector}}}, {name})" if selector
                   else f"label_values({metric}, {name})")
            .multi(True)
            .include_all(True)
            .all_value(ALL_VALUE)
            .current(VariableOption(selected=True, text=["All"], value=[ALL]))
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC))


def result_variables() -> list[dash.QueryVariable]:
    """run_id, vswitch, network, placement: each narrowed by the ones before."""
    return [
        variable("run_id", "run", "vnetbench_result"),
        variable("vswitch", "vSwitch", "vnetbench_result", 'run_id=~"$run_id"'),
        variable("network", "network", "vnetbench_result",
                 'run_id=~"$run_id", vswitch=~"$vswitch"'),
        variable("placement", "placement", "vnetbench_result", 'run_id=~"$run_id"'),
    ]


def result(test: str, metric: str) -> str:
    """The last pushed value of one record metric: pushed series persist, so a
    finished run still shows at the end of the dashboard's range."""
    return (f'last_over_time(vnetbench_result{{test="{test}", metric="{metric}", '
            f'{RESULT_FILTER}}}[$__range])')


def categorized(expr: str, *point_labels: str) -> str:
    """One series per x-axis category "point · vswitch/network · placement · run" (the
    point: the values of ``point_labels``), so that a bar chart groups the
    configurations side by side by point."""
    config = f'label_join({expr}, "config", "/", "vswitch", "network")'
    labels = ", ".join(f'"{x}"' for x in (*point_labels, "config", "placement", "run_id"))
    return f'max by (x) (label_join({config}, "x", " · ", {labels}))'


def instant(expr: str, ref_id: str) -> prometheus.Dataquery:
    """An instant query in table format (one row per category)."""
    return (prometheus.Dataquery()
            .expr(expr)
            .instant()
            .format(PromQueryFormat.TABLE)
            .legend_format("{{x}}")
            .ref_id(ref_id)
            .datasource(DATASOURCE))


def transformation(id_val: str, options: dict) -> DataTransformerConfig:
    return DataTransformerConfig(id_val=id_val, options=options)


def category_transformations(names: dict[str, str]) -> list[DataTransformerConfig]:
    """Join the instant queries on the category, drop the time, name the values
    (names: field -> display name, e.g. "Value #A" -> "Gbit/s") and sort by category."""
    return [
        transformation("merge", {}),
        transformation("organize", {"excludeByName": {"Time": True},
                                    "renameByName": names}),
        transformation("sortBy", {"sort": [{"field": "x"}]}),
    ]


def right_axis(unit: str) -> list[DynamicConfigValue]:
    """Field override properties that put a field on a right axis with its unit."""
    return [DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
            DynamicConfigValue(id_val="unit", value=unit)]


def bars(panel_id: int, title: str, description: str) -> barchart.Panel:
    """A horizontal bar chart of categories (x); its custom field config spelled
    out in full, as the schema requires lineWidth, fillOpacity and gradientMode."""
    return (barchart.Panel()
            .id(panel_id)
            .title(title)
            .description(description)
            .datasource(DATASOURCE)
            .x_field("x")
            .orientation(VizOrientation.HORIZONTAL)
            .line_width(1)
            .fill_opacity(80)
            .gradient_mode(GraphGradientMode.NONE)
            .height(10))


class PrometheusAnnotationQuery(AnnotationQuery):
    """The SDK's AnnotationQuery lacks the Prometheus annotation fields (title,
    text and tags from labels, step); Grafana reads them beside `expr`."""

    prometheus: dict[str, object] = {}

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), **self.prometheus}


class PrometheusAnnotation(dash.AnnotationQuery):
    _internal: PrometheusAnnotationQuery

    def __init__(self) -> None:
        self._internal = PrometheusAnnotationQuery()

    def formats(self, title: str, text: str, tag_keys: str, step: str,
                value_is_time: bool = False) -> "PrometheusAnnotation":
        """``value_is_time``: the series value (Unix ms) is the event's time, not the
        sample's ("Series value as timestamp"; Grafana takes it in milliseconds)."""
        self._internal.prometheus = {"titleFormat": title, "textFormat": text,
                                     "tagKeys": tag_keys, "step": step,
                                     "useValueForTime": value_is_time}
        return self


def faults() -> PrometheusAnnotation:
    """Every fault (faults/record.py) at the moment it was injected: the start series'
    value is that Unix time, so Grafana places the mark at value * 1000 ms, not at
    the scrape that first saw it (the Pushgateway keeps the series, so it is scraped
    on and on; all its points give the same time and Grafana merges them into one)."""
    return (PrometheusAnnotation()
            .name("Faults")
            .datasource(DATASOURCE)
            .enable(True)
            .icon_color("red")
            .expr(f"1000 * vnetbench_fault_start_timestamp_seconds{{{FAULT_FILTER}}}")
            .formats(title="{{fault}} {{target}}",
                     text="{{vswitch}}/{{network}} run {{run_id}} fault {{fault_id}}",
                     tag_keys="fault,target,vswitch,network", step="15s", value_is_time=True))
