"""The vRouter agent's hand-encoded flow-setup messages (vnetbench.kinds.vrouter.ofwire)
are byte for byte what os-ken builds for the same decision, and its packet reader
finds the fields os-ken's packet library finds: for any 5-tuple (Hypothesis)."""

import ipaddress

from hypothesis import example, given, strategies as st
from os_ken.lib.packet import ethernet, icmp, ipv4, packet, tcp, udp
from os_ken.ofproto import ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

from vnetbench.kinds.vrouter import ofwire
from vnetbench.kinds.vrouter.logic import COOKIE_FLOW, IP, T_FLOW, T_ROUTE, Agent

ADDR = st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n)))
PORT = st.integers(0, 65535)
KEY = st.tuples(st.integers(1, 2**32), ADDR, ADDR, st.sampled_from([1, 6, 17, 47]),
                st.integers(0, 255), st.integers(0, 255)) | \
    st.tuples(st.integers(1, 2**32), ADDR, ADDR, st.sampled_from([6, 17]), PORT, PORT)


class _Dp:
    ofproto, ofproto_parser = ofp, parser


def _osken(msg, xid):
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


def _entries(key, allow):
    agent = Agent.__new__(Agent)
    agent.opts = {"flow_idle_timeout": 180}
    agent.learned, agent.ofports, agent.ifaces, agent.vnet_of = {}, {}, {}, {}   # no VM here
    agent.underlay_ip = None
    return agent.flow_entries(key, allow)


@given(KEY, st.booleans(), st.integers(0, 2**32 - 1))
def test_flow_entries_encode_as_os_ken_does(key, allow, xid):
    for f in _entries(key, allow):
        inst = [parser.OFPInstructionGotoTable(T_ROUTE)] if allow else []
        want = _osken(parser.OFPFlowMod(_Dp, table_id=f.table, priority=f.priority, cookie=f.cookie,
                                        idle_timeout=f.idle_timeout, match=parser.OFPMatch(**dict(f.match)),
                                        instructions=inst), xid)
        got = ofwire.flow_mod(xid, f.table, f.priority, f.cookie, f.idle_timeout, f.match,
                              T_ROUTE if allow else None)
        assert got == want
        assert f.table == T_FLOW and f.cookie == COOKIE_FLOW


@given(st.integers(1, 0xFFFFFF00), st.binary(max_size=1500), st.booleans(), st.integers(0, 2**32 - 1))
def test_a_held_packet_goes_out_as_os_ken_sends_it(in_port, data, to_port, xid):
    port = ofp.OFPP_IN_PORT if to_port else ofp.OFPP_TABLE
    want = _osken(parser.OFPPacketOut(_Dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=in_port,
                                      actions=[parser.OFPActionOutput(port)], data=data), xid)
    assert ofwire.packet_out(xid, in_port, data, port) == want


def _frame(src, dst, proto, a, b, payload):
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst="02:00:00:00:00:02", src="02:00:00:00:00:01", ethertype=IP))
    pkt.add_protocol(ipv4.ipv4(src=src, dst=dst, proto=proto))
    if proto == 6:
        pkt.add_protocol(tcp.tcp(src_port=a, dst_port=b))
    elif proto == 17:
        pkt.add_protocol(udp.udp(src_port=a, dst_port=b))
    elif proto == 1:
        pkt.add_protocol(icmp.icmp(type_=(0, 8)[a % 2], code=b % 256, data=icmp.echo()))
    pkt.add_protocol(payload)
    pkt.serialize()
    return bytes(pkt.data)


def _osken_fields(data):
    """os-ken's reading of the headers, layer by layer with each protocol's own parser: not
    packet.Packet, which goes on into the payload by port (TCP 179 is BGP, UDP 4789 VXLAN)
    and raises on a payload that is not that protocol's -- the reader under test stops at
    the ports, as a flow match does."""
    eth, _, rest = ethernet.ethernet.parser(data)
    if eth.ethertype != IP:
        return None
    ip, _, rest = ipv4.ipv4.parser(rest)
    out = {"ip_src": ip.src, "ip_dst": ip.dst, "ip_proto": ip.proto}
    if ip.proto in (6, 17):
        l4, _, _ = (tcp.tcp if ip.proto == 6 else udp.udp).parser(rest)
        out.update(l4_src=l4.src_port, l4_dst=l4.dst_port)
    elif ip.proto == 1:
        echo, _, _ = icmp.icmp.parser(rest)
        out.update(l4_src=echo.type, l4_dst=echo.code)
    return out


@given(ADDR, ADDR, st.sampled_from([1, 6, 17, 47]), PORT, PORT, st.binary(max_size=64))
@example("0.0.0.0", "0.0.0.0", 6, 0, 179, b"\x01")      # BGP's port, a payload no BGP parser takes
def test_the_packet_reader_finds_what_os_ken_finds(src, dst, proto, a, b, payload):
    data = _frame(src, dst, proto, a, b, payload)
    assert ofwire.packet_fields(data) == _osken_fields(data)


@given(st.binary(max_size=80))
def test_anything_not_ipv4_is_none_and_nothing_raises(data):
    got = ofwire.packet_fields(data)
    if len(data) < 34 or data[12:14] != b"\x08\x00":
        assert got is None
