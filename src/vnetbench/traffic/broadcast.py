"""Broadcast sender and counter: ARP requests or ICMP echo to the broadcast address
at a set rate from one VM, counted where they arrive in another VM -- or, with
``replies``, the answers to them counted back at the sender (ARP replies for the asked
address, echo replies carrying the marker): the two definitions of broadcast loss
(delivered to the peer; answered at the sender), which disagree on a proxy-ARP datapath.

The executor part (``*_command``, ``parse``) is pure. Running this module is the
tool itself (``python -m vnetbench.traffic.broadcast send|count ...``): raw
AF_PACKET frames, paced by a monotonic clock, one JSON line of results. Guests carry
no Python: there the same tool in Go runs (``vnetbench-flowgen bcast-send|bcast-count``,
tools/flowgen/bcast.go: the same frames, flags and JSON lines), chosen with
``native=True``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass

KINDS = ("arp", "icmp")
ETH_P_ALL, ETH_P_ARP, ETH_P_IP = 0x0003, 0x0806, 0x0800
BROADCAST_MAC = b"\xff" * 6


@dataclass(frozen=True)
class SendParams:
    iface: str
    kind: str                 # arp | icmp
    src_ip: str
    target_ip: str            # arp: the address asked for; icmp: the broadcast address
    rate_pps: int
    seconds: float
    marker: int               # ICMP id / ARP padding tag, tells our frames from others


@dataclass(frozen=True)
class CountParams:
    iface: str
    kind: str
    src_ip: str
    target_ip: str
    seconds: float
    marker: int
    replies: bool = False     # count the answers arriving at the sender (run it there)


def _tool(mode: str, native: bool) -> list[str]:
    if native:
        from vnetbench.traffic import flowgen
        return [flowgen.binary(), f"bcast-{mode}"]
    return [sys.executable, "-m", "vnetbench.traffic.broadcast", mode]


def send_command(p: SendParams, native: bool = False) -> list[str]:
    return [*_tool("send", native), "--iface", p.iface,
            "--kind", p.kind, "--src-ip", p.src_ip, "--target-ip", p.target_ip,
            "--rate", str(p.rate_pps), "--seconds", f"{p.seconds:g}", "--marker", str(p.marker)]


def count_command(p: CountParams, native: bool = False) -> list[str]:
    return [*_tool("count", native), "--iface", p.iface,
            "--kind", p.kind, "--src-ip", p.src_ip, "--target-ip", p.target_ip,
            "--seconds", f"{p.seconds:g}", "--marker", str(p.marker),
            *(["--replies"] if p.replies else [])]


def parse(text: str) -> dict:
    """The tool's JSON line: send -> sent, seconds, achieved_pps; count -> received."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON result line in broadcast tool output")


# -- the tool ---------------------------------------------------------------------

def _mac(iface):
    with open(f"/sys/class/net/{iface}/address") as f:
        return bytes.fromhex(f.read().strip().replace(":", ""))


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def arp_frame(src_mac, src_ip, target_ip, marker) -> bytes:
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 1, src_mac,
                      socket.inet_aton(src_ip), b"\0" * 6, socket.inet_aton(target_ip))
    pad = struct.pack("!I", marker).ljust(18, b"\0")          # to the 60-byte minimum
    return BROADCAST_MAC + src_mac + struct.pack("!H", ETH_P_ARP) + arp + pad


def icmp_frame(src_mac, src_ip, bcast_ip, marker, seq) -> bytes:
    icmp = struct.pack("!BBHHH", 8, 0, 0, marker & 0xFFFF, seq & 0xFFFF) + b"vnetbench-bcast!"
    icmp = icmp[:2] + struct.pack("!H", _csum(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), seq & 0xFFFF, 0, 64, 1, 0,
                     socket.inet_aton(src_ip), socket.inet_aton(bcast_ip))
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return BROADCAST_MAC + src_mac + struct.pack("!H", ETH_P_IP) + ip + icmp


def is_ours(frame: bytes, kind, src_ip, target_ip, marker) -> bool:
    if len(frame) < 42 or frame[:6] != BROADCAST_MAC:
        return False
    etype = struct.unpack("!H", frame[12:14])[0]
    if kind == "arp":
        return (etype == ETH_P_ARP and frame[20:22] == b"\0\1"
                and frame[28:32] == socket.inet_aton(src_ip)
                and frame[38:42] == socket.inet_aton(target_ip)
                and frame[42:46] == struct.pack("!I", marker))
    return (etype == ETH_P_IP and frame[23] == 1 and frame[30:34] == socket.inet_aton(target_ip)
            and frame[26:30] == socket.inet_aton(src_ip)
            and frame[34] == 8 and frame[38:40] == struct.pack("!H", marker & 0xFFFF))


def is_reply(frame: bytes, kind, src_ip, target_ip, marker) -> bool:
    """An answer to one of our requests, arriving at the sender SRC_IP: an ARP reply from
    TARGET_IP (whoever sent it: the peer or a proxy) or an echo reply with our marker."""
    if len(frame) < 42:
        return False
    etype = struct.unpack("!H", frame[12:14])[0]
    if kind == "arp":
        return (etype == ETH_P_ARP and frame[20:22] == b"\0\2"
                and frame[28:32] == socket.inet_aton(target_ip)
                and frame[38:42] == socket.inet_aton(src_ip))
    return (etype == ETH_P_IP and frame[23] == 1 and frame[30:34] == socket.inet_aton(src_ip)
            and frame[34] == 0 and frame[38:40] == struct.pack("!H", marker & 0xFFFF))


def send(a) -> dict:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    mac = _mac(a.iface)
    total = int(a.rate * a.seconds)
    start = time.monotonic()
    sent = errors = 0
    for i in range(total):
        due = start + i / a.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        frame = (arp_frame(mac, a.src_ip, a.target_ip, a.marker) if a.kind == "arp"
                 else icmp_frame(mac, a.src_ip, a.target_ip, a.marker, i))
        try:
            s.send(frame)
            sent += 1
        except OSError:
            errors += 1
    elapsed = time.monotonic() - start
    return {"sent": sent, "errors": errors, "seconds": elapsed,
            "achieved_pps": sent / elapsed if elapsed else 0.0}


def count(a) -> dict:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((a.iface, 0))
    s.settimeout(0.1)
    print(json.dumps({"ready": True}), flush=True)
    end = time.monotonic() + a.seconds
    received = 0
    match = is_reply if a.replies else is_ours
    while time.monotonic() < end:
        try:
            frame, addr = s.recvfrom(2048)
        except socket.timeout:
            continue
        if addr[2] != socket.PACKET_OUTGOING:
            received += match(frame, a.kind, a.src_ip, a.target_ip, a.marker)
    return {"received": received}


def main(argv=None):
    p = argparse.ArgumentParser(prog="vnetbench.traffic.broadcast")
    p.add_argument("mode", choices=["send", "count"])
    p.add_argument("--iface", required=True)
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--src-ip", required=True)
    p.add_argument("--target-ip", required=True)
    p.add_argument("--rate", type=float, default=100)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--marker", type=int, default=os.getpid())
    p.add_argument("--replies", action="store_true",
                   help="count: the answers to our requests, at the sender")
    a = p.parse_args(argv)
    ipaddress.IPv4Address(a.src_ip), ipaddress.IPv4Address(a.target_ip)
    print(json.dumps(send(a) if a.mode == "send" else count(a)), flush=True)


if __name__ == "__main__":
    main()
