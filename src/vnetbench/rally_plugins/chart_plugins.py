"""Rally chart plugins of our own (loaded by the ``rally_plugins`` entry point)."""

from __future__ import annotations

from rally.common.plugin import plugin
from rally.task.processing import charts


@plugin.configure(name="VnetbenchStats")
class VnetbenchStats(charts.OutputStatsTable):
    """Rally's StatsTable without its "(sec)" headers: our rows are metrics whose unit is
    in their name (``rtt_mean_ms``, ``gbps``, ``loss_pct``, ``cpu_pct``), aggregated over
    the workload's iterations."""

    columns = ["Metric (unit in its name)", "Min", "Median", "90%ile", "95%ile", "Max", "Mean",
               "Iterations"]
