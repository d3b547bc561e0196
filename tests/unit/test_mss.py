"""MSS sweep planning and the tcpdump on-wire check against recorded captures."""

from pathlib import Path

import pytest

from vnetbench.traffic import mss

DATA = Path(__file__).resolve().parents[1] / "data" / "tcpdump"


def cap(name: str) -> str:
    return (DATA / name).read_text()


# -- plan --------------------------------------------------------------------------

def test_plan_below_linux_minimum_is_raised_to_88():
    p = mss.plan_mss(68, 1500)
    assert (p["nominal"], p["used"], p["wire_payload"]) == (68, 88, 76)
    assert "Linux refuses TCP_MAXSEG below 88" in p["reason"]


@pytest.mark.parametrize("nominal, mtu, used", [(1468, 1500, 1460), (1468, 1450, 1410),
                                                (8908, 1500, 1460), (8908, 1450, 1410)])
def test_plan_above_path_is_clamped_to_mtu_minus_40(nominal, mtu, used):
    p = mss.plan_mss(nominal, mtu)
    assert p["used"] == used and p["wire_payload"] == used - 12
    assert f"path MTU {mtu} allows at most {used}" in p["reason"]


@pytest.mark.parametrize("nominal, mtu", [(88, 1500), (1460, 1500), (1410, 1450), (1468, 9000),
                                          (8908, 9000), (8908, 8948)])
def test_plan_feasible_is_unchanged_without_reason(nominal, mtu):
    assert mss.plan_mss(nominal, mtu) == {"nominal": nominal, "used": nominal, "reason": None,
                                          "wire_payload": nominal - 12}


def test_plan_rejects_impossible_inputs():
    with pytest.raises(ValueError, match="too small"):
        mss.plan_mss(1000, 127)
    with pytest.raises(ValueError, match="positive"):
        mss.plan_mss(0, 1500)


def test_plan_sweep_of_the_seed_points_on_a_vxlan_guest():
    assert [p["used"] for p in mss.plan_sweep(1450)] == [88, 1410, 1410]
    assert [p["used"] for p in mss.plan_sweep(9000)] == [88, 1468, 8908]
    assert [p["nominal"] for p in mss.plan_sweep(1500)] == list(mss.SEED_MSS)


# -- argv --------------------------------------------------------------------------

def test_capture_command_data_and_syn_only():
    assert mss.capture_command("eth0", 5201, 60) == [
        "tcpdump", "-i", "eth0", "-nn", "-l", "-v", "-s", "128", "-c", "60", "tcp port 5201"]
    assert mss.capture_command("eth0", 5201, 4, syn_only=True)[-1] == \
        "tcp port 5201 and tcp[tcpflags] & tcp-syn != 0"


def test_offload_command():
    assert mss.offload_command("veth0") == ["ethtool", "-K", "veth0", "tso", "off", "gso", "off",
                                            "gro", "off"]
    assert mss.offload_command("veth0", on=True)[3:] == ["tso", "on", "gso", "on", "gro", "on"]


# -- parse -------------------------------------------------------------------------

def test_syn_mss_control_then_data_connection():
    # control connection keeps the path MSS, the -M 1000 data connection carries 1000 both ways
    assert mss.parse_syn_mss(cap("mss1000-syn.txt")) == [1460, 1460, 1000, 1000]


def test_syn_mss_above_path_is_clamped_by_the_kernel():
    assert mss.parse_syn_mss(cap("mss1468-mtu1450-syn.txt")) == [1410] * 4


def test_segment_sizes_offloads_off_are_mss_minus_timestamps():
    text = cap("mss1000-offload-off.txt")
    sizes = mss.parse_segment_sizes(text)
    assert max(sizes) == 988 and sizes.count(988) == 24
    assert 0 not in sizes
    assert set(mss.parse_segment_sizes(text, dport=5201)) >= {988, 37}


def test_segment_sizes_offloads_on_show_gso_super_packets():
    sizes = mss.parse_segment_sizes(cap("mss1000-offload-on.txt"))
    assert max(sizes) == 65208 == 66 * 988


def test_parse_segments_fields_and_one_line_format():
    one_line = ("04:39:05.055640 IP 198.18.99.1.48168 > 198.18.99.2.5201: Flags [S], seq 1, "
                "win 65000, options [mss 1000,sackOK,TS val 5 ecr 0,nop,wscale 10], length 0\n"
                "04:39:05.06 IP 198.18.99.1.48168 > 198.18.99.2.5201: Flags [P.], seq 1:989, "
                "ack 1, win 64, options [nop,nop,TS val 6 ecr 7], length 988\n")
    segs = mss.parse_segments(one_line)
    assert segs[0] == {"src": "198.18.99.1", "sport": 48168, "dst": "198.18.99.2", "dport": 5201,
                       "flags": "S", "mss": 1000, "timestamps": True, "length": 0}
    assert (segs[1]["flags"], segs[1]["mss"], segs[1]["length"]) == ("P.", None, 988)
    # -v puts the IP header (with the IP total length) on its own line: not a segment
    verbose = mss.parse_segments(cap("mss1000-syn.txt"))
    assert len(verbose) == 4 and all(s["length"] == 0 for s in verbose)


def test_parse_ignores_other_text():
    assert mss.parse_segments("tcpdump: listening on eth0\n4 packets captured\n") == []


# -- wire check ----------------------------------------------------------------------

def test_wire_check_offloads_off_verifies_mss_and_payload():
    r = mss.wire_check(1000, cap("mss1000-offload-off.txt"))
    assert (r["mss_on_wire"], r["timestamps"], r["expected_payload"], r["max_payload"]) == \
        (1000, True, 988, 988)
    assert (r["mss_ok"], r["payload_ok"], r["super_packets"], r["ok"]) == (True, True, False, True)


def test_wire_check_minimum_mss_ignores_the_control_connection():
    r = mss.wire_check(88, cap("mss88-mtu1450.txt"))   # control conn sends a 132 B message
    assert (r["syn_mss"], r["max_payload"], r["ok"]) == ([1410, 1410, 88, 88], 76, True)


def test_wire_check_flags_gso_super_packets():
    r = mss.wire_check(1000, cap("mss1000-offload-on.txt"))
    assert (r["mss_ok"], r["super_packets"], r["payload_ok"], r["ok"]) == (True, True, False, False)


def test_wire_check_syn_only_capture_cannot_verify_payload():
    r = mss.wire_check(1410, cap("mss1468-mtu1450-syn.txt"))
    assert (r["mss_ok"], r["payload_ok"], r["ok"]) == (True, None, False)


def test_wire_check_reports_a_clamped_request():
    # asked for 1468 on MTU 1450 (what iperf3 -M 1468 does): the wire says 1410
    r = mss.wire_check(1468, cap("mss1468-mtu1450-syn.txt"))
    assert (r["mss_on_wire"], r["mss_ok"]) == (1410, False)


def test_wire_check_empty_capture():
    r = mss.wire_check(1000, "")
    assert (r["mss_on_wire"], r["max_payload"], r["mss_ok"], r["payload_ok"], r["ok"]) == \
        (None, None, None, None, False)
