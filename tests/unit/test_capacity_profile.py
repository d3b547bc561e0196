"""The capacity profile built from recorded scale and battery results (tests/data/capacity:
real records of this machine, see its README): roles, the two kinds of point, how each
capacity is known, single-pair figures, spreads and instability, and the published
schema the planner reads it back with."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from vnetbench import cli
from vnetbench.capacity import files, profile
from vnetbench.results.load import load

DATA = Path(__file__).resolve().parents[1] / "data"
SCALE = [r for run in load([DATA / "capacity" / "records.jsonl"]) for r in run.records]
BATTERY = [r for run in load([DATA / "report" / "records.jsonl"]) for r in run.records]


@pytest.fixture(scope="module")
def doc():
    return profile.build(SCALE + BATTERY, ["recorded"])


def cell(doc, kind, network="vxlan"):
    return next(c for c in doc["cells"] if c["vswitch"] == kind and c["network"] == network
                and c["roles"])


def test_every_role_of_both_kinds_from_single_and_double_room(doc):
    for kind in ("ovs", "linuxbridge"):
        assert set(cell(doc, kind)["roles"]) == {"tx", "rx", "same"}


def test_the_userspace_senders_host_saturated_and_says_where(doc):
    tx = cell(doc, "ovs")["roles"]["tx"]
    cap = tx["capacity_gbps"]
    assert cap["how"] == "saturated" and cap["step"] >= 1 and "pairs gave" in cap["why"]
    assert 0.3 < cap["mean"] < 3          # this machine's AF_PACKET datapath: about 1 Gbit/s
    assert cap["kind"] == "range" and cap["lo"] <= cap["mean"] <= cap["hi"]


def test_a_kernel_datapath_that_never_saturated_is_extrapolated_and_says_from_where(doc):
    tx = cell(doc, "linuxbridge")["roles"]["tx"]
    cap = tx["capacity_gbps"]
    assert cap["how"] == "extrapolated" and cap["mean"] > cap["measured_to_gbps"]
    assert "not saturated up to" in cap["why"]


def test_a_plateau_that_is_not_the_vswitchs_is_kept_beside_the_capacity(doc):
    # one host, 1..4 same-host pairs: the aggregate stopped growing while the data plane
    # had CPU left (the guests share the host's one CPU): not a saturation, said as such
    same = cell(doc, "ovs")["roles"]["same"]
    assert same["capacity_gbps"]["how"] == "extrapolated"
    plateau = same["plateau_gbps"]
    assert plateau["mean"] < same["capacity_gbps"]["mean"] and "not this host's vSwitch" in plateau["why"]


def test_offered_load_points_are_the_curve_and_streams_are_kept_beside(doc):
    tx = cell(doc, "ovs")["roles"]["tx"]
    assert tx["points_from"].startswith("offered loads")
    assert all(p["offered"].endswith("Gbit/s a pair") for p in tx["points"])
    assert all(p["offered"] == "unlimited" for p in tx["unlimited_points"])
    loads = [p["load_gbps"]["mean"] for p in tx["points"]]
    assert loads == sorted(loads) and len(set(loads)) == len(loads)
    # the measured shape: a userspace datapath's fixed cost makes a light load dear
    assert tx["points"][0]["pct_per_gbps"]["mean"] > tx["unlimited_points"][-1]["pct_per_gbps"]["mean"]


def test_single_pair_figures_from_the_battery(doc):
    c = next(c for c in doc["cells"] if c["vswitch"] == "ovs" and c["network"] == "vxlan"
             and c.get("single_pair"))
    tcp = c["single_pair"]["cross-host"]["tcp"]
    assert tcp["gbps_per_cpu"]["mean"] == pytest.approx(
        # MSS 1410 (the path's largest), the faster of its two records
        sum(g / (u / 100) for g, u in zip([0.9244777881466176, 1.1532840827147086],
                                          [198.58348379725226, 209.24489493188526])) / 2, rel=1e-3)
    assert c["single_pair"]["same-host"]["udp"]["pps_per_cpu"]["mean"] > 0
    conn = c["new_conn_s"]["cross-host"]
    assert conn["mean"] == 10000 and conn["hi"] is None and "may be higher" in conn["how"]


def test_host_role_needs_one_role():
    pairs = [{"ok": True, "gbps": 1.0, "hosts": ["h1", "h2"]}, {"ok": True, "gbps": 2.0, "hosts": ["h1", "h2"]},
             {"ok": False, "gbps": None, "hosts": ["h2", "h1"]}]
    assert profile.host_role("h1", pairs) == ("tx", 3.0, 2)
    assert profile.host_role("h2", pairs) == ("rx", 3.0, 2)
    mixed = pairs + [{"ok": True, "gbps": 1.0, "hosts": ["h1", "h1"]}]
    assert profile.host_role("h1", mixed) == (None, 4.0, 3)


def test_disagreeing_repetitions_make_the_profile_unstable():
    recs = copy.deepcopy([r for r in SCALE if r.labels["vswitch"] == "linuxbridge"][:1])
    for rep in recs[0].extra["repetitions"][1:]:
        for h in rep["hosts"].values():
            h["dataplane_pct"] = (h["dataplane_pct"] or 0) * 3 + 10
    doc = profile.build(recs)
    assert doc["stable"] is False
    assert any("cpu_pct" in u for c in doc["cells"] for u in c["unstable"])


def test_the_profile_reads_back_through_the_published_schema(doc, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert files.load_profile(path)["cells"] == doc["cells"]


def test_capacity_command_writes_the_profile_and_a_summary(tmp_path, capsys):
    out = tmp_path / "profile.yaml"
    assert cli.main(["capacity", str(DATA / "capacity"), str(DATA / "report"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ovs/vxlan" in text and "(saturated)" in text and "(extrapolated)" in text
    assert files.load_profile(out)["vnetbench_capacity"] == 1


def test_records_that_say_nothing_about_capacity_are_one_line(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(line + "\n" for line in (DATA / "report" / "records.jsonl").read_text().splitlines()
                            if '"test": "icmp_rtt"' in line))
    assert cli.main(["capacity", str(path), "--out", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no record says what a vSwitch carries" in err
    assert not (tmp_path / "p.yaml").exists()
