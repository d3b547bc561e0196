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


ARP_REPLY = bytes.fromhex("02766e00000002766e0000010806000108000604000202766e000001c613010202766e000000"
                          "c6130101000000000000000000000000000000000000")
ICMP_REPLY = bytes.fromhex("02766e00000002766e00000108004500002c0009000040010000c6130102c613010100000000"
                           "004d0005766e657462656e63682d626361737421")


def test_replies_are_answers_to_our_requests_only():
    """The sender-side definition (answered at the sender): the same bytes as the Go tool's test."""
    assert bc.is_reply(ARP_REPLY, "arp", "198.19.1.1", "198.19.1.2", 77)
    assert not bc.is_reply(ARP_REPLY, "arp", "198.19.1.1", "198.19.1.3", 77)
    own = bc.arp_frame(bytes.fromhex("02766e000000"), "198.19.1.1", "198.19.1.2", 77)
    assert not bc.is_reply(own, "arp", "198.19.1.1", "198.19.1.2", 77)
    assert bc.is_reply(ICMP_REPLY, "icmp", "198.19.1.1", "198.19.1.255", 77)
    assert not bc.is_reply(ICMP_REPLY, "icmp", "198.19.1.1", "198.19.1.255", 78)
    argv = bc.count_command(bc.CountParams("eth0", "arp", "198.19.1.1", "198.19.1.2", 2, 77, replies=True))
    assert argv[-1] == "--replies"


def test_both_definitions_are_rows_of_the_table():
    from vnetbench.report import table, text
    from vnetbench.results.load import Run
    from vnetbench.results.record import Result
    r = Result(test="broadcast", labels={"vswitch": "vrouter", "network": "gre", "placement": "same-host",
                                         "point": "arp", "params": {"kind": "arp"}},
               samples={"loss_pct": [100.0, 100.0, 100.0], "answered_loss_pct": [0.0, 0.0, 0.0]})
    model = table.build([Run("", None, (r,))])
    assert [(row.variable, row.metric) for row in model.rows] == [("arp", "answered_loss_pct"),
                                                                   ("arp delivered", "loss_pct")]
    plain = text.plain(model)
    assert "broadcast arp [answered_loss_pct]" in plain and "broadcast arp delivered [loss_pct]" in plain
    old = Result(test="broadcast", labels=r.labels, samples={"loss_pct": [3.0, 4.0]})   # one definition
    assert [(row.variable, row.metric) for row in table.build([Run("", None, (old,))]).rows] == \
        [("arp", "loss_pct")]
