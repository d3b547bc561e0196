"""Broadcast tool: argv builders, frames and the filter that counts only our frames."""

import socket

from vnetbench.traffic import broadcast as bc

MAC = bytes.fromhex("02766e000000")


def test_commands_roundtrip_through_the_tools_parser():
    p = bc.SendParams("eth0", "arp", "198.19.1.1", "198.19.1.2", 500, 2, 77)
    argv = bc.send_command(p)
    assert argv[1:4] == ["-m", "vnetbench.traffic.broadcast", "send"]
    assert argv[argv.index("--rate") + 1] == "500" and argv[argv.index("--marker") + 1] == "77"
    c = bc.count_command(bc.CountParams("eth0", "icmp", "198.19.1.1", "198.19.1.255", 3, 77))
    assert c[3] == "count" and "--rate" not in c


def test_arp_frame_is_counted_only_with_our_marker_and_addresses():
    f = bc.arp_frame(MAC, "198.19.1.1", "198.19.1.2", 77)
    assert len(f) == 60 and f[:6] == b"\xff" * 6
    assert bc.is_ours(f, "arp", "198.19.1.1", "198.19.1.2", 77)
    assert not bc.is_ours(f, "arp", "198.19.1.1", "198.19.1.2", 78)
    assert not bc.is_ours(f, "icmp", "198.19.1.1", "198.19.1.2", 77)


def test_icmp_frame_checksums_are_valid():
    f = bc.icmp_frame(MAC, "198.19.1.1", "198.19.1.255", 77, 5)
    ip, icmp = f[14:34], f[34:]
    assert bc._csum(ip) == 0 and bc._csum(icmp) == 0
    assert ip[16:20] == socket.inet_aton("198.19.1.255")
    assert bc.is_ours(f, "icmp", "198.19.1.1", "198.19.1.255", 77)


def test_parse_takes_the_last_json_line():
    assert bc.parse('{"ready": true}\n{"received": 12}\n') == {"received": 12}


def test_native_commands_run_the_go_tool_with_the_same_flags():
    """Guests have no Python: the same arguments go to vnetbench-flowgen's bcast modes."""
    p = bc.SendParams("eth0", "icmp", "198.19.1.1", "198.19.1.255", 500, 2, 77)
    py, go = bc.send_command(p), bc.send_command(p, native=True)
    assert go[0].endswith("vnetbench-flowgen") and go[1] == "bcast-send"
    assert go[2:] == py[4:]
    c = bc.CountParams("eth0", "icmp", "198.19.1.1", "198.19.1.255", 3, 77)
    assert bc.count_command(c, native=True)[1:2] == ["bcast-count"]
    assert bc.count_command(c, native=True)[2:] == bc.count_command(c)[4:]
