"""One thin scenario per test family: pick the pairs, call the battery, record, chart."""

from __future__ import annotations

import os
import sys

from rally.task import scenario

from vnetbench.rally_plugins import charts
from vnetbench.testbed import flowstate

TCP_KEYS = ("gbps", "retransmits", "mss_on_wire", "cpu_pct")
UDP_KEYS = ("gbps", "pps", "loss_pct", "jitter_ms", "cpu_pct")
FLOW_KEYS = ("loss_pct", "achieved_rate", "connect_p50_ms", "connect_p99_ms", "dp_lost", "cpu_pct")
BCAST_KEYS = ("loss_pct", "sent", "received", "achieved_pps", "cpu_pct")
RTT_KEYS = ("rtt_mean_ms", "rtt_sd_ms", "rtt_p50_ms", "rtt_p99_ms", "loss_pct", "cpu_pct")


class _Base(scenario.Scenario):
    """Attach to the context's testbed; write every Result to the records file."""

    def _deployment(self):
        """The context's testbed, or None when this machine cannot build it (N/A)."""
        info = self.context["vnetbench"]
        if info.get("unsupported"):
            return None
        os.environ["VNETBENCH_STATE_DIR"] = info["state_dir"]
        from vnetbench.testbed import deployment
        return deployment.attach(info["run_id"])

    def _not_applicable(self, test):
        """Record and show N/A with the missing feature: a measured outcome, not a skip."""
        from vnetbench.results.record import Result, now
        info = self.context["vnetbench"]
        routing = {"routing": info["routing"]} if info.get("routing") else {}
        self._record([Result(test=test, labels={"test": test, "vswitch": info["vswitch"],
                                                "network": info["network"], "placement": "-", **routing},
                             samples={}, started=now(), finished=now(),
                             extra={"not_applicable": info["unsupported"]})])
        self.add_output(complete={"title": f"{test}: N/A", "chart_plugin": "TextArea",
                                  "data": [f"{info['vswitch']}/{info['network']} cannot run on "
                                           f"this machine: {info['unsupported']}"]})

    def _pairs(self, dep, placements):
        """The pairs of ``placements`` (the scenario's), else of the context's: a borrowed
        testbed (task argument ``run``) keeps every pair, the context picks them."""
        placements = placements or self.context["vnetbench"].get("placements")
        pairs = [p for p in dep.testbed.pairs if not placements or p.placement in placements]
        if not pairs:
            raise ValueError(f"testbed {dep.testbed.name} has no pair with placement in {placements}")
        return pairs

    def _record(self, results):
        from pathlib import Path

        from vnetbench.results.store import ResultStore
        store = ResultStore(Path(self.context["vnetbench"]["results"]))
        for r in results:
            store.append(r)
        for r in results:
            print("vnetbench: " + _summary(r), file=sys.stderr, flush=True)
        if any("cpu_pct" in r.samples for r in results):
            for chart in charts.cpu([r for r in results if "cpu_pct" in r.samples]):
                self.add_output(complete=chart)


    def _battery(self, placements, run_pair, keys, title):
        """Run ``run_pair(dep, pair) -> [Result]`` on every selected pair, record the
        results and publish the metrics table (read by the SLA) and the results table.
        None when the testbed is N/A here (already recorded as such)."""
        dep = self._deployment()
        if dep is None:
            self._not_applicable(self.TEST)
            return None
        from vnetbench.monitor import publish, server
        monitor = self.context["vnetbench"].get("monitor")
        mon = server.attach(monitor) if monitor else None
        results = []
        for pair in self._pairs(dep, placements):
            with publish.window(mon, dep, self.TEST, pair) as pushed:
                pushed += run_pair(dep, pair)
            results += pushed
        self._record(results)
        self.add_output(additive=charts.metrics_table(results, keys),
                        complete=charts.results_table(title, results, keys))
        return results


@scenario.configure(name="VnetBench.icmp_rtt", platform="default")
class IcmpRtt(_Base):
    TEST = "icmp_rtt"

    def run(self, mode="flood", count=100, interval_s=0.01, payload=56, gap_s=0.0,
            flush_flows=True, repetitions=3, placements=None, payloads=None, defer_s=flowstate.DEFER_S):
        """ICMP RTT between a VM pair: 'deferred' single packets or 'flood'.

        :param mode: deferred | flood
        :param count: echoes per repetition
        :param interval_s: flood interval
        :param payload: ICMP payload bytes
        :param gap_s: deferred: wait before each echo (e.g. > flow idle timeout)
        :param flush_flows: deferred: before each echo, empty the flow state the modelled
            system lets go in defer_s seconds idle (false: only gap_s decides)
        :param defer_s: deferred: the idle time each echo models (vnetbench.testbed.flowstate:
            Floodlight's flows age in 5 s, an OVS datapath's in 10 s, a vRouter's in 180 s)
        :param repetitions: repetitions per pair (mean, sd and 95% CI over them)
        :param placements: same-host and/or cross-host (default: every pair of the testbed)
        :param payloads: RTT-vs-payload sweep (000_...): these ICMP payload sizes instead
            of ``payload`` (sizes the tenant MTU cannot carry unfragmented are left out)
        """
        from vnetbench.battery import rtt

        def run_pair(dep, pair):
            top = dep.testbed.network.tenant_mtu - 28
            out = []
            for size in ([p for p in payloads if p <= top] if payloads else [payload]):
                r = rtt.run(dep, pair, mode, count, interval_s, size, gap_s, flush_flows, repetitions,
                            defer_s=defer_s)
                r.labels["point"] = f"{size} B" if payloads else ""
                out.append(r)
            return out
        results = self._battery(placements, run_pair, RTT_KEYS, f"ICMP RTT ({mode})")
        if not results:
            return
        if payloads:
            self.add_output(complete=charts.lines("RTT vs ICMP payload", charts.series(
                results, "payload", "rtt_mean_ms"), "RTT (ms)", "ICMP payload (bytes)"))
        dist = {f"{r.labels['placement']} {r.labels['point']}".strip(): _cdf([x for rep in r.extra["repetitions"]
                                             for x in rep["rtt_samples_ms"]]) for r in results}
        self.add_output(complete=charts.lines(f"RTT distribution ({mode})", dist,
                                              "fraction of echoes", "RTT (ms)"))


@scenario.configure(name="VnetBench.tcp_stream", platform="default")
class TcpStream(_Base):
    TEST = "tcp_stream"

    def run(self, nominal_mss=(68, 1468, 8908), seconds=10, repetitions=3,
            verify_on_wire=True, placements=None):
        """Unidirectional TCP over an MSS sweep; the MSS used is checked on the wire.

        :param nominal_mss: the seed's points; each is mapped onto what the path allows
        :param seconds: iperf3 duration per repetition
        :param repetitions: repetitions per point
        :param verify_on_wire: capture the SYN/SYN-ACK MSS with tcpdump
        :param placements: same-host and/or cross-host
        """
        from vnetbench.battery import tcp
        results = self._battery(placements, lambda dep, pair: tcp.run(
            dep, pair, tuple(nominal_mss), seconds, repetitions, verify_on_wire),
            TCP_KEYS, "TCP throughput by MSS")
        if results:
            self.add_output(complete=charts.lines("TCP Gbit/s vs MSS used", charts.series(
                results, "used", "gbps"), "Gbit/s", "MSS (bytes)"))


@scenario.configure(name="VnetBench.udp_stream", platform="default")
class UdpStream(_Base):
    TEST = "udp_stream"

    def run(self, sessions=(1, 5), seconds=60, bitrate_bps=None, length=None,
            background_bps=None, repetitions=3, placements=None, background="pair",
            background_length=None):
        """Unidirectional UDP with p parallel sessions; loss measured at the receiver.

        :param sessions: parallel session counts
        :param seconds: duration per repetition (seed: 60)
        :param bitrate_bps: offered rate per session, None = unlimited
        :param length: datagram payload bytes (default: tenant MTU - 28)
        :param background_bps: rate of each CBR background flow, None = none
        :param repetitions: repetitions per point
        :param placements: same-host and/or cross-host
        :param background: "pair" (one flow beside the measured one) or "seed000" (seed
            000's flows among the VMs of the pair's router: ``udp.background_flows``)
        :param background_length: background datagram payload bytes (default: length)
        """
        from vnetbench.battery import udp
        results = self._battery(placements, lambda dep, pair: udp.run(
            dep, pair, tuple(sessions), seconds, bitrate_bps, length, background_bps, repetitions,
            background, background_length),
            UDP_KEYS, "UDP streams")
        if results:
            self.add_output(complete=charts.lines("UDP loss % vs sessions", charts.series(
                results, "sessions", "loss_pct"), "loss %", "sessions"))


@scenario.configure(name="VnetBench.broadcast", platform="default")
class Broadcast(_Base):
    TEST = "broadcast"

    def run(self, kinds=("arp", "icmp"), rate_pps=1000, seconds=5, repetitions=3, placements=None):
        """ARP requests / ICMP to the broadcast address at a set rate; loss counted at the peer.

        :param kinds: arp and/or icmp
        :param rate_pps: frames per second sent
        :param seconds: duration per repetition
        :param repetitions: repetitions per point
        :param placements: same-host and/or cross-host
        """
        from vnetbench.battery import broadcast
        self._battery(placements, lambda dep, pair: broadcast.run(
            dep, pair, tuple(kinds), rate_pps, seconds, repetitions), BCAST_KEYS, "Broadcast")


@scenario.configure(name="VnetBench.flow_setup", platform="default")
class FlowSetup(_Base):
    TEST = "flow_setup"

    def run(self, rates=(10, 100, 1000, 10000), seconds=5, deadline_ms=1000, repetitions=3,
            placements=None):
        """New TCP connections per second, each a new 5-tuple; loss = failed or late.

        :param rates: new connections per second to offer
        :param seconds: duration per repetition
        :param deadline_ms: a connection established later than this counts as lost
        :param repetitions: repetitions per point
        :param placements: same-host and/or cross-host
        """
        from vnetbench.battery import flowsetup
        results = self._battery(placements, lambda dep, pair: flowsetup.run(
            dep, pair, tuple(rates), seconds, deadline_ms, repetitions), FLOW_KEYS, "TCP flow setup")
        if results:
            self.add_output(complete=charts.lines("Flow-setup loss % vs new flows/s", charts.series(
                results, "rate", "loss_pct"), "loss %", "new connections per second"))


def _summary(r) -> str:
    """One progress line per measured point: what, where, the headline value, CPU%."""
    from vnetbench.report.table import HEADLINE
    lab = r.labels
    column = " ".join(x for x in (f"{lab.get('vswitch')}/{lab.get('network')}", lab.get("routing")) if x)
    placement = " ".join(x for x in (lab.get("placement"), lab.get("path")) if x)   # a routed pair: its own line
    where = f"{column} {r.test} {placement} {lab.get('point', '')}"
    if "not_applicable" in r.extra:
        return f"{where}: N/A ({r.extra['not_applicable']})"
    key = next((k for k in HEADLINE.get(r.test, ()) if k in r.samples), None)
    mean = lambda k: r.metrics.get(k, {}).get("mean")
    value = f"{key} {mean(key):.4g}" if key and mean(key) is not None else "no value"
    cpu = f", CPU {mean('cpu_pct'):.0f}%" if mean("cpu_pct") is not None else ""
    return f"{where.strip()}: {value}{cpu}"


def _cdf(xs):
    xs = sorted(xs)
    n = len(xs)
    step = max(1, n // 200)
    return [[x, (i + 1) / n] for i, x in enumerate(xs) if i % step == 0 or i == n - 1]
