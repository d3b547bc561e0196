"""Thin scenario for how fast a new port carries traffic as the network grows (issue 48);
the work is in ``vnetbench.battery.portready``."""

from __future__ import annotations

from rally.task import scenario

from vnetbench.rally_plugins import charts
from vnetbench.rally_plugins.scenarios import _Base

PORT_KEYS = ("not_ready", "requested_p50_ms", "programmed_p50_ms", "programmed_p95_ms",
             "first_packet_p50_ms", "first_packet_p95_ms", "first_packet_p99_ms",
             "first_packet_max_ms", "cpu_controller_pct", "cpu_vswitch_pct",
             "rss_controller_mib", "rss_controller_growth_mib", "rss_vswitch_mib",
             "rss_vswitch_growth_mib")


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
        for output in outputs(results):
            self.add_output(**output)


def outputs(results) -> list[dict]:
    """The scenario's ``add_output`` payloads: the figures per step (the SLA reads the
    additive table), each stage's quantiles and the daemons' memory against the existing
    ports, the ports never ready."""
    by_stage = {f"{stage} {q}": [[r.extra["existing_ports"], r.metrics[f"{stage}_{q}_ms"]["mean"]]
                                 for r in results if r.metrics.get(f"{stage}_{q}_ms")]
                for stage in ("programmed", "first_packet") for q in ("p50", "p95", "max")}
    never = [f"{r.labels['point']}: {', '.join(r.extra['never_ready'])}" for r in results
             if r.extra["never_ready"]]
    on = chassis(results)
    return [{"additive": charts.metrics_table(results, PORT_KEYS),
             "complete": charts.results_table("Port readiness per step (ms from the request)",
                                              results, PORT_KEYS, params=("chassis",))},
            {"complete": charts.lines(f"Port readiness vs existing ports{on}", by_stage, "ms",
                                      "existing ports")},
            {"complete": charts.lines(f"Control-plane memory vs existing ports{on} (RSS at each step's "
                                      "end, MiB; per daemon, summed over the hosts)",
                                      memory_series(results), "MiB", "existing ports")},
            {"complete": {"title": "Ports never ready within the deadline", "chart_plugin": "TextArea",
                          "data": never or ["none"]}}]


def memory_series(results) -> dict:
    """daemon -> [[existing ports, RSS MiB at the step's end], ...] (vnetbench.memory's
    ``rss_<daemon>_mib``; the parts' totals are in the tables)."""
    out: dict = {}
    for r in results:
        for k, v in sorted(r.metrics.items()):
            if k.startswith("rss_") and k.endswith("_mib") and not k.endswith("_growth_mib") \
                    and k not in ("rss_controller_mib", "rss_vswitch_mib") and v.get("mean") is not None:
                out.setdefault(k[4:-4].replace("_", "-"), []).append([r.extra["existing_ports"], v["mean"]])
    return out


def chassis(results) -> str:
    """' on N chassis' for the charts' titles: their lines join the steps of one testbed."""
    counts = sorted({r.labels.get("params", {}).get("chassis") for r in results} - {None})
    return f" on {' / '.join(map(str, counts))} chassis" if counts else ""
