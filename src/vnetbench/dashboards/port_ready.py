"""How fast a new port carries traffic as the network grows (issue 48, docs/control-plane.md):
per step of new ports, each stage's p50 / p95 / max against the ports that already
exist and the chassis the step ran against, the ports never ready, and what the step
cost the control plane (CPU, resident memory), per vSwitch kind side by side.

The figures are the port_ready records' metrics as the battery pushes every record
(``vnetbench_result``, vnetbench.monitor.publish), with the step's parameters as labels:
``existing`` and ``chassis`` name a step. Bars are categories "existing · chassis ·
vswitch/network · placement · run", both counts zero-padded in PromQL so that the
categories sort by them (Grafana sorts them as text)."""

from grafana_foundation_sdk.builders import dashboard as dash

from . import common

UID = "vnetbench-port-ready"
TEST = "port_ready"
STAGES = (("requested", "request to plug returned"),
          ("programmed", "request to programmed (the kind's own signal)"),
          ("first_packet", "request to first packet both ways"))
QUANTILES = ("p50", "p95", "max")
WIDTH = 4                   # digits a count is padded to: 9,999 existing ports sort right
STEP_FILTER = 'chassis=~"$chassis"'


def padded(expr: str, label: str, out: str, word: str) -> str:
    """EXPR with label OUT = LABEL zero-padded to WIDTH digits, WORD after it ("0052
    existing"). label_replace anchors its regex, so one call per length sets the zeros
    (no capture group: "$1" would read as a Grafana variable), and label_join glues."""
    for digits in range(1, WIDTH):
        expr = (f'label_replace({expr}, "{out}_pad", "{"0" * (WIDTH - digits)}", "{label}", '
                f'"[0-9]{{{digits}}}")')
    expr = f'label_replace({expr}, "{out}_word", " {word}", "{label}", ".+")'
    return f'label_join({expr}, "{out}", "", "{out}_pad", "{label}", "{out}_word")'


def by_step(metric: str) -> str:
    """One series per "existing · chassis · vswitch/network · placement · run" of one
    record metric (its last pushed value, as common.result)."""
    expr = (f'last_over_time(vnetbench_result{{test="{TEST}", metric="{metric}", '
            f'{common.RESULT_FILTER}, {STEP_FILTER}}}[$__range])')
    expr = padded(padded(expr, "existing", "existing_ports", "existing"), "chassis", "on_chassis", "chassis")
    return common.categorized(expr, "existing_ports", "on_chassis")


def stage_panel(stage: str, text: str, panel_id: int):
    """p50 (A), p95 (B) and max (C) of one stage, per step and configuration."""
    names = {f"Value #{ref}": q for ref, q in zip("ABC", QUANTILES)}
    panel = common.bars(panel_id, f"{stage.replace('_', ' ')}: p50 / p95 / max (ms)",
                        f"port_ready {stage}_<q>_ms: {text}, over the step's ports ready in time; "
                        "per existing ports · chassis · vswitch/network · placement · run")
    for ref, q in zip("ABC", QUANTILES):
        panel = panel.with_target(common.instant(by_step(f"{stage}_{q}_ms"), ref))
    return panel.transformations(common.category_transformations(names)).unit("ms").span(8)


def never_ready_panel(panel_id: int):
    """Ports of a step never ready within the deadline (A) against the step's new ports (B)."""
    return (common.bars(panel_id, "Ports never ready within the deadline",
                        "port_ready not_ready (no programmed signal or no first packet within "
                        "deadline_ms; the record names them) and ports (the step's new ports), per "
                        "existing ports · chassis · vswitch/network · placement · run")
            .with_target(common.instant(by_step("not_ready"), "A"))
            .with_target(common.instant(by_step("ports"), "B"))
            .transformations(common.category_transformations(
                {"Value #A": "never ready", "Value #B": "new ports"}))
            .unit("none")
            .span(8))


def cost_panel(panel_id: int, title: str, metrics: tuple, unit: str, what: str):
    """The control plane's cost of a step: one bar per METRICS (metric, name)."""
    panel = common.bars(panel_id, title, f"port_ready {what}; per existing ports · chassis · "
                        "vswitch/network · placement · run")
    refs = "ABCD"
    for ref, (metric, _) in zip(refs, metrics):
        panel = panel.with_target(common.instant(by_step(metric), ref))
    names = {f"Value #{ref}": name for ref, (_, name) in zip(refs, metrics)}
    return panel.transformations(common.category_transformations(names)).unit(unit).span(8)


def build() -> dash.Dashboard:
    board = (dash.Dashboard("vnetbench: port readiness (new ports as the network grows)")
             .uid(UID)
             .tags(["vnetbench"])
             .time("now-24h", "now")
             .variables([*common.result_variables(),
                         common.variable("chassis", "chassis", "vnetbench_result",
                                         f'test="{TEST}", run_id=~"$run_id"')])
             .annotation(common.faults()))
    board.with_row(dash.Row("Time to ready by step (ms from the request)").id(1))
    for i, (stage, text) in enumerate(STAGES):
        board.with_panel(stage_panel(stage, text, 2 + i))
    board.with_row(dash.Row("Never ready, and the control plane's cost of a step").id(5))
    board.with_panel(never_ready_panel(6))
    board.with_panel(cost_panel(7, "Control-plane CPU over the step (% of one CPU)",
                                (("cpu_controller_pct", "controller"), ("cpu_vswitch_pct", "vswitch")),
                                "percent", "cpu_controller_pct (northd, databases, ovn-controllers, "
                                "agents) and cpu_vswitch_pct (ovs-vswitchd, its ovsdb-server): disjoint "
                                "parts of vnetbench.cpu's window over the step"))
    board.with_panel(cost_panel(8, "Control-plane memory (RSS, MiB)",
                                (("rss_controller_mib", "controller at the step's end"),
                                 ("rss_controller_growth_mib", "controller growth over the step"),
                                 ("rss_vswitch_mib", "vswitch at the step's end"),
                                 ("rss_vswitch_growth_mib", "vswitch growth over the step")),
                                "mbytes", "rss_controller_mib / rss_vswitch_mib (the same parts' "
                                "daemons' resident memory at the step's end, vnetbench.memory) and "
                                "their growth over the step"))
    return board
