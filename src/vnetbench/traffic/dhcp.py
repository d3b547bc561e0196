"""DHCP as a probe: busybox's udhcpc asks, tcpdump on the client's NIC records every server
reply (who answered, by MAC), busybox's udhcpd in a VM is the control answer.

udhcpc runs with ``-s /bin/true``: it asks and quits, the VM's address is not touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# 10:01:02.000 02:76:6e:00:01:00 > ff:ff:ff:ff:ff:ff, ethertype IPv4 (0x0800), length 342:
#   198.19.1.2.67 > 255.255.255.255.68: BOOTP/DHCP, Reply, length 300
_REPLY = re.compile(r"^\S+ (?P<src_mac>[0-9a-f:]{17}) > (?P<dst_mac>[0-9a-f:]{17}), ethertype IPv4 "
                    r"\(0x0800\), length \d+: (?P<src>[\d.]+)\.67 > (?P<dst>[\d.]+)\.68: "
                    r"BOOTP/DHCP, Reply")


def client_command(iface: str, tries: int = 3, timeout_s: int = 1) -> list[str]:
    """Discover ``tries`` times, ``timeout_s`` apart, then exit (-n) or quit on a lease (-q)."""
    return ["busybox", "udhcpc", "-i", iface, "-f", "-q", "-n", "-t", str(tries),
            "-T", str(timeout_s), "-A", "1", "-s", "/bin/true"]


def capture_command(iface: str) -> list[str]:
    """Server replies (from port 67) with link-level headers, numeric, line-buffered."""
    return ["tcpdump", "-i", iface, "-e", "-nn", "-l", "udp src port 67"]


def parse_replies(text: str) -> list[dict]:
    """One dict per captured DHCP server reply: src_mac, dst_mac, src, dst."""
    return [m.groupdict() for m in map(_REPLY.match, text.splitlines()) if m]


@dataclass(frozen=True)
class ServerConf:
    iface: str
    start: str                      # first address of the pool
    end: str
    netmask: str
    lease_file: str
    pidfile: str


def server_conf(c: ServerConf) -> str:
    """udhcpd's configuration file."""
    return (f"start {c.start}\nend {c.end}\ninterface {c.iface}\nlease_file {c.lease_file}\n"
            f"pidfile {c.pidfile}\nopt subnet {c.netmask}\n")


def server_command(conf_path: str) -> list[str]:
    return ["busybox", "udhcpd", "-f", conf_path]
