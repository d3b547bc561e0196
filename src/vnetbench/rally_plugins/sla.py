"""``vnetbench`` SLA: thresholds on measured values, read from the scenario's
'vnetbench metrics' table (Rally's built-in SLAs only see durations and errors).

A task that names an SLA loses Rally's default ``failure_rate: {max: 0}``, so an
iteration that failed (and measured nothing) fails this SLA too: thresholds met by
no value are not met."""

from __future__ import annotations

from rally import consts
from rally.task import sla

from vnetbench.rally_plugins.charts import METRICS_TITLE

# criterion -> (metric name suffix, bound kind)
CRITERIA = {
    "max_loss_pct": ("loss_pct", max),
    "min_gbps": ("gbps", min),
    "max_rtt_ms": ("rtt_mean_ms", max),
    "max_cpu_pct": ("cpu_pct", max),
    "min_jain": ("jain_index", min),
    "max_failed_pairs": ("pairs_failed", max),      # scale: pairs of a step that failed
    "max_not_ready": ("not_ready", max),            # port_ready: ports of a step never ready
    "p95_ms": ("first_packet_p95_ms", max),         # port_ready: a step's p95 to first packet
}


@sla.configure(name="vnetbench")
class VnetbenchThresholds(sla.SLA):
    """Every measured value within its threshold (loss %, Gbit/s, RTT ms, CPU %, Jain's index)."""

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "additionalProperties": False,
        "minProperties": 1,
        "properties": {k: {"type": "number", "minimum": 0} for k in CRITERIA},
    }

    def __init__(self, criterion_value):
        super().__init__(criterion_value)
        self.violations = []
        self.checked = 0

    def add_iteration(self, iteration):
        if iteration.get("error"):
            kind, msg = (list(iteration["error"]) + ["", ""])[:2]
            self.violations.append(f"an iteration failed ({kind}: {msg.splitlines()[0] if msg else ''})")
        for table in (iteration.get("output") or {}).get("additive", []):
            if table.get("title") != METRICS_TITLE:
                continue
            for name, value in table["data"]:
                self._check(name, value)
        self.success = not self.violations
        return self.success

    def _check(self, name, value):
        for criterion, (suffix, kind) in CRITERIA.items():
            if criterion in self.criterion_value and name.endswith(" " + suffix):
                self.checked += 1
                bound = self.criterion_value[criterion]
                ok = value <= bound if kind is max else value >= bound
                if not ok:
                    self.violations.append(f"{name} = {value:.4g} ({criterion} {bound:g})")

    def merge(self, other):
        self.violations += other.violations
        self.checked += other.checked
        self.success = not self.violations
        return self.success

    def details(self):
        if self.violations:
            return f"vnetbench thresholds violated: {'; '.join(self.violations[:5])} - {self.status()}"
        return f"vnetbench thresholds met by {self.checked} measured values - {self.status()}"
