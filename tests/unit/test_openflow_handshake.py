"""The os-ken apps take a switch's ports from the reply to os-ken's own OpenFlow 1.3
handshake request, which always arrives in CONFIG_DISPATCHER (handling it is what moves
the switch to MAIN). They used to ask again and listen in MAIN only: whenever both
replies were read from the socket in one go, both were dispatched in CONFIG and the
bridge was never programmed (the vrouter agent in CI, 2026-11-24)."""

import threading
from types import SimpleNamespace

import pytest
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER
from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

from vnetbench.kinds.ovs_openflow.floodlight import Floodlight
from vnetbench.kinds.vrouter.app import VRouterAgent


class Datapath:
    ofproto, ofproto_parser, id = ofproto_v1_3, ofproto_v1_3_parser, 7

    def __init__(self):
        self.sent = []

    def send_msg(self, msg):
        self.sent.append(msg)


@pytest.mark.parametrize("app", [VRouterAgent, Floodlight])
def test_ports_come_from_the_handshake_reply_in_config(app):
    callers = app._port_desc.callers[ofp_event.EventOFPPortDescStatsReply]
    assert callers.dispatchers == [CONFIG_DISPATCHER]


@pytest.mark.parametrize("app", [VRouterAgent, Floodlight])
@pytest.mark.parametrize("event, handler", [(ofp_event.EventOFPBarrierReply, "_barrier"),
                                            (ofp_event.EventOFPPacketIn, "_packet_in"),
                                            (ofp_event.EventOFPPortStatus, "_port_status")])
def test_what_follows_the_port_description_is_heard_before_main(app, event, handler):
    """A barrier reply or packet-in caused by what the app sent on the port description,
    or a port added after the switch wrote that reply, can arrive before os-ken's
    handler of the reply moved the switch to MAIN."""
    assert CONFIG_DISPATCHER in getattr(app, handler).callers[event].dispatchers


@pytest.mark.parametrize("app", [VRouterAgent, Floodlight])
def test_features_ask_no_second_port_description(app):
    dp = Datapath()
    me = SimpleNamespace(dps={}, desc={}, _send_role=lambda dp: None)
    app._features(me, SimpleNamespace(msg=SimpleNamespace(datapath=dp)))
    assert not [m for m in dp.sent if isinstance(m, ofproto_v1_3_parser.OFPPortDescStatsRequest)]


def test_a_multipart_port_description_is_used_once_complete():
    dp, programmed = Datapath(), []
    agent = SimpleNamespace(ofports={}, learned={}, base=lambda: [],
                            port_up=lambda name, no: programmed.append(name) or [],
                            learn=lambda add: [])
    me = SimpleNamespace(dp=dp, desc=[], agent=agent, _send=lambda out: None,
                         _announce=lambda: None, _decide=threading.RLock())
    port = lambda no, name: ofproto_v1_3_parser.OFPPort(no, b"\0" * 6, name, 0, 0, 0, 0, 0, 0, 0, 0)  # noqa: E731
    more = ofproto_v1_3.OFPMPF_REPLY_MORE
    VRouterAgent._port_desc(me, SimpleNamespace(msg=SimpleNamespace(flags=more, body=[port(1, b"a")])))
    assert programmed == []
    VRouterAgent._port_desc(me, SimpleNamespace(msg=SimpleNamespace(flags=0, body=[port(2, b"b")])))
    assert programmed == ["a", "b"]
    assert isinstance(dp.sent[-1], ofproto_v1_3_parser.OFPBarrierRequest)


def _port_status(dp, reason, no=5, name=b"vm5"):
    desc = ofproto_v1_3_parser.OFPPort(no, b"\0" * 6, name, 0, 0, 0, 0, 0, 0, 0, 0)
    return SimpleNamespace(msg=SimpleNamespace(datapath=dp, reason=reason, desc=desc))


def test_floodlight_takes_the_datapath_id_from_the_features_reply():
    """os-ken sets dp.id in its own handler of the reply, on the switch's receive thread;
    the app's event thread may get there first (CI 2026-11-24: a None dpid among the
    switches, and a vnet deletion then failed on sorting them)."""
    dp = Datapath()
    dp.id = None
    me = SimpleNamespace(dps={}, desc={}, described={9}, _send_role=lambda dp: None)
    Floodlight._features(me, SimpleNamespace(msg=SimpleNamespace(datapath=dp, datapath_id=9)))
    assert me.dps == {9: dp} and me.desc == {9: {}} and me.described == set()


def test_floodlight_port_status_before_the_port_description_is_left_to_it():
    dp, heard = Datapath(), []
    fwd = SimpleNamespace(port_up=lambda *a: heard.append(("up", *a)),
                          port_down=lambda *a: heard.append(("down", *a)) or [])
    me = SimpleNamespace(described=set(), fwd=fwd, master=True, _apply=lambda d, data: None,
                         _packet_in_path=lambda *a, **k: heard.append("path"))
    Floodlight._port_status(me, _port_status(dp, ofproto_v1_3.OFPPR_ADD))
    assert heard == []                       # the description, still to come, has the port
    me.described.add(dp.id)
    Floodlight._port_status(me, _port_status(dp, ofproto_v1_3.OFPPR_ADD))
    assert heard == [("up", 7, 5, "vm5"), "path"]


def test_vrouter_port_status_before_the_port_description_is_left_to_it():
    dp, sent = Datapath(), []
    agent = SimpleNamespace(port_up=lambda name, no: [f"flows of {name}"],
                            local_routes=lambda ip: [])
    me = SimpleNamespace(dp=dp, described=False, agent=agent, underlay_ip="198.18.0.1",
                         _send=sent.append, _update=lambda **k: None, _decide=threading.RLock())
    VRouterAgent._port_status(me, _port_status(dp, ofproto_v1_3.OFPPR_ADD))
    assert sent == []
    me.described = True
    VRouterAgent._port_status(me, _port_status(dp, ofproto_v1_3.OFPPR_ADD))
    assert sent == [["flows of vm5"]]
