"""Verdicts and the matrix against recorded measurements of working and deliberately
broken systems (tests/data/functional/record.py), so a check that cannot fail is caught."""

import copy
import json
from pathlib import Path

import pytest

from vnetbench.functional import verdict as v
from vnetbench.functional.matrix import ROWS, Matrix, expected
from vnetbench.functional.verdict import Status

DATA = Path(__file__).resolve().parents[1] / "data" / "functional"


def rec(name):
    return json.loads((DATA / f"{name}.json").read_text())


# -- isolation -----------------------------------------------------------------------

def test_reachability_pass_and_fail_recorded():
    ok = v.reachability(rec("reach-pass")["pings"])
    assert ok.status is Status.PASS and ok.value == 0
    bad = v.reachability(rec("reach-fail")["pings"])
    assert bad.status is Status.FAIL and "red-1 -> red-2 (red): no reply" in bad.detail


def test_reachability_answer_from_the_other_vnets_twin_fails():
    pings = copy.deepcopy(rec("reach-pass")["pings"])
    pings[0]["peer_mac"] = pings[2]["expected_mac"]        # blue's VM answered for red's
    got = v.reachability(pings)
    assert got.status is Status.FAIL and "answered by" in got.detail


def test_reachability_on_an_l3_kind_counts_the_peers_own_echo_replies():
    """vrouter answers every ARP with its own MAC: the peer's echo-reply counter decides."""
    pings = copy.deepcopy(rec("reach-pass")["pings"])
    for p in pings:
        p.update(expected_mac=None, peer_mac="00:00:5e:00:01:00", replies_by_peer=p["received"])
    assert v.reachability(pings).status is Status.PASS
    pings[1]["replies_by_peer"] = 0                          # someone else answered
    got = v.reachability(pings)
    assert got.status is Status.FAIL and "the peer sent 0" in got.detail


@pytest.mark.parametrize("name", ["broadcast", "unknown-unicast"])
def test_no_leak_recorded(name):
    ok = v.no_leak(rec(f"{name}-pass"))
    assert ok.status is Status.PASS and ok.value == 0 and "blue-2 200/200" in ok.detail
    leak = v.no_leak(rec(f"{name}-leak"))
    assert leak.status is Status.FAIL and leak.value == 200 and "red-2 200" in leak.detail


def test_no_leak_without_the_control_is_an_error_not_a_pass():
    m = rec("broadcast-pass")
    m["own_vnet"] = {"blue-2": 0, "blue-3": 200}     # the capture or the path is broken
    assert v.no_leak(m).status is Status.ERROR
    assert v.no_leak({**m, "sent": 0, "own_vnet": {}}).status is Status.ERROR


def test_deprovision_recorded():
    ok = v.deprovision(rec("deprovision-pass"))
    assert ok.status is Status.PASS and 0 <= ok.value < 500 and ok.unit == "ms"
    assert ok.extra["change_ms"] > 0 and "a new ping fails" in ok.detail
    never = v.deprovision(rec("deprovision-never-stops"))
    assert never.status is Status.FAIL and "ongoing traffic continued" in never.detail


def test_deprovision_stop_time_is_read_from_the_probes():
    m = rec("deprovision-pass")
    t0, step = m["t_start_ns"], m["sender"]["interval_ns"]
    last = max(p[1] for p in m["probes"])
    assert v.deprovision(m).value == pytest.approx((last + step - t0) / 1e6)


def test_deprovision_new_ping_or_collateral_damage_fails():
    m = rec("deprovision-pass")
    assert "new ping" in v.deprovision({**m, "new_ping": {"sent": 3, "received": 1}}).detail
    cut = v.deprovision({**m, "other_vnet_ping": {"sent": 3, "received": 0}})
    assert cut.status is Status.FAIL and "left alone" in cut.detail


def test_deprovision_void_measurements_are_errors():
    m = rec("deprovision-pass")
    assert v.deprovision({**m, "probes": [p for p in m["probes"] if p[1] > m["t_start_ns"]]}
                         ).status is Status.ERROR
    short = {**m, "sender": {**m["sender"], "last_ns": m["t_done_ns"] + 10**8}}
    assert v.deprovision(short).status is Status.ERROR


# -- rate limiting ---------------------------------------------------------------------

def test_rate_compliance_recorded():
    ok = v.rate_compliance(rec("rate-limited"))
    assert ok.status is Status.PASS and 9 <= ok.value <= 11
    assert ok.extra["burst_mbps"] > 15        # TBF's 1 MB bucket drains in the first second
    unlimited = v.rate_compliance(rec("rate-unlimited"))
    assert unlimited.status is Status.FAIL and unlimited.value > 1000


def test_rate_compliance_a_sender_held_back_by_its_own_limit_is_not_too_slow():
    """linuxbridge egress (IFB + TBF) pushes back on the VM's socket: it offers 10.9 of
    the 20 Mbit/s asked, with no loss. An unlimited sender beside it that offers 20 shows
    the VM could; without that control (or when it is as slow) it stays an Error."""
    m = {**rec("rate-limited"), "sent_mbps": 10.9, "lost_percent": 0.0}
    assert v.rate_compliance(m).status is Status.ERROR
    held = v.rate_compliance({**m, "control_sent_mbps": 20.0})
    assert held.status is Status.PASS and "held the sender itself to 10.9" in held.detail
    assert v.rate_compliance({**m, "control_sent_mbps": 10.5}).status is Status.ERROR


def test_rate_compliance_bounds_and_short_runs():
    base = {"limit_mbps": 10.0}
    assert v.rate_compliance({**base, "samples_mbps": [30, 20, 11, 9, 10.9]}).status is Status.PASS
    assert v.rate_compliance({**base, "samples_mbps": [30, 20, 11.2, 11.2]}).status is Status.FAIL
    assert v.rate_compliance({**base, "samples_mbps": [10, 10]}).status is Status.ERROR


def test_egress_limit_after_a_restart_recorded_with_and_without_the_agent():
    """ovs/vxlan, 0.2 s samples after an ovs-vswitchd restart: the agent re-provisions
    the meter (Pass, the time unlimited); with the agent stopped it never comes back."""
    ok = v.rate_restored(rec("egress-restart-ovs"))
    assert ok.status is Status.PASS and 0.2 <= ok.value <= 4 and "burst alone is 0.8 s" in ok.detail
    lost = v.rate_restored(rec("egress-restart-ovs-no-agent"))
    assert lost.status is Status.FAIL and lost.value > 15 and "not restored" in lost.detail


def test_egress_limit_after_a_restart_bounds():
    base = {"limit_mbps": 10.0, "interval_s": 0.5, "steady_s": 1, "restart_ms": 100}
    held = v.rate_restored({**base, "samples_mbps": [9, 10, 10, 10]})
    assert held.status is Status.PASS and held.value == 0 and "held from the first" in held.detail
    late = v.rate_restored({**base, "samples_mbps": [0, 20, 20, 12, 10, 10]})
    assert late.status is Status.PASS and late.value == 2.0
    assert v.rate_restored({**base, "samples_mbps": [0, 0, 0]}).status is Status.ERROR
    assert v.rate_restored({**base, "samples_mbps": [10]}).status is Status.ERROR


def test_unaffected_recorded():
    assert v.unaffected(rec("rate-unlimited")).status is Status.PASS
    held = v.unaffected({"limit_mbps": 10.0, "mbps": rec("rate-limited")["mbps"]})
    assert held.status is Status.FAIL and "held to" in held.detail


# -- matrix -------------------------------------------------------------------------------

def test_matrix_markdown_footnotes_every_non_pass_and_expectation_gap():
    m = Matrix(expect={"ovs": {"isolation.broadcast": Status.PASS}})
    m.add("ovs", "vxlan", "isolation.broadcast", v.no_leak(rec("broadcast-leak")))
    m.add("ovs", "vxlan", "isolation.unicast", v.Verdict(Status.PASS, 0, "frames", "fine"))
    m.add("linuxbridge", "vxlan", "isolation.broadcast", v.no_leak(rec("broadcast-pass")))
    m.add("linuxbridge", "gre", "isolation.broadcast", v.na("kernel lacks gretap", built=False))
    text = m.markdown()
    assert "| netns linuxbridge/vxlan | netns ovs/vxlan |" in text and "linuxbridge/gre |" not in text
    assert "Fail 200 frames (expected Pass) [1]" in text
    assert "[1] netns ovs/vxlan, Vnet A does not see vnet B broadcast" in text and "red-2 200" in text
    assert "- netns linuxbridge/gre: kernel lacks gretap" in text
    assert "| — |" in text                       # unicast not measured on linuxbridge
    assert "Not measured in this run:" in text and "Deprovisioning" in text
    assert [c for c in m.to_dict()["cells"] if c["status"] == "Fail"][0]["expected"] == "Pass"


def test_matrix_write_and_unknown_row(tmp_path):
    m = Matrix(expect={})
    m.add("ovs", "flat", "rate.compliance", v.rate_compliance(rec("rate-limited")),
          rec("rate-limited"))
    js, md, page = m.write(tmp_path / "out")
    cell = json.loads(js.read_text())["cells"][0]
    assert cell["row"] == "rate.compliance" and cell["extra"]["burst_mbps"] > 0
    assert cell["measurement"]["samples_mbps"] and md.read_text().startswith("# vnetbench")
    with pytest.raises(KeyError):
        m.add("ovs", "flat", "nope", v.na("x"))


def test_expected_file_names_only_known_rows_and_statuses():
    known = {r.id for r in ROWS}
    for kind, rows in expected().items():
        assert set(rows) <= known, kind


def test_figures():
    assert v.Verdict(Status.PASS, 9.5432, "Mbit/s").figure == "9.54 Mbit/s"
    assert v.Verdict(Status.PASS, 3177.02, "Mbit/s").figure == "3177 Mbit/s"
    assert v.Verdict(Status.PASS, 0, "frames").figure == "0 frames"
    assert v.na("x").figure == ""


def test_no_leak_kind_that_drops_unknown_unicast_passes_on_the_control():
    m = rec("unknown-unicast-ovn-dropped")
    assert set(m["own_vnet"].values()) == {0}
    ok = v.no_leak(m)
    assert ok.status is Status.PASS and "the kind drops it" in ok.detail
    no_control = {**m, "control": {**m["control"], "own_vnet": {"blue-2": 0, "blue-3": 0}}}
    assert v.no_leak(no_control).status is Status.ERROR


def test_no_leak_openflow_broadcast_leak_recorded():
    got = v.no_leak(rec("broadcast-openflow-leak"))
    assert got.status is Status.FAIL and got.value == 600


# -- fault tolerance and migration ------------------------------------------------------

def test_traffic_continues_recorded():
    ok = v.traffic_continues(rec("ping-kill-openflow"))      # flows stay with the controller killed
    assert ok.status is Status.PASS and ok.value == 0
    stopped = v.traffic_continues(rec("deprovision-pass"))   # a stream that really stopped
    assert stopped.status is Status.FAIL_CLOSE and "traffic stopped" in stopped.detail
    paused = v.traffic_continues(rec("vswitch-restart-ovn"))  # came back after a 1 s outage
    assert paused.status is Status.FAIL and paused.value > v.MAX_PAUSE_MS


def test_traffic_recovers_recorded():
    ok = v.traffic_recovers(rec("vswitch-restart-ovn"))
    assert ok.status is Status.PASS and ok.value == pytest.approx(1075, abs=1)
    gone = v.traffic_recovers(rec("deprovision-pass"))
    assert gone.status is Status.FAIL and "did not come back" in gone.detail
    m = rec("vswitch-restart-ovn")
    early = {**m, "probes": [p for p in m["probes"] if p[1] >= m["t_start_ns"]]}
    assert v.traffic_recovers(early).status is Status.ERROR


def test_outage_counts_the_longest_run_after_the_change():
    m = rec("vswitch-restart-ovn")
    o = v.outage(m)
    step = m["sender"]["interval_ns"] / 1e6
    assert o["outage_ms"] % step == pytest.approx(0, abs=1e-6) and o["tail_share"] == 1.0


def test_fail_open_or_close_recorded():
    assert v.fail_open_close(rec("new-ping-openflow")).status is Status.FAIL_CLOSE
    assert v.fail_open_close(rec("new-ping-ovn")).status is Status.FAIL_OPEN


def test_idle_timeout_recorded():
    got = v.idle_timeout(rec("idle-timeout-openflow"))
    assert got.status is Status.PASS and got.value == 5 and got.extra == {"survived_s": 4, "expired_s": 6}
    none = v.idle_timeout(rec("idle-timeout-ovn"))
    assert none.status is Status.NA and "survived 8 s" in none.detail


def test_new_session_recorded_and_refused():
    assert v.new_session(rec("iperf-stop-openflow")).status is Status.PASS
    refused = v.new_session({"mbps": 0.0, "error": "iperf3: unable to connect to server"})
    assert refused.status is Status.FAIL_CLOSE and "unable to connect" in refused.detail


def test_migrations_recorded():
    cold = v.reachable(rec("migration-cold-openflow"))
    assert cold.status is Status.FAIL and cold.unit == "ms"
    live = v.live_migration(rec("migration-live-ovs"))
    assert live.status is Status.PASS and live.value == 430
    cut = {**rec("migration-live-ovs"), "ping_after": {"sent": 5, "received": 0}}
    assert v.live_migration(cut).status is Status.FAIL


def test_per_kind_modules_take_vxlan_or_the_first_network():
    from vnetbench.functional.plugin import one_network_per_kind
    from vnetbench.testbed.model import NetType as T, VSwitchKind as K
    cs = [(K.OVS, T.FLAT), (K.OVS, T.VXLAN), (K.OVS, T.GRE), (K.LINUXBRIDGE, T.FLAT)]
    assert one_network_per_kind(cs) == [(K.OVS, T.VXLAN), (K.LINUXBRIDGE, T.FLAT)]


def test_survives_instance_loss_recorded():
    m = rec("multi-controller-openflow")
    ok = v.survives_instance_loss(m)
    assert ok.status is Status.PASS and "osken-0 killed" in ok.detail
    no_new = {**m, "new_ping": {"sent": 5, "received": 0}}
    assert v.survives_instance_loss(no_new).status is Status.FAIL


def test_a_measured_na_keeps_its_column_an_unbuildable_one_does_not():
    m = Matrix(expect={})
    m.add("linuxbridge", "vxlan", "feature.proxy-arp", v.na("the owner answered itself"))
    m.add("linuxbridge", "gre", "feature.proxy-arp", v.na("kernel lacks gretap", built=False))
    assert m.columns() == [("linuxbridge", "vxlan")]
    assert m.not_run() == {("linuxbridge", "gre"): "kernel lacks gretap"}


def test_proxy_arp_present_absent_and_void():
    base = {"target": "198.19.1.2", "replies": 3, "reply_macs": ["02:76:6e:00:01:00"],
            "owner_mac": "02:76:6e:00:01:00"}
    assert v.proxy_arp({**base, "requests_at_owner": 0}).status is Status.PASS
    assert v.proxy_arp({**base, "requests_at_owner": 3}).status is Status.NA
    assert v.proxy_arp({**base, "replies": 0, "requests_at_owner": 0}).status is Status.ERROR


def test_comparison_report_embeds_a_functional_matrix(tmp_path):
    import shutil
    from vnetbench.report import write
    run_dir = tmp_path / "comparison"
    run_dir.mkdir()
    shutil.copy(DATA.parent / "report" / "records.jsonl", run_dir / "records.jsonl")
    m = Matrix(expect={"ovs-openflow": {"isolation.broadcast": Status.PASS}})
    m.add("ovs-openflow", "vxlan", "isolation.broadcast", v.no_leak(rec("broadcast-openflow-leak")))
    m.write(run_dir / "functional")
    page = (run_dir / "functional" / "matrix.html").read_text()
    assert "<td class='fail'>Fail 600 frames (expected Pass) [1]</td>" in page
    out = write.report([run_dir], tmp_path / "out", ["html"])
    html = out[0].read_text()
    assert "id='functional'>Functional matrix" in html and "Fail 600 frames" in html
    back = Matrix.from_dict(json.loads((run_dir / "functional" / "matrix.json").read_text()))
    assert back.markdown() == m.markdown()


# -- value-added features --------------------------------------------------------------

def test_encapsulation_recorded_and_a_different_one_fails():
    m = rec("encap-ovn-geneve")
    assert (m["expected"], v.encapsulation(m).figure) == ("Geneve", "Geneve 58 B")
    assert v.encapsulation(m).status is Status.PASS
    assert v.encapsulation({**m, "expected": "VXLAN"}).status is Status.FAIL
    flat = rec("encap-linuxbridge-flat")
    assert v.encapsulation(flat).status is Status.PASS and "own frame" in v.encapsulation(flat).detail
    assert v.encapsulation({**flat, "expected": "VXLAN"}).status is Status.FAIL


def test_encapsulation_mixed_or_unseen():
    m = rec("encap-ovs-vxlan")
    mixed = {**m, "encaps": {"VXLAN": 20, "none": 10}, "overhead": {"VXLAN": 50, "none": 0}}
    assert v.encapsulation(mixed).status is Status.FAIL          # some probes left bare
    assert v.encapsulation({**m, "encaps": {}}).status is Status.ERROR


def test_wire_expected_per_type_and_l3_kind():
    assert v.wire_expected("ovs", "gre") == "GRE" and v.wire_expected("vrouter", "gre") == "MPLSoGRE"
    assert v.wire_expected("ovn", "flat") == "none"


def test_dhcp_absent_present_and_void():
    from vnetbench.traffic import dhcp
    m = rec("dhcp-ovn-absent")
    assert dhcp.parse_replies("\n".join(m["reply_lines"])) == m["replies"][:len(m["reply_lines"])]
    assert v.dhcp(m).status is Status.NA
    ctl = m["control"]["mac"]
    served = {**m, "vm_macs": [x for x in m["vm_macs"] if x != ctl]}   # a non-VM MAC answered
    assert v.dhcp(served).status is Status.PASS
    assert v.dhcp({**m, "replies": []}).status is Status.ERROR


def test_bonding_absent_present_and_void():
    m = rec("bonding-openflow-absent")
    assert v.bonding(m).status is Status.NA and "one link" in v.bonding(m).detail
    (up,) = [k for k, b in m["tx_bytes"].items() if b > m["bytes"] / 2]
    split = {**m, "tx_bytes": {up: m["bytes"] // 2, "up-b": m["bytes"] // 2, "mg": 100}}
    assert v.bonding(split).status is Status.PASS and v.bonding(split).value == 2
    assert v.bonding({**m, "tx_bytes": {"mg": 100}}).status is Status.ERROR


def test_an_ovn_standby_that_takes_over_passes_and_one_that_does_not_fails():
    """OVN's instances are ovn-northd: a new pair pings without any (the flows are in the
    SB already), so the verdict also needs the NB change carried through after the kill."""
    m = rec("multi-controller-ovn")
    ok = v.survives_instance_loss(m)
    assert ok.status is Status.PASS and "carried through 13 ms after the kill, by northd-2" in ok.detail
    none = {**m, "sync": {"ok": False, "detail": "no ovn-northd carried an NB change into the SB "
                                               "database within 10 s"}}
    lost = v.survives_instance_loss(none)
    assert lost.status is Status.FAIL and "no new configuration change" in lost.detail
    assert lost.value == ok.value             # the data plane went on either way


def test_deprovision_on_a_cloud_the_sender_kept_trying_after_its_nic_went():
    """Recorded on the all-in-one cloud: the vnet's ports deleted through Neutron (2.7 s),
    the guest's NIC unplugged, its sends failing (ENETUNREACH) until its window ended.
    Its last attempt (end_ns), not its last sent probe, is how long it was watched; a
    sender that stopped trying as early would leave the verdict blind (Error)."""
    m = rec("deprovision-cloud")
    got = v.deprovision(m)
    assert got.status is Status.PASS and got.label == "≤", got
    assert m["sender"]["errors"] > 0 and m["new_ping"]["received"] == 0
    blind = {**m, "sender": {**m["sender"], "end_ns": m["sender"]["last_ns"]}}
    assert v.deprovision(blind).status is Status.ERROR
