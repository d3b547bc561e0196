"""tcpdump of the suite's UDP probes on a VM's NIC, and the frames it saw.

Promiscuous (tcpdump's default): a VM's capture sees frames addressed to any MAC,
so a frame leaked into the wrong vnet is seen even when the VM's kernel would
drop it. Frames are counted from the capture, never inferred from missing replies.
"""

from __future__ import annotations

import re

# 13:36:50.064401 02:76:6e:00:00:00 > ff:ff:ff:ff:ff:ff, ethertype IPv4 (0x0800), length 62:
#   198.19.1.1.52651 > 198.19.1.255.40001: UDP, length 20
_LINE = re.compile(r"^\S+ (?P<src_mac>[0-9a-f:]{17}) > (?P<dst_mac>[0-9a-f:]{17}), ethertype IPv4 "
                   r"\(0x0800\), length \d+: (?P<src>[\d.]+)\.(?P<sport>\d+) > "
                   r"(?P<dst>[\d.]+)\.(?P<dport>\d+): UDP")


def command(iface: str, port: int) -> list[str]:
    """Link-level headers (-e), numeric (-nn), line-buffered (-l): UDP to ``port`` only."""
    return ["tcpdump", "-i", iface, "-e", "-nn", "-l", f"udp dst port {port}"]


def parse(text: str) -> list[dict]:
    """One dict per captured UDP frame: src_mac, dst_mac, src, dst, dport."""
    frames = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            frames.append({"src_mac": m["src_mac"], "dst_mac": m["dst_mac"], "src": m["src"],
                           "dst": m["dst"], "dport": int(m["dport"])})
    return frames


def arp_command(iface: str) -> list[str]:
    """ARP frames only, link-level headers, numeric, line-buffered."""
    return ["tcpdump", "-i", iface, "-e", "-nn", "-l", "arp"]


def arp_requests(text: str, target_ip: str) -> int:
    """ARP requests for ``target_ip`` in ``arp_command`` output."""
    return sum(f"Request who-has {target_ip} " in line for line in text.splitlines())
