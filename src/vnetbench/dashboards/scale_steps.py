"""Scale: many pairs at once (issue 24), step by step -- the aggregate with the per-pair
band, and each host's data-plane CPU at every step, so the step where a host's vSwitch
ran out of CPU is read off beside the aggregate that stopped growing."""

from grafana_foundation_sdk.builders import dashboard as dash

from . import common

UID = "vnetbench-scale"
TEST = "scale"
UNITS = (("gbps", "Gbit/s", "Gbits"), ("cps", "connections/s", "cps"))


def _by_step(expr: str, *extra: str) -> str:
    """One series per "step · point [· host] · vswitch/network · placement · run"."""
    return common.categorized(expr, "step", "point", *extra)


def aggregate_panel(unit: str, text: str, grafana_unit: str, panel_id: int):
    """Aggregate (A) and the per-pair p5 / p50 / p95 (B-D) of every step."""
    def query(metric: str, ref: str):
        return common.instant(_by_step(common.result(TEST, f"{metric}_{unit}")), ref)
    names = {"Value #A": f"aggregate {text}", "Value #B": "per-pair p5", "Value #C": "per-pair p50",
             "Value #D": "per-pair p95"}
    return (common.bars(panel_id, f"Aggregate and per-pair band by step ({text})",
                        f"scale aggregate_{unit} (the sum over the pairs that ran) and p5/p50/p95_{unit} "
                        "of the pairs, per step · test · vswitch/network · placement · run")
            .with_target(query("aggregate", "A"))
            .with_target(query("p5", "B"))
            .with_target(query("p50", "C"))
            .with_target(query("p95", "D"))
            .transformations(common.category_transformations(names))
            .unit(grafana_unit)
            .span(12))


def cpu_panel(panel_id: int):
    """Each host's data-plane CPU (every part) at every step."""
    q = common.instant(_by_step(common.result(TEST, "host_dataplane_pct"), "host"), "A")
    return (common.bars(panel_id, "Each host's data-plane CPU by step",
                        "scale host_dataplane_pct: the host's vSwitch data plane (every part, "
                        "vnetbench.cpu) as % of one CPU over the step, per step · test · host · "
                        "vswitch/network · placement · run; a host whose CPU is at its ceiling while "
                        "the aggregate stops growing is that step's saturation point")
            .with_target(q)
            .transformations(common.category_transformations({"Value": "data-plane CPU %"}))
            .unit("percent")
            .span(24))


def build() -> dash.Dashboard:
    board = (dash.Dashboard("vnetbench: scale (many pairs at once)")
             .uid(UID)
             .tags(["vnetbench"])
             .time("now-24h", "now")
             .variables(common.result_variables())
             .annotation(common.faults()))
    board.with_row(dash.Row("Aggregate by step").id(1))
    panel_id = 1
    for unit, text, grafana_unit in UNITS:
        panel_id += 1
        board.with_panel(aggregate_panel(unit, text, grafana_unit, panel_id))
    board.with_row(dash.Row("Per-host CPU by step").id(panel_id + 1))
    board.with_panel(cpu_panel(panel_id + 2))
    return board
