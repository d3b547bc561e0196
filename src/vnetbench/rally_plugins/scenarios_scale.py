"""Thin scenario for many pairs at once (issue 24); the work is in ``vnetbench.scale``."""

from __future__ import annotations

from rally.task import scenario

from vnetbench.rally_plugins import charts
from vnetbench.rally_plugins.scenarios import _Base

SCALE_KEYS = ("aggregate_gbps", "p5_gbps", "p50_gbps", "p95_gbps", "aggregate_cps", "p50_cps",
              "jain", "pairs_failed", "rtt_p99_ms", "start_spread_ms", "cpu_pct")


@scenario.configure(name="VnetBench.scale", platform="default")
class Scale(_Base):
    TEST = "scale"

    def run(self, progression="geometric", tests=("tcp",), seconds=5, repetitions=1,
            udp_bps=None, streams=1, latency=True, accommodation=None, conn_rate=100,
            pair_gbps=None):
        """Every pair of the testbed's first N at once, N by the progression's steps.

        :param progression: linear, geometric (1, 2, 4, ... all) or a list of pair counts
        :param tests: any of tcp, udp, conn (each a progression of its own)
        :param seconds: seconds per step
        :param repetitions: repetitions of every step
        :param udp_bps: udp: offered bits/s per pair (None: unlimited)
        :param streams: TCP streams per pair (iperf3 -P)
        :param latency: ping every 10 ms beside the load (latency under load)
        :param accommodation: recorded with the results (the context placed the pairs)
        :param conn_rate: conn: new TCP connections/s each pair offers (vnetbench-flowgen)
        :param pair_gbps: tcp/udp: Gbit/s each pair offers (iperf3 -b): the data plane's CPU
            at a known load (the capacity profile's points below the ceiling); None: unlimited
        """
        from vnetbench.scale import run as scale_run
        dep = self._deployment()
        if dep is None:
            return self._not_applicable(self.TEST)
        pairs = sorted(dep.testbed.pairs, key=lambda p: int(p.name[1:]) if p.name[1:].isdigit() else 0)
        from types import SimpleNamespace

        from vnetbench.monitor import publish, server
        monitor = self.context["vnetbench"].get("monitor")
        mon = server.attach(monitor) if monitor else None
        # one test window for the whole progression: its steps run many pairs at once
        every = SimpleNamespace(name="all-pairs", placement="+".join(sorted({p.placement for p in pairs})))
        with publish.window(mon, dep, self.TEST, every) as pushed:
            pushed += scale_run.run(dep, pairs, progression=progression, tests=tuple(tests),
                                    seconds=seconds, repetitions=repetitions, udp_bps=udp_bps,
                                    streams=streams, latency=latency, accommodation=accommodation,
                                    conn_rate=conn_rate,
                                    rates={p.name: int(pair_gbps * 1e9) for p in pairs} if pair_gbps else None)
        results = pushed
        self._record(results)
        self.add_output(additive=charts.metrics_table(results, SCALE_KEYS),
                        complete=charts.results_table("Scale: every pair of a step at once "
                                                      "(aggregate = sum over the pairs that ran)",
                                                      results, SCALE_KEYS))
        for test in tests:
            mine = [r for r in results if r.labels["params"]["test"] == test]
            unit = scale_run.UNIT[test]
            agg = {}
            for q, name in (("aggregate", "aggregate"), ("p5", "per-pair p5"), ("p50", "per-pair p50"),
                            ("p95", "per-pair p95")):
                agg[f"{test} {name}"] = [[r.labels["pairs"], r.metrics[f"{q}_{unit}"]["mean"]] for r in mine
                                         if r.metrics.get(f"{q}_{unit}", {}).get("mean") is not None]
            self.add_output(complete=charts.lines(f"Scale ({test}): aggregate and per-pair band "
                                                  "vs pairs at once", agg, scale_run.UNIT_TEXT[unit], "pairs"))
            cpu = {}
            for r in mine:
                for h, v in (r.extra["repetitions"][0].get("hosts") or {}).items():
                    if v.get("dataplane_pct") is not None:
                        cpu.setdefault(h, []).append([r.labels["pairs"], v["dataplane_pct"]])
            self.add_output(complete=charts.lines(f"Scale ({test}): each host's data-plane CPU "
                                                  "vs pairs at once", cpu, "% of one CPU", "pairs"))
            sat = mine[0].extra.get("saturation", {}) if mine else {}
            self.add_output(complete={"title": f"Scale ({test}): saturation per host",
                                      "chart_plugin": "TextArea",
                                      "data": [f"{h}: {'after ' + str(v['step']) + ' pairs' if v['step'] else 'none'}"
                                               f" - {v['why']}" for h, v in sorted(sat.items())]})
