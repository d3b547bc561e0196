"""The iperf3 executor against recorded iperf 3.12 -J outputs."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnetbench.traffic import iperf3
from vnetbench.traffic.iperf3 import ClientParams, ServerParams

DATA = Path(__file__).resolve().parents[1] / "data" / "iperf3"


def load(name: str) -> dict:
    return iperf3.parse((DATA / name).read_text())


# -- argv ---------------------------------------------------------------------

def test_server_command_one_off_json():
    assert iperf3.server_command(ServerParams(bind="198.18.99.2")) == \
        ["iperf3", "-s", "-B", "198.18.99.2", "-p", "5201", "-1", "-J"]
    assert iperf3.server_command(ServerParams("198.18.99.2", port=5300, one_off=False)) == \
        ["iperf3", "-s", "-B", "198.18.99.2", "-p", "5300", "-J"]


def test_client_command_tcp_defaults():
    argv = iperf3.client_command(ClientParams(dest="198.18.99.2", seconds=2))
    assert argv == ["iperf3", "-c", "198.18.99.2", "-p", "5201", "-t", "2", "-J"]


def test_client_command_tcp_all_options():
    p = ClientParams("198.18.99.2", 5202, 5, "tcp", mss=1000, parallel=2, bitrate_bps=10**9,
                     length=65536, omit_s=1, reverse=True)
    assert iperf3.client_command(p) == [
        "iperf3", "-c", "198.18.99.2", "-p", "5202", "-t", "5", "-b", "1000000000",
        "-l", "65536", "-M", "1000", "-P", "2", "-O", "1", "-R", "-J"]


def test_client_command_udp_unlimited_is_b0():
    argv = iperf3.client_command(ClientParams("198.18.99.2", seconds=2, protocol="udp", parallel=5))
    assert argv == ["iperf3", "-c", "198.18.99.2", "-p", "5201", "-t", "2", "-u", "-b", "0",
                    "-P", "5", "-J"]


def test_client_command_udp_rate_and_length():
    argv = iperf3.client_command(ClientParams("198.18.99.2", seconds=2, protocol="udp",
                                              bitrate_bps=500_000_000, length=64))
    assert argv[7:] == ["-u", "-b", "500000000", "-l", "64", "-J"]


def test_client_command_interval():
    argv = iperf3.client_command(ClientParams("198.18.99.2", seconds=2, interval_s=0.2,
                                              connect_timeout_ms=5000))
    assert argv[-5:] == ["-i", "0.2", "--connect-timeout", "5000", "-J"]
    with pytest.raises(ValueError, match="interval_s"):
        ClientParams("198.18.99.2", interval_s=0.05)


def test_client_command_without_json():
    assert "-J" not in iperf3.client_command(ClientParams("198.18.99.2", json=False))


@pytest.mark.parametrize("kwargs, match", [
    ({"protocol": "sctp"}, "protocol"),
    ({"seconds": 0}, "seconds"),
    ({"parallel": 0}, "parallel"),
    ({"omit_s": -1}, "omit_s"),
    ({"mss": 68}, "below 88"),
    ({"mss": 1000, "protocol": "udp"}, "TCP only"),
    ({"bitrate_bps": -1}, "bitrate_bps"),
    ({"length": 0}, "length"),
])
def test_client_params_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ClientParams("198.18.99.2", **kwargs)


def test_params_are_frozen():
    p = ClientParams("198.18.99.2")
    with pytest.raises(AttributeError):
        p.seconds = 3


# -- parse: TCP ------------------------------------------------------------------

def test_parse_tcp_single_stream_is_receiver_side():
    r = load("tcp-1.json")
    assert (r["protocol"], r["streams"], r["reverse"]) == ("tcp", 1, False)
    assert r["bits_per_second"] == pytest.approx(17890820074.653507)      # end.sum_received
    assert r["sent_bits_per_second"] == pytest.approx(17901527335.56263)  # end.sum_sent
    assert (r["bytes"], r["seconds"], r["retransmits"]) == (4473094144, 2.000174, 91)
    assert r["samples_gbps"] == pytest.approx([17.534785178, 18.268367324])
    assert r["samples_side"] == "sender"
    assert r["pmtu"] == 1500 and r["mss_requested"] is None
    assert r["cpu_host_pct"] == pytest.approx(31.543, abs=1e-3)
    assert r["cpu_remote_pct"] == pytest.approx(72.277, abs=1e-3)
    assert "packets" not in r


def test_parse_tcp_with_mss():
    r = load("tcp-mss1000.json")
    assert r["mss_requested"] == 1000
    assert r["bits_per_second"] == pytest.approx(13972374260.611237)
    assert r["retransmits"] == 231
    assert len(r["samples_gbps"]) == 2


def test_parse_tcp_mss_above_path_is_echoed_not_applied():
    r = load("tcp-mss1468-mtu1450.json")
    assert (r["mss_requested"], r["pmtu"]) == (1468, 1450)   # the wire carried mss 1410


def test_parse_tcp_parallel_sums_streams():
    r = load("tcp-p2.json")
    raw = json.loads((DATA / "tcp-p2.json").read_text())
    assert r["streams"] == 2
    per_stream = sum(s["receiver"]["bytes"] for s in raw["end"]["streams"])
    assert r["bytes"] == per_stream == 4189388424
    assert r["bits_per_second"] == pytest.approx(16728095519.789652)
    assert r["retransmits"] == 179
    assert r["samples_gbps"] == pytest.approx([20.697158718, 12.816757833])


def test_parse_tcp_omitted_intervals_are_left_out():
    r = load("tcp-omit1.json")
    raw = json.loads((DATA / "tcp-omit1.json").read_text())
    assert len(raw["intervals"]) == 3 and raw["intervals"][0]["sum"]["omitted"] is True
    assert r["samples_gbps"] == pytest.approx([13.367664601, 7.068564205])
    assert r["bytes"] == 2551709696


# -- parse: UDP ------------------------------------------------------------------

def test_parse_udp_rate_limited():
    r = load("udp-b500m.json")
    assert (r["protocol"], r["streams"]) == ("udp", 1)
    assert r["bits_per_second"] == pytest.approx(498617671.6151669)      # receiver
    assert r["sent_bits_per_second"] == pytest.approx(499825358.47011423)
    assert (r["packets"], r["lost_packets"], r["received_packets"]) == (86300, 204, 86096)
    assert r["bytes"] == 86096 * 1448 == 124667008
    assert r["lost_percent"] == pytest.approx(0.23638470451911936)
    assert r["jitter_ms"] == pytest.approx(0.0033484853195137883)
    assert r["pps"] == pytest.approx(86096 / 2.000202)
    assert r["samples_gbps"] == pytest.approx([0.499712878, 0.499937884])
    assert r["samples_pps"] == pytest.approx([43141 / 1.0000649690628052,
                                              43159 / 1.0000319480895996])
    assert r["pmtu"] is None and "retransmits" not in r


def test_parse_udp_parallel_unlimited_sums_streams():
    r = load("udp-p5-b0.json")
    assert r["streams"] == 5
    assert (r["packets"], r["lost_packets"]) == (318650, 126314)
    assert r["lost_percent"] == pytest.approx(39.64035775929703)
    assert r["bits_per_second"] == pytest.approx(1112814392.9347916)
    assert r["sent_bits_per_second"] > r["bits_per_second"]
    assert r["pps"] == pytest.approx((318650 - 126314) / 2.002149)
    assert r["jitter_ms"] == pytest.approx(0.31386457109603316)
    assert len(r["samples_gbps"]) == 2


# -- parse: errors ---------------------------------------------------------------

def test_parse_raises_iperf3_error_connection_refused():
    with pytest.raises(ValueError, match="iperf3: unable to connect to server: Connection refused"):
        load("error-refused.json")


def test_parse_raises_iperf3_error_mss_below_88():
    with pytest.raises(ValueError, match="unable to set TCP/SCTP MSS: Invalid argument"):
        load("error-mss68.json")


@pytest.mark.parametrize("text", ["", "iperf3: error - unable to connect", "[]", "{}"])
def test_parse_rejects_other_output(text):
    with pytest.raises(ValueError, match="not iperf3 JSON output"):
        iperf3.parse(text)


def test_parse_rejects_json_without_end_sums():
    raw = json.loads((DATA / "tcp-1.json").read_text())
    raw["end"] = {}
    with pytest.raises(ValueError, match="sum_received"):
        iperf3.parse(json.dumps(raw))


def test_a_udp_senders_output_carries_the_receivers_own_intervals():
    """--get-server-output (functional rate rows: the sender is the client, its own timer
    ends the flood): the receiver's per-second figures come from the server's JSON."""
    r = load("udp-b20m-server-output.json")
    assert r["samples_side"] == "sender" and r["protocol"] == "udp"
    assert r["receiver_samples_gbps"] and all(0.019 < g < 0.021 for g in r["receiver_samples_gbps"])
    assert 0.019 < r["bits_per_second"] / 1e9 < 0.021               # end.sum_received
    assert load("udp-b500m.json")["receiver_samples_gbps"] is None   # no server output: none


def _with_server_wait(seconds: float, mbps: float) -> str:
    """udp-b20m-server-output.json (a 2 s test) with one more server interval after the
    client's 2 s: the wait for a TEST_END that a full shaper queue dropped and TCP sent
    again ~1 s later, holding only that queue's drain."""
    d = json.loads((DATA / "udp-b20m-server-output.json").read_text())
    last = d["server_output_json"]["intervals"][-1]
    extra = json.loads(json.dumps(last))
    start = last["sum"]["end"]
    for part in [extra["sum"], *extra["streams"]]:
        part.update(start=start, end=start + seconds, seconds=seconds,
                    bits_per_second=mbps * 1e6, bytes=int(mbps * 1e6 * seconds / 8))
    d["server_output_json"]["intervals"].append(extra)
    return json.dumps(d)


@pytest.mark.parametrize("wait_s", [0.05, 0.95, 1.0, 1.3])
def test_the_servers_wait_for_test_end_is_not_a_sample(wait_s):
    """Only the client's -t seconds are samples: a whole interval of waiting for TEST_END
    (8.27 instead of 9.7 Mbit/s on a 10 Mbit/s limit, the mean of the steady seconds with
    that wait among them) is left out as a short one always was."""
    r = iperf3.parse(_with_server_wait(wait_s, 1.06))
    assert len(r["receiver_samples_gbps"]) == 2
    assert all(0.019 < g < 0.021 for g in r["receiver_samples_gbps"])


def test_a_recorded_resent_test_end_leaves_the_stream_s_seconds_only():
    """Recorded: behind a 10 Mbit/s shaper flooded at 20, TEST_END was tail-dropped and
    resent; the server's eighth interval (0.21 s, 5.2 Mbit/s: the queue's drain over the
    wait) is no sample, the client's 7 s are."""
    r = load("udp-shaped-test-end-resent.json")
    assert len(r["receiver_samples_gbps"]) == 7
    assert all(0.0095 < g < 0.0099 for g in r["receiver_samples_gbps"])


def test_server_output_is_asked_for_in_the_argv():
    argv = iperf3.client_command(iperf3.ClientParams(dest="198.18.0.2", protocol="udp",
                                                     bitrate_bps=20_000_000, server_output=True))
    assert argv[-2:] == ["--get-server-output", "-J"]


# -- the receiver's window: a near-zero receiver time never inflates a rate -----------

def _with_receiver_seconds(seconds: float) -> str:
    """udp-b500m.json (a 2 s test) with the receiver's time replaced, as iperf3 reported
    it once for a flow set up late under a dozen senders on 2 CPUs (6.5e18 pps)."""
    d = json.loads((DATA / "udp-b500m.json").read_text())
    d["end"]["sum_received"]["seconds"] = seconds
    return json.dumps(d)


@given(st.floats(min_value=0.0, max_value=4.0, allow_nan=False))
def test_udp_rates_never_exceed_the_received_amount_over_half_the_send_window(rx_s):
    r = iperf3.parse(_with_receiver_seconds(rx_s))
    sent_s = 2.000097
    assert r["receiver_seconds"] == rx_s
    assert r["pps"] <= 86096 / (iperf3.RECEIVER_WINDOW_FLOOR * sent_s) + 1e-6
    if rx_s < iperf3.RECEIVER_WINDOW_FLOOR * sent_s:      # implausible: the sender's window
        assert r["seconds"] == sent_s
        assert r["pps"] == pytest.approx(86096 / sent_s)
        assert r["bits_per_second"] == pytest.approx(124667008 * 8 / sent_s)
    else:                                                # the receiver's own, as iperf3 says
        assert r["seconds"] == rx_s
        assert r["bits_per_second"] == pytest.approx(498617671.6151669)
