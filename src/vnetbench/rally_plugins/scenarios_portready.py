"""Thin scenario for how fast a new port carries traffic as the network grows (issue 48);
the work is in ``vnetbench.battery.portready``."""

from __future__ import annotations

from rally.task import scenario

from vnetbench.rally_plugins import charts
from vnetbench.rally_plugins.scenarios import _Base

PORT_KEYS = ("not_ready", "requested_p50_ms", "programmed_p50_ms", "programmed_p95_ms",
             "first_packet_p50_ms", "first_packet_p95_ms", "first_packet_p99_ms",
             "first_packet_max_ms", "cpu_controller_pct", "cpu_vswitch_pct")


@scenario.configure(name="VnetBench.port_ready", platform="default")
class PortReady(_Base):
    TEST = "port_ready"

    def run(self, ports=20, steps=2, concurrency=8, deadline_ms=10000, probe_interval_ms=1.0,
            hosts=None):
        """Steps of new ports on the running testbed: requested -> programmed (the kind's
        own signal) -> first packet both ways with a peer VM on another host.

        :param ports: new ports per step (the earlier steps' stay: the network grows)
        :param steps: steps
        :param concurrency: ports in flight at once
        :param deadline_ms: a port not programmed and answering within this is never ready
        :param probe_interval_ms: the first-packet probe's interval (its resolution)
        :param hosts: hosts the new ports go to, round-robin (default: every host)
        """
        from types import SimpleNamespace

        from vnetbench.battery import portready
        from vnetbench.monitor import publish, server
        dep = self._deployment()
        if dep is None:
            return self._not_applicable(self.TEST)
        monitor = self.context["vnetbench"].get("monitor")
        mon = server.attach(monitor) if monitor else None
        # one test window for every step: the new ports are no pair of the testbed
        every = SimpleNamespace(name="new-ports", placement="cross-host")
        with publish.window(mon, dep, self.TEST, every) as pushed:
            pushed += portready.run(dep, ports, steps, concurrency, deadline_ms, probe_interval_ms, hosts)
        results = pushed
        self._record(results)
        self.add_output(additive=charts.metrics_table(results, PORT_KEYS),
                        complete=charts.results_table("Port readiness per step (ms from the request)",
                                                      results, PORT_KEYS))
        by_stage = {f"{stage} {q}": [[r.extra["existing_ports"], r.metrics[f"{stage}_{q}_ms"]["mean"]]
                                     for r in results if r.metrics.get(f"{stage}_{q}_ms")]
                    for stage in ("programmed", "first_packet") for q in ("p50", "p95", "max")}
        self.add_output(complete=charts.lines("Port readiness vs existing ports", by_stage, "ms",
                                              "existing ports"))
        never = [f"{r.labels['point']}: {', '.join(r.extra['never_ready'])}" for r in results
                 if r.extra["never_ready"]]
        self.add_output(complete={"title": "Ports never ready within the deadline",
                                  "chart_plugin": "TextArea", "data": never or ["none"]})
