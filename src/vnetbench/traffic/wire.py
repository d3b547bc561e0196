"""What a frame on the underlay carries: the encapsulation of a tenant packet, read from
the captured bytes (tcpdump ``-xx``), never from the configuration.

``classify(frame, needle)`` walks the headers from the outer Ethernet down to the
IPv4/UDP packet whose payload starts with ``needle`` (a probe's magic and marker) and
names what it crossed: VXLAN, Geneve, GRE, MPLSoGRE, MPLSoUDP, VLAN (802.1Q tag, no
tunnel) or none. The overhead is what the tunnel adds to the inner IP packet (outer
IP total length - inner IP total length), the figure of REFERENCE §3's table.
"""

from __future__ import annotations

import re
import struct

ETH_IPV4, ETH_VLAN, ETH_TEB, ETH_MPLS = 0x0800, 0x8100, 0x6558, 0x8847
UDP_TUNNELS = {4789: "VXLAN", 6081: "Geneve", 6635: "MPLSoUDP"}
_HEX = re.compile(r"^\s+0x[0-9a-f]+:\s+((?:[0-9a-f]{2,4}\s?)+)")


def command(iface: str, snaplen: int = 256) -> list[str]:
    """Every frame of ``iface`` with its link header in hex (-xx), numeric, line-buffered."""
    return ["tcpdump", "-i", iface, "-nn", "-xx", "-l", "-s", str(snaplen)]


def frames(text: str) -> list[bytes]:
    """The frames of ``command``'s output: a header line, then its hex lines."""
    out: list[bytearray] = []
    for line in text.splitlines():
        m = _HEX.match(line)
        if m and out:
            out[-1] += bytes.fromhex(m.group(1).replace(" ", ""))
        elif line.strip() and not line[0].isspace():
            out.append(bytearray())
    return [bytes(f) for f in out if f]


def classify(frame: bytes, needle: bytes) -> dict | None:
    """{encap, overhead, vlan} for a frame carrying the probe ``needle``; None otherwise."""
    try:
        return _walk(frame, needle)
    except (struct.error, IndexError):
        return None                                   # cut short by the snap length


def _walk(frame: bytes, needle: bytes) -> dict | None:
    (etype,) = struct.unpack_from("!H", frame, 12)
    pos, vlan, layers, outer_len = 14, None, [], None
    while True:
        if etype == ETH_VLAN and not layers and vlan is None:
            vlan = struct.unpack_from("!H", frame, pos)[0] & 0xFFF
            (etype,) = struct.unpack_from("!H", frame, pos + 2)
            pos += 4
        elif etype == ETH_MPLS:
            layers.append("MPLS")
            while not frame[pos + 2] & 1:             # bottom-of-stack bit
                pos += 4
            pos += 4
            etype = ETH_IPV4 if frame[pos] >> 4 == 4 else None
        elif etype == ETH_IPV4:
            ihl, proto = (frame[pos] & 0xF) * 4, frame[pos + 9]
            (total,) = struct.unpack_from("!H", frame, pos + 2)
            outer_len = total if outer_len is None else outer_len
            nxt = pos + ihl
            if proto == 17 and frame[nxt + 8:nxt + 8 + len(needle)] == needle:
                return {"encap": _name(layers, vlan), "overhead": outer_len - total, "vlan": vlan}
            if proto == 17 and (tunnel := UDP_TUNNELS.get(struct.unpack_from("!H", frame, nxt + 2)[0])):
                layers.append(tunnel)
                pos, etype = _after_udp_tunnel(frame, nxt + 8, tunnel)
            elif proto == 47:
                layers.append("GRE")
                pos, etype = _after_gre(frame, nxt)
            else:
                return None
        else:
            return None


def _after_udp_tunnel(frame: bytes, pos: int, tunnel: str) -> tuple[int, int]:
    if tunnel == "MPLSoUDP":
        return pos, ETH_MPLS
    hdr = 8 + (frame[pos] & 0x3F) * 4 if tunnel == "Geneve" else 8    # Geneve options
    return pos + hdr + 14, struct.unpack_from("!H", frame, pos + hdr + 12)[0]


def _after_gre(frame: bytes, pos: int) -> tuple[int, int]:
    flags, proto = struct.unpack_from("!HH", frame, pos)
    pos += 4 + 4 * sum(bool(flags & bit) for bit in (0x8000, 0x2000, 0x1000))   # C, K, S
    if proto == ETH_TEB:
        return pos + 14, struct.unpack_from("!H", frame, pos + 12)[0]
    return pos, proto


def _name(layers: list[str], vlan) -> str:
    tunnels = [x for x in layers if x != "MPLS"]
    if "MPLS" in layers and tunnels in (["GRE"], []):
        return "MPLSoGRE" if tunnels else "MPLS"
    if tunnels:
        return "o".join(reversed(tunnels))
    return "VLAN" if vlan is not None else "none"
