"""The vRouter agent's flow-setup hot path on the wire: a new flow's packet-in read and its
two entries and the held packet written with ``struct``, byte for byte what os-ken
would build (``tests/unit/test_vrouter_ofwire.py`` compares them).

Why: the real agent is compiled; ours is Python, and at a thousand set-ups a second
half of its time went into os-ken's general message objects (keyword matches through
netaddr, per-field descriptors) for messages whose shape never changes. Everything
else the agent sends (its pipeline, routes, meters) still goes through os-ken. Pure:
bytes in, bytes out. OpenFlow 1.3 only, IPv4 only.
"""

from __future__ import annotations

import socket
import struct

OFP_VERSION = 0x04
OFPT_PACKET_OUT, OFPT_FLOW_MOD = 13, 14
OFPFC_ADD = 0
OFP_NO_BUFFER = 0xFFFFFFFF
OFPP_TABLE = 0xFFFFFFF9
OFPP_IN_PORT = 0xFFFFFFF8
OFPCML_MAX = 0xFFE5
OFPIT_GOTO_TABLE = 1
OFPMT_OXM = 1
#: OXM OpenFlow-basic fields the flow entries match: name -> (field id, struct format)
OXM = {"metadata": (2, "!Q"), "eth_type": (5, "!H"), "ip_proto": (10, "!B"),
       "ipv4_src": (11, "4s"), "ipv4_dst": (12, "4s"), "tcp_src": (13, "!H"), "tcp_dst": (14, "!H"),
       "udp_src": (15, "!H"), "udp_dst": (16, "!H"), "icmpv4_type": (19, "!B"), "icmpv4_code": (20, "!B")}
_HEADER = struct.Struct("!BBHI")
_FLOW_MOD = struct.Struct("!QQBBHHHIIIH2x")
_PACKET_OUT = struct.Struct("!IIH6x")
_OUTPUT = struct.Struct("!HHIH6x")
_GOTO = struct.Struct("!HHB3x")


def _oxm(name: str, value) -> bytes:
    field, fmt = OXM[name]
    body = socket.inet_aton(value) if fmt == "4s" else struct.pack(fmt, value)
    return struct.pack("!I", (0x8000 << 16) | (field << 9) | len(body)) + body


def match(fields) -> bytes:
    """An OXM match of FIELDS ((name, value) pairs; IPv4 addresses as text), fields in
    OXM id order (prerequisites first), padded to 8 bytes."""
    oxms = b"".join(_oxm(n, v) for n, v in sorted(fields, key=lambda f: OXM[f[0]][0]))
    length = 4 + len(oxms)
    return struct.pack("!HH", OFPMT_OXM, length) + oxms + b"\0" * (-length % 8)


def flow_mod(xid: int, table: int, priority: int, cookie: int, idle_timeout: int, fields,
             goto: int | None) -> bytes:
    """OFPT_FLOW_MOD add: FIELDS matched, then ``goto`` that table, or no instruction
    (drop)."""
    inst = _GOTO.pack(OFPIT_GOTO_TABLE, 8, goto) if goto is not None else b""
    body = (_FLOW_MOD.pack(cookie, 0, table, OFPFC_ADD, idle_timeout, 0, priority, OFP_NO_BUFFER,
                           0, 0, 0) + match(fields) + inst)
    return _HEADER.pack(OFP_VERSION, OFPT_FLOW_MOD, _HEADER.size + len(body), xid) + body


def packet_out(xid: int, in_port: int, data: bytes, port: int = OFPP_TABLE) -> bytes:
    """OFPT_PACKET_OUT of DATA (no buffer) with one output action to PORT."""
    action = _OUTPUT.pack(0, 16, port, OFPCML_MAX)
    body = _PACKET_OUT.pack(OFP_NO_BUFFER, in_port, len(action)) + action + data
    return _HEADER.pack(OFP_VERSION, OFPT_PACKET_OUT, _HEADER.size + len(body), xid) + body


def packet_fields(data: bytes) -> dict | None:
    """The 5-tuple fields of an Ethernet frame carrying IPv4 (None for anything else):
    ip_src, ip_dst, ip_proto, and l4_src/l4_dst (TCP and UDP ports; ICMP type and code).
    A fragment after the first carries no ports (as os-ken's parser, which reads what
    bytes are there, would misread them, nothing is read)."""
    if len(data) < 34 or data[12:14] != b"\x08\x00":
        return None
    ihl = (data[14] & 0x0F) * 4
    if ihl < 20 or len(data) < 14 + ihl:
        return None
    proto = data[23]
    fields = {"ip_src": socket.inet_ntoa(data[26:30]), "ip_dst": socket.inet_ntoa(data[30:34]),
              "ip_proto": proto}
    l4 = 14 + ihl
    later_fragment = struct.unpack_from("!H", data, 20)[0] & 0x1FFF
    if later_fragment:
        return fields
    if proto in (6, 17) and len(data) >= l4 + (20 if proto == 6 else 8):
        fields["l4_src"], fields["l4_dst"] = struct.unpack_from("!HH", data, l4)
    elif proto == 1 and len(data) >= l4 + 4:
        fields["l4_src"], fields["l4_dst"] = data[l4], data[l4 + 1]
    return fields


# -- bundles (the ONF extension for OpenFlow 1.3, which OVS implements) -----------------------

OFPT_EXPERIMENTER = 4
ONF_EXPERIMENTER_ID = 0x4F4E4600
ONF_ET_BUNDLE_CONTROL, ONF_ET_BUNDLE_ADD_MESSAGE = 2300, 2301
ONF_BCT_OPEN_REQUEST, ONF_BCT_COMMIT_REQUEST = 0, 4
ONF_BF_ATOMIC, ONF_BF_ORDERED = 1, 2


def _experimenter(xid: int, exp_type: int, body: bytes) -> bytes:
    return _HEADER.pack(OFP_VERSION, OFPT_EXPERIMENTER, _HEADER.size + 8 + len(body), xid) + \
        struct.pack("!II", ONF_EXPERIMENTER_ID, exp_type) + body


def bundle_control(xid: int, bundle_id: int, type_: int, flags: int) -> bytes:
    return _experimenter(xid, ONF_ET_BUNDLE_CONTROL, struct.pack("!IHH", bundle_id, type_, flags))


def bundle_add(xid: int, bundle_id: int, flags: int, message: bytes) -> bytes:
    """MESSAGE (an encoded flow mod) added to the bundle; its xid becomes the outer one,
    as the extension requires."""
    inner = message[:4] + struct.pack("!I", xid) + message[8:]
    return _experimenter(xid, ONF_ET_BUNDLE_ADD_MESSAGE, struct.pack("!I2xH", bundle_id, flags) + inner)
