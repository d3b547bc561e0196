"""RFC 2544 and fairness through ``rally task start`` on the embedded testbed (short
durations, as in test_rally.py): Rally finds the plugins, the SLA passes, the HTML
report has the charts, the records are complete and plausible, and nothing of the
run is left behind (namespaces, processes, state)."""

import json
from pathlib import Path

import pytest

from leaks import leftovers

REPO = Path(__file__).resolve().parents[2]
BASE = {"vswitch": "ovs", "network": "vxlan"}
RFC2544 = {**BASE, "frame_sizes": [64], "trial_s": 1, "max_trials": 3, "repetitions": 1,
           "loss_steps": [50, 100], "latency_count": 20, "b2b_resolution": 100}
FAIRNESS = {**BASE, "settings": [[20000000, 20000000], [10000000, 40000000]],
            "bottleneck_bps": 30000000, "seconds": 1, "repetitions": 2}


@pytest.fixture
def task(rally, tmp_path, caps):
    """Run a task file with args; -> the records, after checking report, SLA and leaks."""
    from vnetbench.testbed.model import NetType, VSwitchKind
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))

    def start(name, args, charts):
        records = tmp_path / "records.jsonl"
        out = rally("task", "start", "--env", "vnetbench", str(REPO / "rally-tasks" / f"{name}.yaml"),
                    "--task-args", json.dumps({**args, "results": str(records)}))
        uuid = out.stdout.split("rally task report ")[1].split()[0]
        report = tmp_path / "report.html"
        rally("task", "report", uuid, "--out", str(report))
        html = report.read_text()
        for title in ("vnetbench metrics", *charts):
            assert title in html, title
        sla = json.loads(rally("task", "sla-check", uuid, "--json", check=False).stdout)
        assert sla and all(c["status"] == "PASS" for c in sla), sla
        recs = [json.loads(line) for line in records.read_text().splitlines()]
        for run_id in {r["labels"]["run_id"] for r in recs if "run_id" in r["labels"]}:
            assert not leftovers(run_id, rally.state / run_id), run_id
        return recs
    return start


def common_checks(r, repetitions):
    assert r["labels"]["vswitch"] == "ovs" and r["labels"]["network"] == "vxlan"
    assert r["provenance"]["tenant_mtu"] == 1450 and r["provenance"]["tools"]["iperf3"]
    assert len(r["samples"]["cpu_pct"]) == repetitions
    assert all(v is None or v >= 0 for v in r["samples"]["cpu_pct"])


def test_rfc2544_through_rally(task):
    recs = task("rfc2544", RFC2544, ("RFC 2544 throughput", "RFC 2544 frame loss",
                                     "RFC 2544 back-to-back", "what the numbers are"))
    assert {r["labels"]["placement"] for r in recs} == {"same-host", "cross-host"}
    by = {}
    for r in recs:
        by.setdefault(r["test"], []).append(r)
        p = r["labels"]["params"]
        assert p["frame_size"] == 64 and p["frame_size_kind"] == "inner"
        assert p["udp_payload"] == 18 and p["trial_s"] == 1
    assert len(by["rfc2544_throughput"]) == 2 and len(by["rfc2544_frame_loss"]) == 4
    assert len(by["rfc2544_back_to_back"]) == 2 and len(by["rfc2544_latency"]) == 2

    for r in by["rfc2544_throughput"]:
        common_checks(r, 1)
        s, x = r["samples"], r["extra"]["repetitions"][0]
        assert r["extra"]["skipped_frame_sizes"] == []
        assert 1_000 <= s["ceiling_fps"][0] <= 1e8 and s["sender_fps"][0] >= s["ceiling_fps"][0] * 0.9
        assert s["trials"][0] <= 1 + 2 * 3                       # ceiling + two bounded searches
        assert x["trials"][0]["kind"] == "ceiling" and len(x["trials"]) == s["trials"][0]
        if s["ndr_fps"][0] is not None:
            assert 0 < s["ndr_fps"][0] <= x["search_upper_fps"] + 1
            assert s["ndr_gbps"][0] == pytest.approx(s["ndr_fps"][0] * 64 * 8 / 1e9)
            assert s["pdr_fps"][0] >= s["ndr_fps"][0]
            ndr_trial = [t for t in x["trials"] if t["rate_fps"] == s["ndr_fps"][0]]
            assert ndr_trial and ndr_trial[0]["lost_packets"] == 0
            assert ndr_trial[0]["bitrate_bps"] == round(s["ndr_fps"][0] * 18 * 8)

    for r in by["rfc2544_latency"]:
        if r["samples"]:                          # else: no zero-loss rate, noted
            common_checks(r, 1)
            assert 1e-3 <= r["samples"]["rtt_avg_ms"][0] <= 1000
            assert r["samples"]["rtt_p99_ms"][0] >= r["samples"]["rtt_p50_ms"][0]
            assert len(r["extra"]["repetitions"][0]["rtt_samples_ms"]) >= 10
        else:
            assert "no zero-loss rate" in r["extra"]["note"]

    for r in by["rfc2544_frame_loss"]:
        common_checks(r, 1)
        assert r["labels"]["params"]["load_pct"] in (50, 100)
        assert 0 <= r["samples"]["frame_loss_pct"][0] <= 100 and r["samples"]["rx_fps"][0] > 0

    for r in by["rfc2544_back_to_back"]:
        common_checks(r, 1)
        p = r["labels"]["params"]
        assert p["back_to_back_kind"] == "iperf3-syscall-burst" and p["max_burst"] == 1000
        n = r["samples"]["burst_frames"][0]
        assert n is None or 1 <= n <= 1000
        assert all(1 <= t["burst"] <= 1000 for t in r["extra"]["repetitions"][0]["trials"])


def test_fairness_through_rally(task):
    recs = task("fairness", FAIRNESS, ("UDP fairness per flow", "Jain's index per setting"))
    assert {r["labels"]["placement"] for r in recs} == {"same-host", "cross-host"}
    assert sorted(r["labels"]["point"] for r in recs) == \
        sorted(["20/20 Mbit/s", "10/40 Mbit/s"] * 2)
    for r in recs:
        assert r["test"] == "udp_fairness"
        common_checks(r, FAIRNESS["repetitions"])
        p, s = r["labels"]["params"], r["samples"]
        assert p["flows"] == 2 and p["shared_source_vm"] and p["bottleneck_bps"] == 30e6
        cap = p["payload_capacity_bps"] / 1e6
        for rep in range(FAIRNESS["repetitions"]):
            assert 0.5 <= s["jain_index"][rep] <= 1.0 + 1e-9
            assert 0 < s["total_mbps"][rep] <= cap * 1.25          # the TBF really limits
            assert s["total_mbps"][rep] == pytest.approx(s["flow1_mbps"][rep] + s["flow2_mbps"][rep])
        flows = r["extra"]["repetitions"][0]["flows"]
        assert [f["port"] for f in flows] == [5301, 5302]
        assert r["extra"]["repetitions"][0]["qdisc"]["kind"] == "tbf"
        assert r["extra"]["repetitions"][0]["qdisc"]["packets"] > 0     # traffic went through it
