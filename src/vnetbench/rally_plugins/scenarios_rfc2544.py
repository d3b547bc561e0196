"""Thin scenarios for RFC 2544 (throughput NDR/PDR, latency, frame loss, back-to-back)
and for the fairness of competing UDP flows; the work is in ``vnetbench.battery``."""

from __future__ import annotations

from rally.task import scenario

from vnetbench.rally_plugins import charts
from vnetbench.rally_plugins.scenarios import _Base

# what the SLA and the summary table see; loss_pct = the stream's loss during the latency
# trial at the NDR rate (the loss curve's values are frame_loss_pct, outside the SLA)
RFC2544_KEYS = ("ceiling_fps", "ndr_fps", "pdr_fps", "ndr_gbps", "rtt_avg_ms", "rtt_p99_ms",
                "loss_pct", "frame_loss_pct", "burst_frames", "cpu_pct")
THROUGHPUT_KEYS = ("ceiling_fps", "ndr_fps", "ndr_gbps", "pdr_fps", "pdr_gbps",
                   "ndr_pct_of_ceiling", "cpu_pct", "pdr_cpu_pct")
LATENCY_KEYS = ("rate_fps", "rtt_avg_ms", "rtt_p50_ms", "rtt_p99_ms", "rtt_max_ms", "loss_pct",
                "cpu_pct")
LOSS_KEYS = ("offered_fps", "rx_fps", "frame_loss_pct", "cpu_pct")
B2B_KEYS = ("burst_frames", "burst_at_max", "sender_fps", "cpu_pct")
FAIRNESS_KEYS = ("jain_index", "jain_maxmin", "jain_proportional", "total_mbps",
                 "utilization_pct", "loss_pct", "cpu_pct")


@scenario.configure(name="VnetBench.rfc2544", platform="default")
class Rfc2544(_Base):
    TEST = "rfc2544"

    def run(self, frame_sizes=None, trial_s=2, resolution_pct=2.0, max_trials=10,
            repetitions=1, measures=("throughput", "latency", "frame_loss", "back_to_back"),
            loss_steps=(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), latency_count=100,
            pdr_loss_pct=0.5, ceiling_factor=1.0, settle_s=0.0, b2b_gap_s=0.1,
            b2b_max_load_pct=25.0, b2b_resolution=10, jumbo=True, placements=None,
            latency_rates=(1, 1000), latency_loads=(50, 150)):
        """RFC 2544 per inner frame size (incl. FCS; UDP payload = frame - 46).

        :param frame_sizes: inner Ethernet frame sizes incl. FCS (default 64..1518 and a
            jumbo size if the tenant MTU allows; sizes the tenant MTU cannot carry are skipped)
        :param trial_s: seconds per trial (quick 1-2; RFC 2544: 60)
        :param resolution_pct: NDR/PDR (MLRsearch): final bracket width, % of its upper
            bound; back-to-back (binary search): % of the ceiling
        :param max_trials: trials per search: 2 x this for NDR + PDR together
            (MLRsearch), this for back-to-back
        :param repetitions: repetitions of every search / point
        :param measures: any of throughput, latency, latency_at, frame_loss, back_to_back
        :param loss_steps: frame-loss curve points, % of the unpaced receive rate
        :param latency_count: ICMP echoes during the trial at the NDR rate
        :param pdr_loss_pct: loss ratio of the partial drop rate
        :param ceiling_factor: search upper bound = unpaced receive rate * this
        :param settle_s: pause after every trial (RFC 2544: >= 5)
        :param b2b_gap_s: least time between bursts (iperf3 -b RATE/BURST)
        :param b2b_max_load_pct: mean rate of a burst trial, % of the ceiling
        :param b2b_resolution: back-to-back search resolution, frames
        :param jumbo: add the largest frame of a jumbo tenant MTU
        :param placements: same-host and/or cross-host (default: every pair of the testbed)
        :param latency_rates: latency_at: input rates, frames/s (seed 002: 1 and 1,000)
        :param latency_loads: latency_at: input rates as % of the unpaced receive rate
            (above 100: overload)
        """
        from vnetbench.battery import rfc2544
        dep = self._deployment()
        if dep is None:
            return self._not_applicable(self.TEST)
        results = [r for pair in self._pairs(dep, placements)
                   for r in rfc2544.run(
                       dep, pair, frame_sizes=frame_sizes, trial_s=trial_s,
                       resolution_pct=resolution_pct, max_trials=max_trials,
                       repetitions=repetitions, measures=tuple(measures),
                       loss_steps=tuple(loss_steps), latency_count=latency_count,
                       pdr_loss_pct=pdr_loss_pct, ceiling_factor=ceiling_factor,
                       settle_s=settle_s, b2b_gap_s=b2b_gap_s, b2b_max_load_pct=b2b_max_load_pct,
                       b2b_resolution=b2b_resolution, jumbo=jumbo,
                       latency_rates=tuple(latency_rates), latency_loads=tuple(latency_loads))]
        self._record(results)
        by = {}
        for r in results:
            by.setdefault(r.test, []).append(r)
        self.add_output(additive=charts.metrics_table(results, RFC2544_KEYS),
                        complete=charts.results_table(
                            "RFC 2544 throughput (inner frame incl. FCS; NDR = 0 loss, "
                            f"PDR <= {pdr_loss_pct:g} % loss)",
                            by.get("rfc2544_throughput", []), THROUGHPUT_KEYS))
        tput = by.get("rfc2544_throughput", [])
        if tput:
            series = {}
            for r in tput:
                for kind in ("ndr", "pdr"):
                    m = r.metrics.get(f"{kind}_fps", {}).get("mean")
                    if m is not None:
                        series.setdefault(f"{r.labels['placement']} {kind.upper()}", []).append(
                            [r.labels["params"]["frame_size"], m])
            self.add_output(complete=charts.lines("RFC 2544 throughput: frames/s vs inner frame "
                                                  "size", series, "frames/s", "frame (bytes)"))
        for test, title, keys in (
                ("rfc2544_latency", "RFC 2544 latency: ICMP RTT during a stream at the NDR rate "
                 "(latency_at: at set input rates)",
                 LATENCY_KEYS),
                ("rfc2544_frame_loss", "RFC 2544 frame loss", LOSS_KEYS),
                ("rfc2544_back_to_back", "RFC 2544 back-to-back (approximation: iperf3 bursts "
                 "at the sender's syscall speed, max 1000 frames)", B2B_KEYS)):
            if by.get(test):
                self.add_output(complete=charts.results_table(title, by[test], keys))
        if by.get("rfc2544_frame_loss"):
            series = {}
            for r in by["rfc2544_frame_loss"]:
                p = r.labels["params"]
                series.setdefault(f"{r.labels['placement']} {p['frame_size']}B", []).append(
                    [p["load_pct"], r.metrics["frame_loss_pct"]["mean"]])
            self.add_output(complete=charts.lines("RFC 2544 frame loss % vs offered load",
                                                  series, "frame loss %",
                                                  "offered load (% of the unpaced receive rate)"))
        skipped = sorted({s for r in tput for s in r.extra.get("skipped_frame_sizes", [])})
        self.add_output(complete={"title": "RFC 2544: what the numbers are", "chart_plugin":
                                  "TextArea", "data": [
                                      "Frame size = inner (tenant) Ethernet frame incl. FCS; "
                                      "UDP payload = frame - 46; rates in frames/s, iperf3 -b = "
                                      "fps * payload * 8.",
                                      "Loss = iperf3 receiver sequence gaps (whole virtual path, "
                                      "both VM stacks included).",
                                      "Back-to-back is approximated with iperf3 bursts (-b "
                                      "RATE/N): frames back to back at the sender's sendto() "
                                      "speed, not at a minimum inter-frame gap; N <= 1000.",
                                      "Skipped (tenant MTU too small): "
                                      + (", ".join(map(str, skipped)) or "none")]})


@scenario.configure(name="VnetBench.fairness", platform="default")
class Fairness(_Base):
    TEST = "udp_fairness"

    def run(self, settings=((70e6, 70e6), (40e6, 80e6), (30e6, 90e6), (70e6, 90e6),
                            (50e6, 80e6), (40e6, 40e6, 40e6), (40e6, 40e6, 80e6),
                            (80e6, 80e6, 80e6)),
            bottleneck_bps=100e6, seconds=10, length=None, background_bps=None, repetitions=3,
            sources="pair", qdisc_latency_ms=50.0, placements=None):
        """k UDP flows -> one receiver through a TBF bottleneck; Jain's fairness index.

        :param settings: lists of per-flow offered rates, UDP payload bits/s (seed: Fast
            Ethernet 70/70 ... 80/80/80 Mbit/s)
        :param bottleneck_bps: TBF rate on the receiver's host-side veth (L2 bits, no FCS)
        :param seconds: duration per repetition
        :param length: UDP payload bytes (default: tenant MTU - 28)
        :param background_bps: CBR background flow through the bottleneck, None = none
        :param repetitions: repetitions per setting
        :param sources: 'pair' (every flow from the pair's source VM) or 'host' (round
            robin over the VMs on the source's host)
        :param qdisc_latency_ms: TBF queue, in ms at the rate
        :param placements: same-host and/or cross-host
        """
        from vnetbench.battery import fairness
        dep = self._deployment()
        if dep is None:
            return self._not_applicable(self.TEST)
        results = [r for pair in self._pairs(dep, placements)
                   for r in fairness.run(
                       dep, pair, settings=[tuple(s) for s in settings],
                       bottleneck_bps=bottleneck_bps, seconds=seconds, length=length,
                       background_bps=background_bps, repetitions=repetitions, sources=sources,
                       qdisc_latency_ms=qdisc_latency_ms)]
        self._record(results)
        self.add_output(additive=charts.metrics_table(results, FAIRNESS_KEYS),
                        complete=charts.results_table(
                            f"UDP fairness through a {bottleneck_bps / 1e6:g} Mbit/s TBF",
                            results, FAIRNESS_KEYS))
        self.add_output(complete=flows_table(results))
        series = {}
        for r in results:
            pts = series.setdefault(r.labels["placement"], [])
            if r.metrics.get("jain_index", {}).get("mean") is not None:
                pts.append([len(pts) + 1, r.metrics["jain_index"]["mean"]])
        self.add_output(complete=charts.lines("Jain's index per setting", series,
                                              "Jain's index", "setting (in order)"))


def flows_table(results) -> dict:
    """Complete Table: one row per flow: source VM, offered, shares, received (mean)."""
    cols = ["placement", "setting", "flow", "source VM", "offered Mbit/s",
            "max-min share Mbit/s", "proportional share Mbit/s", "received Mbit/s (mean)",
            "loss % (mean)"]
    rows = []
    for r in results:
        p = r.labels["params"]
        for i, (src, offered) in enumerate(zip(p["source_vms"], p["offered_bps"])):
            rx = r.metrics.get(f"flow{i + 1}_mbps", {}).get("mean")
            loss = r.metrics.get(f"flow{i + 1}_loss_pct", {}).get("mean")
            rows.append([r.labels["placement"], r.labels.get("point", ""), i + 1, src,
                         round(offered / 1e6, 3), round(p["maxmin_share_bps"][i] / 1e6, 3),
                         round(p["proportional_share_bps"][i] / 1e6, 3),
                         "-" if rx is None else round(rx, 3),
                         "-" if loss is None else round(loss, 3)])
    return {"title": "UDP fairness per flow", "chart_plugin": "Table",
            "data": {"cols": cols, "rows": rows}}
