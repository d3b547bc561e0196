"""UDP probe tool and the tcpdump capture parser (recorded output in tests/data/tcpdump/)."""

import select
import subprocess
import time
from pathlib import Path

import pytest

from vnetbench.traffic import capture, probe

DATA = Path(__file__).resolve().parents[1] / "data"


def test_capture_parses_broadcast_flood_and_unicast_frames():
    frames = capture.parse((DATA / "tcpdump" / "udp-probes-seen.txt").read_text())
    assert len(frames) == 9
    assert {f["dst_mac"] for f in frames} == {"ff:ff:ff:ff:ff:ff", "02:76:6e:ff:ff:fe",
                                              "02:76:6e:00:01:00"}
    assert frames[0] == {"src_mac": "02:76:6e:00:00:00", "dst_mac": "ff:ff:ff:ff:ff:ff",
                         "src": "198.19.1.1", "dst": "198.19.1.255", "dport": 40001}


def test_capture_ignores_banner_and_other_lines():
    assert capture.parse("listening on eth0, link-type EN10MB\n9 packets captured\n") == []
    assert capture.command("eth0", 4000)[-1] == "udp dst port 4000"


def test_probe_commands():
    s = probe.send_command(probe.SendParams("198.19.1.255", 4000, 5, 1.5, 7, broadcast=True))
    assert s[1:4] == ["-m", "vnetbench.traffic.probe", "send"] and s[-1] == "--broadcast"
    assert "--interval-ms" in s and s[s.index("--seconds") + 1] == "1.5"
    r = probe.recv_command(probe.RecvParams(4000, 2, 7))
    assert r[3] == "recv" and r[r.index("--marker") + 1] == "7"


def test_probe_parse_skips_the_ready_line():
    assert probe.parse('{"ready": true}\n{"received": 0, "probes": []}\n')["received"] == 0
    with pytest.raises(ValueError):
        probe.parse('{"ready": true}\n')


def test_probe_tool_over_loopback_keeps_order_and_clock():
    """The real tool, no root: 20 probes at 5 ms; send times precede arrival times on the
    one monotonic clock, and probes of another marker are ignored."""
    port = 47000 + int(time.time()) % 1000
    # the window counts from its own first probe: from the receiver's start (1.5 s) it also
    # held two senders' start-ups, which under load took longer (failed beside an AIO's up)
    recv = subprocess.Popen(probe.recv_command(probe.RecvParams(port, 1.0, 11, first_within=30)),
                            stdout=subprocess.PIPE, text=True)
    assert "ready" in recv.stdout.readline()
    other = probe.send_command(probe.SendParams("127.0.0.1", port, 5, 0.05, 12))
    subprocess.run(other, check=True, capture_output=True)
    sent = probe.parse(subprocess.run(probe.send_command(probe.SendParams(
        "127.0.0.1", port, 5, 0.1, 11)), check=True, capture_output=True, text=True).stdout)
    got = probe.parse(recv.communicate(timeout=10)[0])
    assert sent["sent"] == 20 and sent["interval_ns"] == 5_000_000
    assert got["received"] == 20 and [p[0] for p in got["probes"]] == list(range(20))
    assert all(p[1] <= p[2] for p in got["probes"])
    assert sent["first_ns"] == got["probes"][0][1] and sent["last_ns"] == got["probes"][-1][1]


def test_round_trip_over_loopback_counts_the_echoes_of_its_marker():
    """rtt -> echo, no root: 40 probes at 5 ms all come back; without an echo none do,
    and the whole run is one outage."""
    port = 48000 + int(time.time()) % 1000
    echo = subprocess.Popen(probe.echo_command(port, 5), stdout=subprocess.PIPE, text=True)
    try:         # once it listens (a fixed 0.3 s wait lost the first probes under load)
        assert select.select([echo.stdout], [], [], 30)[0] and '"ready"' in echo.stdout.readline()
        out = subprocess.run(probe.roundtrip_command(probe.RoundTripParams(
            "127.0.0.1", port, 5, 0.2, 21)), check=True, capture_output=True, text=True).stdout
    finally:
        echo.kill()
        echo.wait()
    res = probe.parse(out)
    assert res["sent"] == 40 and res["received"] == list(range(40)), res
    s = probe.summarize(res["sent"], res["received"], res["interval_ms"])
    assert (s["lost"], s["downtime_ms"], s["outages"]) == (0, 0.0, 0)
    dead = probe.parse(subprocess.run(probe.roundtrip_command(probe.RoundTripParams(
        "127.0.0.1", port + 1, 5, 0.1, 21)), check=True, capture_output=True, text=True).stdout)
    lost = probe.summarize(dead["sent"], dead["received"], dead["interval_ms"])
    assert lost["received"] == 0 and lost["downtime_ms"] == 100.0 and lost["outages"] == 1


def test_summarize_takes_the_longest_outage_and_a_lost_tail():
    s = probe.summarize(10, [0, 1, 4, 5, 6], 5.0)
    assert (s["lost"], s["outages"], s["downtime_ms"]) == (5, 2, 15.0)   # 7, 8, 9 lost at the end
    assert s["outage_start_s"] == 0.035 and s["loss_pct"] == 50.0
    with pytest.raises(ValueError, match="<= 10"):
        probe.RoundTripParams("198.19.1.2", 4000, 20, 1, 1)


def test_arp_requests_counted_for_their_target_only():
    text = ("14:01:02.1 02:76:6e:00:00:00 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: "
            "Request who-has 198.19.1.2 tell 198.19.1.1, length 28\n"
            "14:01:02.1 02:76:6e:00:01:00 > 02:76:6e:00:00:00, ethertype ARP (0x0806), length 42: "
            "Reply 198.19.1.2 is-at 02:76:6e:00:01:00, length 28\n"
            "14:01:03.1 02:76:6e:00:00:00 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: "
            "Request who-has 198.19.1.20 tell 198.19.1.1, length 28\n")
    assert capture.arp_requests(text, "198.19.1.2") == 1
    assert capture.arp_command("eth0")[-1] == "arp"
