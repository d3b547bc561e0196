"""The vnetbench SLA on Rally iteration results: thresholds, and failed iterations."""

from vnetbench.rally_plugins.charts import METRICS_TITLE
from vnetbench.rally_plugins.sla import VnetbenchThresholds


def iteration(values=(), error=()):
    table = {"title": METRICS_TITLE, "data": [list(v) for v in values]}
    return {"error": list(error), "output": {"additive": [table], "complete": []}}


def test_values_within_their_thresholds_pass():
    sla = VnetbenchThresholds({"max_loss_pct": 1, "min_gbps": 0.5})
    assert sla.add_iteration(iteration([("same-host loss_pct", 0.5), ("same-host gbps", 2.0)]))
    assert sla.success and "met by 2 measured values" in sla.details()


def test_a_value_beyond_its_threshold_fails_and_is_named():
    sla = VnetbenchThresholds({"max_loss_pct": 1})
    assert not sla.add_iteration(iteration([("cross-host loss_pct", 7.0)]))
    assert "cross-host loss_pct = 7 (max_loss_pct 1)" in sla.details()


def test_a_failed_iteration_fails_although_it_measured_nothing():
    """A task with this SLA has no default failure_rate: a workload whose every iteration
    raised must not pass as 'no threshold violated'."""
    sla = VnetbenchThresholds({"max_loss_pct": 100})
    err = ("TimeoutExpired", "flowgen server did not start within 10 s\nmore", "Traceback ...")
    assert not sla.add_iteration(iteration(error=err))
    assert "an iteration failed (TimeoutExpired: flowgen server did not start within 10 s)" \
        in sla.details()


def test_merge_keeps_the_failures_of_both():
    a, b = VnetbenchThresholds({"max_loss_pct": 1}), VnetbenchThresholds({"max_loss_pct": 1})
    a.add_iteration(iteration([("x loss_pct", 0.0)]))
    b.add_iteration(iteration(error=("RuntimeError", "boom", "")))
    assert not a.merge(b) and "RuntimeError: boom" in a.details()
