"""The Floodlight v0.90 model's decisions (vnetbench.kinds.ovs_openflow.forwarding) against OpenFlow
messages recorded from a real run, parsed by os-ken, without a switch.

tests/data/openflow/two-vnets-vxlan.*: a two-host VXLAN testbed with vnets red and
blue on the same CIDR (198.19.1.0/24, blue VM "spy" at .200), recorded with the
controller's --record while rs-a pinged rs-b (same host), rc-a pinged rc-b (across
hosts) and rs-a pinged .200 (only in blue)."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from os_ken.ofproto import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser

from vnetbench.kinds.ovs_openflow.floodlight import parse_frame
from vnetbench.kinds.ovs_openflow.forwarding import (
    DeleteFlows, Drop, FlowMod, Forwarding, Frame, Link, Options, PacketOut, Topology,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "openflow"
DP = SimpleNamespace(ofproto=ofproto_v1_3, ofproto_parser=ofproto_v1_3_parser, id=0)


def _parse(buf: bytes):
    version, msg_type, msg_len, xid = ofproto_parser.header(buf)
    return ofproto_parser.msg(DP, version, msg_type, msg_len, xid, buf)


def replay():
    cfg = json.loads((DATA / "two-vnets-vxlan.config.json").read_text())
    fwd = Forwarding(Topology.from_config(cfg), Options(idle_timeout=30))
    steps = []
    for line in (DATA / "two-vnets-vxlan.packet-ins.jsonl").read_text().splitlines():
        rec = json.loads(line)
        msg = _parse(bytes.fromhex(rec["buf"]))
        if rec["type"] == "port_desc":
            fwd.switch_up(rec["dpid"], {p.port_no: p.name.decode() for p in msg.body})
            continue
        frame = parse_frame(msg.data)
        steps.append((rec["dpid"], msg.match["in_port"], frame,
                      fwd.packet_in(rec["dpid"], msg.match["in_port"], frame)))
    return cfg, fwd, steps


@pytest.fixture(scope="module")
def recorded():
    return replay()


def test_recording_is_real_openflow_13(recorded):
    cfg, fwd, steps = recorded
    assert sorted(fwd.port_name) == [1, 2] and len(steps) > 20
    assert any(f.eth_type == 0x0806 for _, _, f, _ in steps)            # ARP
    assert any(f.ip_dst == "198.19.1.4" for _, _, f, _ in steps)       # the cross-host echo


def test_broadcast_is_a_packet_out_flood_without_flow(recorded):
    cfg, fwd, steps = recorded
    floods = [(d, p, f, out) for d, p, f, out in steps if f.multicast]
    assert floods
    for dpid, in_port, frame, out in floods:
        assert not any(isinstance(x, FlowMod) for x in out)
        pkt = [x for x in out if isinstance(x, (PacketOut, Drop))]
        assert len(pkt) == 1
        if isinstance(pkt[0], PacketOut):
            names = {fwd.port_name[dpid][n] for n in pkt[0].out_ports}
            assert in_port not in pkt[0].out_ports
            # every VM port of both vnets (VNF does not filter broadcast) ...
            vm_ports = {n for n in fwd.port_name[dpid].values() if n in cfg["ports"]}
            assert vm_ports - {fwd.port_name[dpid][in_port]} <= names
            # ... and only the broadcast tree's link (red's tunnel, the first vnet)
            links = names & fwd.link_ports(dpid)
            assert all(cfg["ports"].get(n) is None for n in links)
            assert len(links) <= 1 and all(n.endswith(("-0-1", "-0-0")) for n in links)


def test_unicast_between_vnets_is_dropped_without_flow(recorded):
    cfg, fwd, steps = recorded
    macs = cfg["macs"]
    cross = [(f, out) for _, _, f, out in steps
             if not f.multicast and f.dst in macs and macs.get(f.src) != macs[f.dst]]
    assert cross, "the recording has blue replies to red (ARP for 198.19.1.2 / .200 reached blue)"
    for frame, out in cross:
        assert not any(isinstance(x, FlowMod) for x in out)
    dropped = [out[-1] for _, out in cross if isinstance(out[-1], Drop)]
    assert dropped and all("VNF" in d.reason for d in dropped)


def test_known_destination_pushes_the_route_back_from_the_destination(recorded):
    cfg, fwd, steps = recorded
    routes = [(d, p, f, out) for d, p, f, out in steps if any(isinstance(x, FlowMod) for x in out)]
    cross = [r for r in routes if len({x.dpid for x in r[3] if isinstance(x, FlowMod)}) == 2]
    assert routes and cross
    for dpid, in_port, frame, out in routes:
        flows = [x for x in out if isinstance(x, FlowMod)]
        assert flows[-1].dpid == dpid                               # asking switch last
        assert dict(flows[-1].match)["in_port"] == in_port
        dst_dpid, dst_port = fwd.ap[frame.dst] if frame.dst in fwd.ap else (None, None)
        assert flows[0].out_port == dst_port or dst_port is None
        assert out[-1] == PacketOut(dpid, in_port, (flows[-1].out_port,))
        for fl in flows:
            m = dict(fl.match)
            assert (fl.idle_timeout, fl.hard_timeout) == (30, 0)
            assert {"in_port", "vlan_vid", "eth_src", "eth_dst", "eth_type"} <= set(m)
            assert "tcp_src" not in m and "ip_proto" not in m     # v0.90: one flow per host pair
            if frame.eth_type == 0x0800:
                assert (m["ipv4_src"], m["ipv4_dst"]) == (frame.ip_src, frame.ip_dst)
    d, p, f, out = cross[0]
    first_hop = fwd.port_name[d][[x for x in out if isinstance(x, FlowMod)][-1].out_port]
    assert first_hop in fwd.link_ports(d) and cfg["macs"][f.src] == "red" and "-0-" in first_hop


# -- decisions on made-up packets (no recording needed) --------------------------------

A, B, C = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"


def small(**opts):
    topo = Topology(macs={A: "red", B: "red", C: "blue"}, ports={"va": "red", "vb": "red", "vc": "blue"},
                    links={1: [Link("t12", 2, "t21", "red"), Link("u12", 2, "u21", "blue")],
                           2: [Link("t21", 1, "t12", "red"), Link("u21", 1, "u12", "blue")]},
                    vnets=("red", "blue"))
    fwd = Forwarding(topo, Options(**opts))
    fwd.switch_up(1, {1: "va", 2: "vc", 3: "t12", 4: "u12"})
    fwd.switch_up(2, {1: "vb", 3: "t21", 4: "u21"})
    return fwd


def tcp(src, dst, sport):
    return Frame(src, dst, 0x0800, None, "198.19.1.1", "198.19.1.2", 6, sport, 80)


def test_connection_match_is_the_five_tuple():
    fwd = small(match="connection")
    fwd.packet_in(2, 1, Frame(B, "ff:ff:ff:ff:ff:ff", 0x0806))          # learn B on switch 2
    out = fwd.packet_in(1, 1, tcp(A, B, 40000))
    m = dict(out[0].match)
    assert (m["ip_proto"], m["tcp_src"], m["tcp_dst"]) == (6, 40000, 80)
    assert [x.dpid for x in out if isinstance(x, FlowMod)] == [2, 1]
    assert dict(out[0].match)["in_port"] == 3 and out[0].out_port == 1  # t21 -> vb
    assert out[1].out_port == 3                                          # va -> t12


def test_broadcast_isolation_floods_only_the_vnet():
    for iso, want in ((False, {2, 3}), (True, {3})):
        out = small(broadcast_isolation=iso).packet_in(1, 1, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806))
        assert set(out[-1].out_ports) == want                              # vc (blue) only without


def test_off_tree_broadcast_is_dropped_and_moves_delete_flows():
    fwd = small()
    assert isinstance(fwd.packet_in(2, 4, Frame(C, "ff:ff:ff:ff:ff:ff", 0x0806))[-1], Drop)
    fwd.packet_in(1, 1, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806))
    moved = fwd.packet_in(2, 1, Frame(A, "ff:ff:ff:ff:ff:ff", 0x8035))   # RARP from the new host
    assert DeleteFlows(1, (("eth_dst", A),)) in moved and fwd.ap[A] == (2, 1)
    gone = fwd.port_down(2, 1)
    assert DeleteFlows(2, (("eth_src", A),)) in gone and A not in fwd.ap


def test_vlan_links_push_and_pop_the_vnet_tag():
    """On vlan every vnet's link is the shared uplink trunk with its own tag."""
    topo = Topology(macs={A: "red", B: "red"}, ports={"va": "red", "vb": "red"},
                    links={1: [Link("up", 2, "up", "red", 101)], 2: [Link("up", 1, "up", "red", 101)]},
                    vnets=("red",))
    fwd = Forwarding(topo, Options())
    fwd.switch_up(1, {1: "va", 9: "up"})
    fwd.switch_up(2, {1: "vb", 9: "up"})
    flood = fwd.packet_in(1, 1, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806))[-1]
    assert flood == PacketOut(1, 1, (), ((101, (9,)),))                  # tagged into the trunk
    arrived = fwd.packet_in(2, 9, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806, vlan=101))[-1]
    assert arrived == PacketOut(2, 9, (), (), (1,))                      # untagged to vb
    assert A not in fwd.ap or fwd.ap[A] == (1, 1)                        # not learned on the trunk
    out = fwd.packet_in(1, 1, Frame(A, B, 0x0800, None, "198.19.1.1", "198.19.1.2", 1))
    assert out[-1].out_ports == ()                                       # B unknown yet: flood
    fwd.packet_in(2, 1, Frame(B, A, 0x0806))                              # learn B
    out = fwd.packet_in(1, 1, Frame(A, B, 0x0800, None, "198.19.1.1", "198.19.1.2", 1))
    there, here = out[0], out[1]
    assert (there.dpid, dict(there.match)["vlan_vid"], there.pop_vlan) == (2, 101 | 0x1000, True)
    assert (here.dpid, dict(here.match)["vlan_vid"], here.push_vlan) == (1, 0, 101)


def test_removing_a_vnet_forgets_its_macs_ports_links_and_deletes_their_flows():
    fwd = small()
    fwd.packet_in(1, 2, Frame(C, "ff:ff:ff:ff:ff:ff", 0x0806))          # learn C (blue)
    fwd.packet_in(1, 1, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806))          # learn A (red)
    out = fwd.remove_vnet("blue")
    assert out == [DeleteFlows(d, ((k, C),)) for d in (1, 2) for k in ("eth_dst", "eth_src")]
    assert C not in fwd.topo.macs and "vc" not in fwd.topo.ports and C not in fwd.ap
    assert fwd.tree_ports() == {1: {"t12"}, 2: {"t21"}} and "u12" in fwd.link_ports(1)
    flood = fwd.packet_in(1, 1, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806))[-1]
    assert set(flood.out_ports) == {2, 3}                                # VNF floods; not into u12
    assert isinstance(fwd.packet_in(2, 4, Frame(A, "ff:ff:ff:ff:ff:ff", 0x0806))[-1], Drop)
    assert fwd.ap[A] == (1, 1)                                           # nothing learned on u21
    for dst in (A, "02:00:00:00:00:99"):                                 # known or not: no flood
        again = fwd.packet_in(1, 2, Frame(C, dst, 0x0800, None, "198.19.1.3", "198.19.1.1", 1))
        assert isinstance(again[-1], Drop)                               # VNF: C is in no vnet
    assert A in fwd.ap and fwd.remove_vnet("blue") == []                 # red untouched; idempotent


def test_controller_listens_before_os_ken_and_hands_it_the_socket():
    """The entry point binds first; os-ken's hub.listen gets that socket for the
    listen address and a fresh one for any other."""
    import socket
    from vnetbench.sdn import controller
    server = controller.listening(("127.0.0.1", 0))
    try:
        addr = server.getsockname()
        client = socket.create_connection(addr, timeout=2)    # accepted into the backlog
        client.close()
        asked = []
        hand = controller._handing(lambda a, *rest, **kw: asked.append(a) or "fresh", server)
        assert hand(addr) is server and asked == []
        assert hand(("127.0.0.1", addr[1] + 1)) == "fresh" and asked == [("127.0.0.1", addr[1] + 1)]
    finally:
        server.close()


@pytest.mark.parametrize("global_rate", [333, 0])
def test_packet_in_path_meters_each_port_then_the_whole_switch(global_rate):
    """IVS: per ingress port (200/s, burst 32) and then per switch (PKTIN_INTERVAL 3000 us,
    ~333/s, burst 32). The per-port flows and the table miss go on to table 1, whose one
    flow passes the switch's meter and sends to the controller; without a global limit
    they send directly."""
    from vnetbench.kinds.ovs_openflow import floodlight
    sent = []
    dp = SimpleNamespace(ofproto=ofproto_v1_3, ofproto_parser=ofproto_v1_3_parser, id=1,
                         send_msg=sent.append)
    app = SimpleNamespace(opts={"packet_in_rate": 200, "packet_in_burst": 32,
                                "packet_in_global_rate": global_rate,
                                "packet_in_global_burst": 32})
    app._meter = floodlight.Floodlight._meter
    app._meters = lambda *a: floodlight.Floodlight._meters(app, *a)
    floodlight.Floodlight._packet_in_path(app, dp, {1: "p1", 2: "p2"})
    meters = {m.meter_id: (m.bands[0].rate, m.bands[0].burst_size) for m in sent
              if isinstance(m, ofproto_v1_3_parser.OFPMeterMod) and m.command == ofproto_v1_3.OFPMC_ADD}
    flows = [m for m in sent if isinstance(m, ofproto_v1_3_parser.OFPFlowMod)]

    def kinds(flow):
        return [type(i).__name__ for i in flow.instructions]
    per_port = {f.match["in_port"]: f for f in flows if "in_port" in f.match}
    assert {p: kinds(f) for p, f in per_port.items()} == dict.fromkeys(
        (1, 2), ["OFPInstructionMeter", "OFPInstructionGotoTable" if global_rate
                 else "OFPInstructionActions"])
    assert all(f.instructions[0].meter_id == p for p, f in per_port.items())
    if global_rate:
        assert meters == {1: (200, 32), 2: (200, 32), floodlight.GLOBAL_METER: (333, 32)}
        table1, = [f for f in flows if f.table_id == floodlight.PACKET_IN_TABLE]
        assert table1.instructions[0].meter_id == floodlight.GLOBAL_METER
        assert table1.instructions[1].actions[0].port == ofproto_v1_3.OFPP_CONTROLLER
        miss, = [f for f in flows if f.table_id == 0 and f.priority == 0]
        assert kinds(miss) == ["OFPInstructionGotoTable"]
    else:
        assert meters == {1: (200, 32), 2: (200, 32)}
        assert not [f for f in flows if f.table_id == floodlight.PACKET_IN_TABLE]
    assert isinstance(sent[-1], ofproto_v1_3_parser.OFPBarrierRequest)
    clear = sent[0]                      # Floodlight's handshake: clearAllFlowMods first
    assert isinstance(clear, ofproto_v1_3_parser.OFPFlowMod)
    assert clear.command == ofproto_v1_3.OFPFC_DELETE and clear.table_id == ofproto_v1_3.OFPTT_ALL
    assert not list(clear.match.items())
