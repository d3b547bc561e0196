"""TCP MSS sweep points mapped honestly onto a path, and their check on the wire with tcpdump.

What was verified on Linux 6.x with iperf 3.12 between two namespaces (tests/data/tcpdump/):

* ``iperf3 -M N`` sets TCP_MAXSEG = N on the data connection. N < 88 fails with EINVAL
  (68 and 87 tried); 88 works. N above the path's limit (MTU - 40) is accepted silently and the
  kernel advertises the path's limit instead: -M 1468 on MTU 1450 puts ``mss 1410`` in the SYN.
* The SYN / SYN-ACK MSS option is N; each full data segment carries N - 12 bytes of payload,
  because Linux negotiates TCP timestamps (a 12-byte option in every segment): -M 1000 -> 988,
  -M 88 -> 76, MTU 1450 without -M -> 1398. So the IP packet on the wire is N + 40 bytes.
* The control connection (same port) keeps the path MSS (1460 on MTU 1500), so a capture
  shows two handshakes; the data connection's is the one with the smaller MSS.
* With TSO/GSO on (the veth default), tcpdump at the sender sees pre-segmentation super-packets
  (``length 65208`` = 66 x 988 for -M 1000): segment sizes can only be read on the wire with
  ``offload_command(iface)`` applied on both veth ends (tso, gso, gro off).
"""

from __future__ import annotations

import re

SEED_MSS = (68, 1468, 8908)   # the seed's sweep points
LINUX_MIN_MSS = 88            # TCP_MIN_MSS: setsockopt(TCP_MAXSEG) below it is EINVAL
IPV4_TCP_HEADERS = 40         # IPv4 20 + TCP 20, no options
TCP_TIMESTAMPS = 12           # the timestamp option as Linux pads it (NOP NOP TS)


def plan_mss(nominal: int, path_mtu: int) -> dict:
    """The MSS to request (``used``) for a nominal sweep point on a path of ``path_mtu`` (IPv4).

    ``reason`` says why ``used`` differs from ``nominal`` (None when it doesn't);
    ``wire_payload`` is the payload of a full data segment with timestamps (used - 12).
    """
    ceiling = path_mtu - IPV4_TCP_HEADERS
    if ceiling < LINUX_MIN_MSS:
        raise ValueError(f"path MTU {path_mtu} is too small for TCP over IPv4 "
                         f"(needs >= {LINUX_MIN_MSS + IPV4_TCP_HEADERS})")
    if nominal < 1:
        raise ValueError(f"MSS must be positive, not {nominal}")
    if nominal < LINUX_MIN_MSS:
        used, reason = LINUX_MIN_MSS, (f"Linux refuses TCP_MAXSEG below {LINUX_MIN_MSS}; "
                                       f"{nominal} needs MSS clamping on the path")
    elif nominal > ceiling:
        used, reason = ceiling, (f"path MTU {path_mtu} allows at most {ceiling} "
                                 f"(IPv4 20 + TCP 20); the kernel would clamp {nominal} silently")
    else:
        used, reason = nominal, None
    return {"nominal": nominal, "used": used, "reason": reason,
            "wire_payload": used - TCP_TIMESTAMPS}


def plan_sweep(path_mtu: int, nominals=SEED_MSS) -> list[dict]:
    """``plan_mss`` for each point; points that clamp to the same ``used`` are all kept."""
    return [plan_mss(n, path_mtu) for n in nominals]


# -- on-wire verification: tcpdump ------------------------------------------------

def capture_command(iface: str, port: int, count: int, *, syn_only: bool = False,
                    snaplen: int = 128) -> list[str]:
    """tcpdump of ``count`` TCP packets to/from ``port``: headers only, line-buffered, verbose.

    ``syn_only`` keeps SYN and SYN-ACK (the MSS options); otherwise data segments are
    captured too, for ``parse_segment_sizes`` (turn offloads off first, see ``offload_command``).
    """
    flt = f"tcp port {port}" + (" and tcp[tcpflags] & tcp-syn != 0" if syn_only else "")
    return ["tcpdump", "-i", iface, "-nn", "-l", "-v", "-s", str(snaplen), "-c", str(count), flt]


def offload_command(iface: str, on: bool = False) -> list[str]:
    """ethtool argv switching TSO/GSO/GRO so tcpdump sees real segments, not super-packets."""
    state = "on" if on else "off"
    return ["ethtool", "-K", iface, "tso", state, "gso", state, "gro", state]


_TCP = re.compile(r"(?P<src>\S+)\.(?P<sport>\d+) > (?P<dst>\S+)\.(?P<dport>\d+): "
                  r"Flags \[(?P<flags>[^\]]*)\](?P<rest>.*)")
_MSS = re.compile(r"options \[[^\]]*\bmss (\d+)")
_LEN = re.compile(r"\blength (\d+)")


def parse_segments(text: str) -> list[dict]:
    """One dict per TCP segment line of ``tcpdump -nn`` output (with or without -v):
    src, sport, dst, dport, flags, mss (SYN option or None), timestamps (bool), length (payload)."""
    out = []
    for line in text.splitlines():
        m = _TCP.search(line)
        if not m:
            continue
        rest = m["rest"]
        lengths = _LEN.findall(rest)
        mss = _MSS.search(rest)
        out.append({"src": m["src"], "sport": int(m["sport"]), "dst": m["dst"],
                    "dport": int(m["dport"]), "flags": m["flags"],
                    "mss": int(mss.group(1)) if mss else None,
                    "timestamps": "TS val" in rest,
                    "length": int(lengths[-1]) if lengths else 0})
    return out


def parse_syn_mss(text: str) -> list[int]:
    """MSS option values of the SYN and SYN-ACK segments, in capture order."""
    return [s["mss"] for s in parse_segments(text) if "S" in s["flags"] and s["mss"] is not None]


def parse_segment_sizes(text: str, dport: int | None = None) -> list[int]:
    """TCP payload lengths of the data segments (length > 0), optionally only those to ``dport``."""
    return [s["length"] for s in parse_segments(text)
            if s["length"] > 0 and (dport is None or s["dport"] == dport)]


def _conn(s: dict) -> frozenset:
    return frozenset({(s["src"], s["sport"]), (s["dst"], s["dport"])})


def wire_check(used: int, text: str) -> dict:
    """Compare a planned MSS with a capture of the test (handshakes, and data if captured).

    The data connections are those whose handshake carries the smallest MSS (the control
    connection keeps the path MSS); only their segments count. ``mss_on_wire`` is that MSS;
    ``timestamps`` whether their SYN-ACK carried TS (then ``expected_payload`` = used - 12);
    ``super_packets`` means payloads above the MSS were seen, i.e. the capture point is before
    TSO/GSO and the sizes prove nothing. ``mss_ok`` / ``payload_ok`` are None when the capture
    holds no handshake / no data segment of a data connection; ``ok`` needs both True.
    """
    segs = parse_segments(text)
    syns = [s for s in segs if "S" in s["flags"] and s["mss"] is not None]
    mss_on_wire = min((s["mss"] for s in syns), default=None)
    data = {_conn(s) for s in syns if s["mss"] == mss_on_wire}
    ts = any(s["timestamps"] for s in syns if _conn(s) in data and "." in s["flags"])
    sizes = [s["length"] for s in segs if s["length"] > 0 and _conn(s) in data]
    max_payload = max(sizes, default=None)
    expected = used - (TCP_TIMESTAMPS if ts else 0)
    super_packets = max_payload is not None and max_payload > mss_on_wire
    mss_ok = None if mss_on_wire is None else mss_on_wire == used
    payload_ok = None if max_payload is None else (max_payload == expected and not super_packets)
    return {"used": used, "syn_mss": [s["mss"] for s in syns], "mss_on_wire": mss_on_wire,
            "timestamps": ts, "expected_payload": expected, "max_payload": max_payload,
            "super_packets": super_packets, "mss_ok": mss_ok, "payload_ok": payload_ok,
            "ok": mss_ok is True and payload_ok is True}
