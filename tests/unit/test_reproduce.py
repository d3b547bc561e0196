"""Seed reproduction (issue 22): the seed's figures come from its data file; each claim is
judged on measured records as agrees / differs / cannot tell here, with the reason."""

import json

import pytest

from vnetbench.report import table
from vnetbench.results.load import Run
from vnetbench.reproduce import judge, render, seed
from vnetbench.results.record import Result

OF, LB, VR = "ovs-openflow/vxlan", "linuxbridge/flat", "vrouter/gre"


def rec(column, test, variable, placement, metric, values, extra=None, **more):
    vswitch, network = column.split("/")
    params = {"mode": variable} if test == "icmp_rtt" else {"nominal": int(variable.split()[1])} \
        if test == "tcp_stream" else {}
    labels = {"vswitch": vswitch, "network": network, "placement": placement, "params": params}
    if test not in ("icmp_rtt", "tcp_stream"):
        labels["point"] = variable
    samples = {metric: list(values), **{k: list(v) for k, v in more.items()}}
    if test == "icmp_rtt":      # RTT's spread pools echoes: give each repetition its sd
        samples["rtt_sd_ms"] = [0.01] * len(values)
    return Result(test=test, labels=labels, samples=samples,
                  provenance={"ovs_datapath": "netdev" if "ovs" in vswitch else None},
                  extra=extra or {})


def judged(records, seed_id="003"):
    s = seed.load(seed_id)
    return s, {r.row.id: r for r in judge.judge(s, table.build([Run("", None, tuple(records))]))}


def verdicts(result):
    return [(v.claim.kind, v.status) for v in result.verdicts]


def deferred(of, lb, vr, placement="same-host"):
    return [rec(c, "icmp_rtt", "deferred", placement, "rtt_mean_ms", v)
            for c, v in ((OF, of), (LB, lb), (VR, vr))]


def test_every_shipped_seed_file_loads_with_its_source():
    for sid in seed.available():
        s = seed.load(sid)
        assert s.rows and s.file.startswith("seeds/") and s.systems
        for row in s.rows:
            assert row.source and row.metric and row.figures
    assert {"003"} <= set(seed.available())


def test_the_seed_figures_are_the_papers():
    s = seed.load("003")
    row = next(r for r in s.rows if r.id == "tcp-1468-same")
    assert row.figures["OpenContrail"].value == 10.8 and row.figures["OpenContrail"].cpu_pct == 203.1
    assert row.figures["Floodlight"].show("Gbit/s") == "11.12 Gbit/s (CPU 197%)"
    assert next(r for r in s.rows if r.id == "tcp-68-cross").figures["Linux bridge"].show("Gbit/s") == "TODO"


def test_clear_measurements_agree():
    _, res = judged(deferred(of=[1.2, 1.25, 1.22], lb=[0.30, 0.31, 0.30], vr=[0.5, 0.52, 0.51]))
    assert verdicts(res["rtt-deferred-same"]) == [("highest", "agrees"), ("lowest", "agrees")]


def test_clear_measurements_that_contradict_the_seed_differ_with_the_declared_reason():
    _, res = judged(deferred(of=[0.4, 0.41, 0.40], lb=[0.30, 0.31, 0.30], vr=[1.4, 1.42, 1.41]))
    v = res["rtt-deferred-same"].verdicts[0]
    assert v.status == "differs" and v.reason.startswith("model: the deferred echo meets each kind's flow state")


def test_overlapping_measurements_cannot_tell():
    _, res = judged(deferred(of=[0.3, 0.9, 0.6], lb=[0.4, 0.7, 0.5], vr=[0.35, 0.8, 0.55]))
    v = res["rtt-deferred-same"].verdicts[0]
    assert v.status == "cannot tell here" and "overlaps" in v.reason


def test_a_missing_or_na_system_cannot_tell_and_says_which():
    records = deferred(of=[1.2, 1.2, 1.2], lb=[0.3, 0.3, 0.3], vr=[0.5, 0.5, 0.5])[:2]
    _, res = judged(records)
    assert res["rtt-deferred-same"].verdicts[0].reason == "OpenContrail: not measured"
    na = Result(test="icmp_rtt", labels={"vswitch": "vrouter", "network": "gre"}, samples={},
                extra={"not_applicable": "kernel lacks X"})
    _, res = judged(records + [na])
    assert res["rtt-deferred-same"].verdicts[0].reason == "OpenContrail: N/A here (kernel lacks X)"


def test_an_emulation_bound_cell_is_the_reason_before_anything_declared():
    saturated = {"repetitions": [{"cpu": {"components": {"vswitch/ovs-vswitchd/main": 97.0}}}] * 3}
    records = [rec(OF, "tcp_stream", "mss 1468", "same-host", "gbps", [0.8, 0.82, 0.81], saturated),
               rec(LB, "tcp_stream", "mss 1468", "same-host", "gbps", [15.0, 15.2, 15.1])]
    _, res = judged(records)
    v = next(v for v in res["tcp-1468-same"].verdicts if v.claim.systems == ("Floodlight", "Linux bridge"))
    assert v.status == "differs"
    assert v.reason.startswith("emulation-bound: Floodlight's model: ovs-vswitchd/main at 97%")


@pytest.mark.parametrize("kind, values, expected", [
    ("at_most", [0.0, 0.0, 0.3], "agrees"), ("at_most", [90.0, 95.0, 99.0], "differs"),
    ("at_most", [0.0, 0.5, 4.0], "cannot tell here"),
])
def test_limits_both_ways(kind, values, expected):
    records = [rec(c, "broadcast", "icmp", "cross-host", "answered_loss_pct", values) for c in (OF, LB, VR)]
    _, res = judged(records)
    assert verdicts(res["bcast-icmp-cross"]) == [(kind, expected)]


def test_about_and_greater_with_factor():
    cpu = {"cpu_pct": [190.0, 195.0, 200.0]}
    records = [rec(VR, "tcp_stream", "mss 68", "same-host", "gbps", [11.0, 11.2, 11.1], **cpu),
               rec(OF, "tcp_stream", "mss 68", "same-host", "gbps", [9.0, 9.1, 9.2]),
               rec(LB, "tcp_stream", "mss 68", "same-host", "gbps", [7.4, 7.5, 7.6], cpu_pct=[40.0, 41.0, 42.0])]
    _, res = judged(records)
    assert [v.status for v in res["tcp-68-same"].verdicts] == ["agrees", "agrees", "agrees"]
    records = [rec(c, "udp_stream", "p=5", "same-host", "gbps", v)
               for c, v in ((OF, [3.5, 3.6, 3.55]), (LB, [1.0, 1.05, 1.1]), (VR, [0.5, 0.5, 0.5]))]
    _, res = judged(records)
    assert res["udp-5-same"].verdicts[0].status == "differs"      # 3.55 vs 1.05: not within 10%


def latency(variable, values):
    return rec(LB, "rfc2544_latency", variable, "same-host", "rtt_avg_ms", values,
               rtt_sd_ms=[0.001] * len(values))


@pytest.mark.parametrize("slow, fast, expected", [
    ([0.090, 0.092, 0.091], [0.040, 0.041, 0.040], "agrees"),
    ([0.040, 0.041, 0.040], [0.090, 0.092, 0.091], "differs"),
    ([0.040, 0.090, 0.065], [0.050, 0.080, 0.060], "cannot tell here"),
])
def test_a_claim_against_the_same_system_in_another_row_both_ways(slow, fast, expected):
    """Seed 002: latency at 1 fps is longer than at 1,000 fps -- one system, two rows."""
    _, res = judged([latency("64B latency at 1 fps", slow), latency("64B latency at 1000 fps", fast)],
                    "002")
    (v,) = res["latency-1fps"].verdicts
    assert v.status == expected
    assert [n for n, _ in v.values] in ([], ["Linux bridge (64B latency at 1 fps)",
                                             "Linux bridge (64B latency at 1000 fps)"])


def test_overload_needs_two_orders_of_magnitude():
    half = latency("64B latency at 50% of ceiling", [0.05, 0.051, 0.05])
    _, res = judged([half, latency("64B latency at 150% of ceiling", [2.0, 2.1, 2.05])], "002")
    assert verdicts(res["latency-overload"]) == [("greater", "differs")]     # 40x, not 100x
    _, res = judged([half, latency("64B latency at 150% of ceiling", [20.0, 21.0, 20.5])], "002")
    assert verdicts(res["latency-overload"]) == [("greater", "agrees")]
    _, res = judged([half], "002")
    assert res["latency-overload"].verdicts[0].reason == \
        "Linux bridge (64B latency at 150% of ceiling): not measured"


@pytest.mark.parametrize("claim, error", [
    ({"says": "x", "greater": "A", "than_row": "nowhere"}, "compares with row 'nowhere'"),
    ({"says": "x", "about": ["A", "B"], "than_row": "r1"}, "than_row compares one system"),
    ({"says": "x", "greater": ["A", "B"], "than_row": "r1"}, "than_row compares one system"),
    ({"says": "x", "greater": "A"}, "greater names two systems"),
])
def test_a_cross_row_claim_that_cannot_be_judged_is_refused_when_the_file_is_read(claim, error):
    row = {"id": "r1", "source": "s", "test": "icmp_rtt", "variable": "v", "placement": "same-host",
           "metric": "m", "unit": "ms", "seed": {"A": {"value": 1}}, "claims": [claim]}
    d = {"seed": "9", "file": "f", "title": "t", "table": "T", "systems": {"A": "a/b", "B": "c/d"},
         "rows": [row]}
    with pytest.raises(ValueError, match=error):
        seed.parse(d, "x.yaml")


def test_seed_002_asks_the_comparison_for_its_rfc2544_points():
    s = seed.load("002")
    assert s.task_args["rfc_measures"] == ["throughput", "latency_at"]
    variables = {r.variable for r in s.rows if r.test == "rfc2544_latency"}
    from vnetbench.battery import rfc2544
    cfg = rfc2544.Config(latency_rates=tuple(s.task_args["rfc_latency_rates"]),
                         latency_loads=tuple(s.task_args["rfc_latency_loads"]))
    points = [rfc2544.point_name(w) for _, w in rfc2544.latency_points(cfg, 60000.0)]
    made = {f"{f}B latency at {p}" for f in s.task_args["rfc_frames"] for p in points}
    assert variables <= made                   # every row has its point
    assert {f"64B latency at {p}" for p in points} <= variables     # the 64 B points each a row
    sizes = {f"{f}B throughput" for f in s.task_args["rfc_frames"]}
    assert {r.variable for r in s.rows if r.test == "rfc2544_throughput"} == sizes


def test_renderings_carry_seed_and_measured_side_by_side():
    s, res = judged(deferred(of=[1.2, 1.25, 1.22], lb=[0.30, 0.31, 0.30], vr=[0.5, 0.52, 0.51]))
    results = list(res.values())
    text = render.plain(s, results)
    assert "0.408 ±0.035 ms" in text and "agrees: Floodlight's time-deferred RTT is the highest" in text
    assert "claims on 26 rows" in text
    md = render.markdown(s, results)
    assert md.count("\n| ") == 27 and "## The seed's claims" in md
    js = json.loads(json.dumps(render.to_dict(s, results)))
    row = next(r for r in js["rows"] if r["id"] == "rtt-deferred-same")
    assert row["source"]["file"] == "seeds/003_5cfb4f2c8bcd21f9.txt"
    assert row["systems"]["Floodlight"]["seed"]["value"] == 1.102
    assert row["claims"][0]["verdict"] == "agrees"


def test_the_cli_does_not_load_the_report_stack_for_other_commands():
    """`reproduce` registers its parser without importing the report (matplotlib): every
    other command would pay for it, and a user without a writable HOME got matplotlib's
    complaint on stderr before vnetbench's one-line error (CI run B, test_not_root_is_refused)."""
    import subprocess
    import sys
    code = "import sys; from vnetbench import cli; cli._parser(); print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def routed_rec(test, variable, placement, metric, values, path=None):
    r = rec(LB, test, variable, placement, metric, values)
    if path:
        r.labels["path"] = path
    return r


def test_seed_002s_router_is_the_routed_pair_of_the_bridges_column():
    """Section 5's Linux router: the routed pair (path l3-east-west) of the same column as
    the Linux bridge, measured in one testbed; each system's cell is found at its path,
    and the claim between them is judged on both."""
    s = seed.load("002")
    assert s.columns == [LB, "ovs/vxlan", "ovs-openflow/vxlan", "ovn/geneve", "vrouter/gre"]  # every kind's router beside
    assert s.measured_paths == ["l2", "l3-east-west"]
    assert list(dict.fromkeys(s.systems.values())) == [LB]       # --seed-systems-only: one column
    assert s.where("Linux router") == "linuxbridge/flat l3-east-west" and s.where("Linux bridge") == LB
    recs = [routed_rec("rfc2544_latency", "64B latency at 1000 fps", "same-host", "rtt_avg_ms", [0.030, 0.031, 0.030]),
            routed_rec("rfc2544_latency", "64B latency at 1000 fps", "same-host", "rtt_avg_ms", [0.041, 0.040, 0.041],
                       path="l3-east-west"),
            routed_rec("rfc2544_throughput", "64B throughput", "same-host", "ndr_fps", [50000, 51000, 50500]),
            routed_rec("rfc2544_throughput", "64B throughput", "same-host", "ndr_fps", [40000, 40500, 40200],
                       path="l3-east-west")]
    _, res = judged(recs, "002")
    assert verdicts(res["latency-1000fps"]) == [("greater", "agrees")]
    assert verdicts(res["throughput-64b"]) == [("greater", "agrees")]
    values = dict(res["throughput-64b"].verdicts[0].values)
    assert values == {"Linux bridge": pytest.approx(50500), "Linux router": pytest.approx(40233.33, rel=1e-3)}
    text = render.plain(seed.load("002"), list(res.values()))
    assert "linuxbridge/flat l3-east-west (here)" in text and "Linux router = linuxbridge/flat l3-east-west" in text


def test_a_system_with_an_unknown_path_is_refused():
    doc = {"seed": "x", "file": "seeds/x", "title": "t", "table": "t",
           "systems": {"A": {"column": LB, "path": "l3-north"}}, "rows": []}
    with pytest.raises(ValueError, match="path 'l3-north'"):
        seed.parse(doc, "x.yaml")


@pytest.mark.parametrize("beside", ["ovn", "ovn/geneve east-west"])
def test_a_column_beside_is_vswitch_network_and_maybe_a_path(beside):
    d = {"seed": "9", "file": "f", "title": "t", "table": "T", "systems": {"A": "a/b"}, "beside": [beside],
         "rows": []}
    with pytest.raises(ValueError, match=r"is not 'vswitch/network \[ROUTING\] \[PATH\]'"):
        seed.parse(d, "x.yaml")


def seed000_rec(routing, test, variable, path, metric, values):
    """A record of seed 000's testbed: the battery labels it with the router's routing."""
    r = rec("ovs/vlan", test, variable, "same-host", metric, values)
    if test == "icmp_rtt":                      # the flood at a payload: mode and point
        mode, _, point = variable.partition(" ")
        r.labels["params"], r.labels["point"] = {"mode": mode}, point
    r.labels["routing"] = routing
    if path:
        r.labels["path"] = path
    return r


def test_seed_000s_rows_are_the_batterys_points():
    """Every row names a test and metric the table shows and a variable the comparison task
    makes with the seed file's task_args (the flood at each payload, one UDP session)."""
    s = seed.load("000")
    assert s.columns == ["ovs/vlan svi", "ovs/vlan stick"] and s.placements == ["same-host"]
    assert s.measured_paths == ["l2", "l3-east-west"]
    made = {("icmp_rtt", f"flood {p} B") for p in s.task_args["rtt_payloads"]}
    made |= {("udp_stream", f"p={n}") for n in s.task_args["udp_sessions"]}
    for row in s.rows:
        assert row.metric == table.HEADLINE[row.test][0]
        assert (row.test, row.variable) in made
        assert row.placement in ("same-host", "same-host l3-east-west") and "Figure" in row.source
    assert s.task_args["udp_background_bps"] == {"svi": 25000000, "stick": 20000000}


def test_seed_000s_testbeds_are_columns_of_their_own_and_judged():
    """The L3 switch and the router on a stick are two columns ("ovs/vlan svi", "... stick")
    of one kind and network; the stick's greater inter-VLAN RTT agrees, the L3 switch's
    intra = inter claim is judged against its own other row."""
    recs = []
    for routing, intra, inter in (("svi", [0.18, 0.19, 0.18], [0.33, 0.34, 0.33]),
                                  ("stick", [0.18, 0.185, 0.19], [0.55, 0.57, 0.56])):
        for size in (100, 1440):
            recs += [seed000_rec(routing, "icmp_rtt", f"flood {size} B", None, "rtt_mean_ms", intra),
                     seed000_rec(routing, "icmp_rtt", f"flood {size} B", "l3-east-west", "rtt_mean_ms", inter)]
        recs += [seed000_rec(routing, "udp_stream", "p=1", None, "gbps", [0.030, 0.030, 0.030]),
                 seed000_rec(routing, "udp_stream", "p=1", "l3-east-west", "gbps", [0.017, 0.018, 0.016])]
    s, res = judged(recs, "000")
    assert [c.label for c in table.build([Run("", None, tuple(recs))]).columns] == ["ovs/vlan svi", "ovs/vlan stick"]
    assert verdicts(res["rtt-intra-100"]) == [("about", "agrees")]
    assert verdicts(res["rtt-inter-100"]) == [("greater", "agrees"), ("about", "differs")]
    assert "model: here the SVI is an OVS internal port" in res["rtt-inter-100"].verdicts[1].reason
    assert verdicts(res["udp-intra"]) == [("at_most", "differs"), ("at_most", "cannot tell here")]
    assert verdicts(res["udp-inter"]) == [("at_most", "agrees"), ("at_most", "cannot tell here")]
    assert res["udp-inter"].verdicts[1].reason == "OVS L3 switch: not measured"   # no background_loss_pct given
    text = render.plain(s, list(res.values()))
    assert "OVS router on a stick = ovs/vlan stick" in text and "ovs/vlan svi (here)" in text


@pytest.mark.parametrize("spec, error", [({"column": "ovs/vlan", "routing": "hub"}, "routing 'hub' is not one of svi, stick")])
def test_a_system_with_an_unknown_routing_is_refused(spec, error):
    doc = {"seed": "x", "file": "seeds/x", "title": "t", "table": "t", "systems": {"A": spec}, "rows": []}
    with pytest.raises(ValueError, match=error):
        seed.parse(doc, "x.yaml")


def test_the_background_loss_is_a_metric_of_the_flows_that_reported_one():
    from vnetbench.battery.udp import background_loss
    flows = [{"loss_pct": 10.0}, {"loss_pct": 30.0}, {"error": "iperf3: unable to read"}]
    assert background_loss(flows) == {"background_loss_pct": 20.0}
    assert background_loss([{"error": "x"}]) == {} and background_loss([]) == {}
