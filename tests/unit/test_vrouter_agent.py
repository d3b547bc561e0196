"""The vRouter agent's decisions without a switch: the pipeline for a VM port, routes
learned from the control node and their flush, the flow-setup queue's rate and
hold limit, and DHCP answers to recorded packet-ins (tests/data/vrouter)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from os_ken.lib.packet import dhcp as osdhcp, packet

from vnetbench.kinds.vrouter import dhcp
from vnetbench.kinds.vrouter.logic import (
    BCAST_LABEL_BASE, COOKIE_LEARNED, LABEL_BASE, T_CLASSIFY, T_FLOOD, T_FLOW, T_ROUTE, T_TRACK,
    T_TRACKED, VROUTER_MAC, Agent, Delete, Flow, FlowSetup, Meter, flow_key,
)
from vnetbench.kinds.vrouter.ofwire import packet_fields

DATA = json.loads((Path(__file__).parent.parent / "data" / "vrouter" / "packet_ins.json").read_text())
OPTS = {"headless": False, "hold_time": 90, "flow_setup": "agent", "flow_setup_rate": 0, "flow_hold_packets": 3,
        "flow_idle_timeout": 180, "dhcp": True}


def config(**opts):
    iface = {"vm": "cross-a", "vnet": "vnet1", "mac": "02:76:6e:00:02:00", "ip": "198.19.1.3",
             "prefixlen": 24}
    return {"host": "h1", "underlay_ip": "198.18.0.1", "tenant_mtu": 1472,
            "options": {**OPTS, **opts}, "vnets": ["vnet1", "vnet2"],
            "cidrs": {"vnet1": "198.19.1.0/24", "vnet2": "198.19.1.0/24"},
            "ifaces": {"tpx-2-0": {"port": "tpx-2-0", **iface}},
            "tunnels": {"198.18.0.2": "grx-1"}}


def agent(**opts):
    a = Agent(config(**opts))
    a.port_up("grx-1", 3)
    return a


def flows(decisions, table=None):
    return [d for d in decisions if isinstance(d, Flow) and (table is None or d.table == table)]


def test_vm_port_gets_proxy_arp_label_and_local_route():
    a = agent()
    out = a.port_up("tpx-2-0", 4)
    arp = [f for f in flows(out, T_CLASSIFY) if dict(f.match).get("arp_op") == 1][0]
    assert dict(arp.match)["arp_tpa"] == "198.19.1.0/24"       # any address of the VM's vnet
    assert ("set_field", "arp_sha", VROUTER_MAC) in arp.actions and arp.actions[-1] == ("in_port",)
    rx = [f for f in flows(out, T_CLASSIFY) if dict(f.match).get("mpls_label") == LABEL_BASE + 4][0]
    assert rx.actions[0] == ("pop_mpls", 0x0800) and rx.actions[-1] == ("output", 4)
    route = flows(out, T_ROUTE)[0]
    assert dict(route.match) == {"metadata": 1, "eth_type": 0x0800, "ipv4_dst": "198.19.1.3"}
    assert ("set_field", "eth_src", VROUTER_MAC) in route.actions
    assert a.local_routes("198.18.0.1") == [
        {"kind": "vm", "vnet": "vnet1", "ip": "198.19.1.3", "label": LABEL_BASE + 4, "nh": "198.18.0.1"},
        {"kind": "bcast", "vnet": "vnet1", "ip": "198.18.0.1", "label": BCAST_LABEL_BASE + 1,
         "nh": "198.18.0.1"}]


def test_an_egress_limit_is_a_meter_on_what_the_vm_sends():
    cfg = config()
    cfg["ifaces"]["tpx-2-0"]["egress"] = [10000, 8000]
    a = Agent(cfg)
    out = a.port_up("tpx-2-0", 4)
    assert out[0] == Meter(4, 10000, 8000)                  # before the flows that use it
    ip = [f for f in flows(out, T_CLASSIFY) if dict(f.match) == {"in_port": 4, "eth_type": 0x0800}][0]
    assert ip.actions[0] == ("meter", 4)
    assert not any(isinstance(d, Meter) for d in agent().port_up("tpx-2-0", 4))   # no limit, no meter


def test_learned_routes_push_the_remote_label_and_replicate_broadcast():
    a = agent()
    a.port_up("tpx-2-0", 4)
    remote = {"kind": "vm", "vnet": "vnet1", "ip": "198.19.1.4", "label": 20, "nh": "198.18.0.2"}
    bcast = {"kind": "bcast", "vnet": "vnet1", "ip": "198.18.0.2", "label": BCAST_LABEL_BASE + 1,
             "nh": "198.18.0.2"}
    out = a.learn([remote, bcast], full=True)
    route = flows(out, T_ROUTE)[0]
    assert route.cookie == COOKIE_LEARNED
    assert route.actions == (("push_mpls", 0x8847), ("set_field", "mpls_label", 20), ("output", 3))
    flood = flows(out, T_FLOOD)[0]
    assert flood.actions == (("output", 4), ("push_mpls", 0x8847),
                             ("set_field", "mpls_label", BCAST_LABEL_BASE + 1), ("output", 3))
    # a route of another host's underlay this agent has no tunnel to is ignored
    assert a.learn([{**remote, "nh": "198.18.0.9", "ip": "198.19.1.9"}]) == []


def test_routes_learned_before_their_tunnel_port_is_reported_are_programmed_when_it_is():
    a = Agent(config())                       # no GRE port yet
    a.port_up("tpx-2-0", 4)
    remote = {"kind": "vm", "vnet": "vnet1", "ip": "198.19.1.4", "label": 20, "nh": "198.18.0.2"}
    bcast = {"kind": "bcast", "vnet": "vnet1", "ip": "198.18.0.2", "label": BCAST_LABEL_BASE + 1,
             "nh": "198.18.0.2"}
    before = a.learn([remote, bcast], full=True)
    assert flows(before, T_ROUTE) == [] and flows(before, T_FLOOD)[0].actions == (("output", 4),)
    out = a.port_up("grx-1", 3)
    assert flows(out, T_ROUTE)[0].actions == (("push_mpls", 0x8847), ("set_field", "mpls_label", 20),
                                              ("output", 3))
    assert flows(out, T_FLOOD)[0].actions == (("output", 4), ("push_mpls", 0x8847),
                                              ("set_field", "mpls_label", BCAST_LABEL_BASE + 1),
                                              ("output", 3))
    assert Agent(config()).port_up("grx-1", 3) == []      # nothing learned through it: nothing to do


def test_flush_removes_every_learned_route():
    a = agent()
    a.port_up("tpx-2-0", 4)
    a.learn([{"kind": "vm", "vnet": "vnet1", "ip": "198.19.1.4", "label": 20, "nh": "198.18.0.2"}])
    out = a.flush()
    assert a.learned == {}
    assert [d for d in out if isinstance(d, Delete) and d.table == T_ROUTE][0].cookie == COOKIE_LEARNED


def test_recorded_echo_sets_up_forward_and_reverse_flows():
    a = agent()
    a.port_up("tpx-2-0", 4)
    fields = packet_fields(bytes.fromhex(DATA["icmp_echo"]))
    key = flow_key(a.vrf_of(4), fields)
    assert key == (1, "198.19.1.3", "198.19.1.4", 1, 8, 0)        # ICMP: type and code
    fwd, rev = a.flow_entries(key)
    assert dict(fwd.match)["ipv4_src"] == "198.19.1.3" and dict(rev.match)["ipv4_src"] == "198.19.1.4"
    assert dict(fwd.match)["icmpv4_type"] == 8 and dict(rev.match)["icmpv4_type"] == 0   # the reply
    assert fwd.table == rev.table == T_FLOW and fwd.actions == (("goto", T_ROUTE),)
    assert fwd.idle_timeout == 180


def test_flow_setup_holds_three_packets_and_keeps_its_rate():
    clock = [0.0]
    fs = FlowSetup(rate=10, hold=3, now=lambda: clock[0])
    flow = lambda i: (1, "198.19.1.3", "198.19.1.4", 6, 40000 + i, 5001)   # noqa: E731
    assert all(fs.trap(flow(0), b"p") for _ in range(3))
    assert fs.trap(flow(0), b"p") is False                   # a fourth packet is dropped
    for i in range(1, 40):
        fs.trap(flow(i), b"p")
    first = fs.due()
    assert len(first) == 1 and len(first[0][1]) == 3         # burst of a tenth of a second
    done = 0
    for step in range(1, 11):                                # the agent polls; 1 s later:
        clock[0] = step / 10
        done += len(fs.due())
    assert done == 10                                        # 10 set-ups per second
    assert fs.wait() > 0
    assert fs.dropped == 1


def test_a_miss_right_after_a_set_up_is_resent_not_set_up_again():
    """The datapath's flow cache is revalidated after the set-up: a SYN-ACK may still
    miss. It, and the reverse direction, go on without a second set-up."""
    clock = [0.0]
    fs = FlowSetup(rate=0, hold=3, now=lambda: clock[0])
    syn = (1, "198.19.1.3", "198.19.1.4", 6, 40000, 5001)
    synack = (1, "198.19.1.4", "198.19.1.3", 6, 5001, 40000)
    assert fs.trap(syn, b"syn") is True
    assert [k for k, _ in fs.due()] == [syn]
    clock[0] = 0.5
    assert fs.trap(synack, b"synack") is None and fs.trap(syn, b"ack") is None
    clock[0] = 2.0                                             # long after: a new set-up
    assert fs.trap(syn, b"syn") is True and fs.set_up == 1


def test_recorded_dhcp_discover_and_request_get_offer_and_ack():
    a = agent()
    a.port_up("tpx-2-0", 4)
    iface = a.ifaces["tpx-2-0"]
    for req, kind in (("dhcp_discover", osdhcp.DHCP_OFFER), ("dhcp_request", osdhcp.DHCP_ACK)):
        pkt = packet.Packet(dhcp.reply(bytes.fromhex(DATA[req]), iface, 1472))
        d = pkt.get_protocol(osdhcp.dhcp)
        assert d.yiaddr == "198.19.1.3" and d.siaddr == "198.19.1.254"
        opts = {o.tag: o.value for o in d.options.option_list}
        assert opts[osdhcp.DHCP_MESSAGE_TYPE_OPT] == bytes([kind])
        assert opts[osdhcp.DHCP_INTERFACE_MTU_OPT] == (1472).to_bytes(2, "big")
    assert osdhcp.DHCP_GATEWAY_ADDR_OPT not in opts                 # no router on its vnet
    routed = packet.Packet(dhcp.reply(bytes.fromhex(DATA["dhcp_request"]), iface, 1472, router="198.19.1.1"))
    opts = {o.tag: o.value for o in routed.get_protocol(osdhcp.dhcp).options.option_list}
    assert opts[osdhcp.DHCP_GATEWAY_ADDR_OPT] == bytes([198, 19, 1, 1])  # its router's interface
    other = a.ifaces["tpx-2-0"].__class__(**{**iface.__dict__, "mac": "02:00:00:00:00:99"})
    assert dhcp.reply(bytes.fromhex(DATA["dhcp_discover"]), other, 1472) is None   # not its MAC


def test_status_writers_on_several_threads_lose_no_key(tmp_path, monkeypatch):
    """The agent writes its state file from the event, control and set-up threads
    (os-ken's native hub). Each thread sets its own key many times over; every key
    must be in the file at the end (a read-modify-write without the lock lost
    'programmed' to a concurrent 'synced' write: the bring-up then timed out)."""
    import json
    import threading
    from types import SimpleNamespace

    from vnetbench.kinds.vrouter import app as vrouter_app

    monkeypatch.setitem(vrouter_app.SETTINGS, "state", str(tmp_path / "state.json"))
    agent = SimpleNamespace(learned={}, setup=SimpleNamespace(set_up=0, dropped=0))
    app = SimpleNamespace(agent=agent, _state=vrouter_app._read_state(tmp_path / "none"),
                          _state_lock=threading.Lock())
    status = vrouter_app.VRouterAgent._status

    def writer(key):
        for i in range(300):
            status(app, **{key: i})
    threads = [threading.Thread(target=writer, args=(f"k{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = json.loads((tmp_path / "state.json").read_text())
    assert {f"k{n}": 299 for n in range(6)}.items() <= state.items()


# -- flow_setup: datapath (the datapath's connection tracker is the flow table) ----------

def _ip_classify(out, port):
    return [f for f in flows(out, T_CLASSIFY) if dict(f.match).get("in_port") == port
            and dict(f.match).get("eth_type") == 0x0800 and "eth_dst" not in dict(f.match)][0]


def _label_rx(out, port):
    return [f for f in flows(out, T_CLASSIFY) if dict(f.match).get("mpls_label") == LABEL_BASE + port][0]


def test_datapath_set_up_tracks_both_ways_in_the_vrfs_zone_without_the_agent():
    """A port without port security: what its VM sends and what the fabric brings for it
    both pass the VRF's conntrack zone (both hosts of a flow hold it, as both vRouters
    do); a new connection is committed, every packet routed; nothing goes to the agent."""
    a = Agent(config(flow_setup="datapath"))
    a.port_up("grx-1", 3)
    out = a.port_up("tpx-2-0", 4)
    assert _ip_classify(out, 4).actions[-2:] == (("metadata", 1), ("goto", T_TRACK))
    assert _label_rx(out, 4).actions == (("pop_mpls", 0x0800), ("metadata", 1), ("goto", T_TRACK))
    base = a.base()
    track = flows(base, T_TRACK)
    assert [f.actions for f in track] == [(("move", "metadata", "reg2", 16), ("ct", False, T_TRACKED))]
    new, rest = sorted(flows(base, T_TRACKED), key=lambda f: -f.priority)
    assert dict(new.match)["ct_state"] == (0x21, 0x21)                   # +trk+new
    assert new.actions == (("ct", True, None), ("resubmit", T_ROUTE))     # commit, route
    assert rest.match == () and rest.actions == (("resubmit", T_ROUTE),)
    assert not any(("controller",) in f.actions for f in track + flows(base, T_TRACKED))


def test_datapath_set_up_leaves_a_secured_ports_flows_to_the_agent():
    """The agent judges security groups at set-up: a secured port's own traffic, what
    the fabric brings for it and what a local VM sends it all go to table 1."""
    cfg = config(flow_setup="datapath")
    cfg["ifaces"]["tpx-2-0"].update(port_security=True, groups=["default"])
    s = Agent(cfg)
    s.port_up("grx-1", 3)
    out = s.port_up("tpx-2-0", 4)
    assert _ip_classify(out, 4).actions[-1] == ("goto", T_FLOW)
    assert _label_rx(out, 4).actions[-1] == ("goto", T_FLOW)
    to_it = flows(out, T_TRACK)
    assert [(dict(f.match)["ipv4_dst"], f.actions, f.priority) for f in to_it] == \
        [("198.19.1.3", (("resubmit", T_FLOW),), 50)]
    assert any(isinstance(d, Delete) and d.table == T_TRACK for d in s.port_down("tpx-2-0"))


def test_agent_set_up_keeps_the_packet_in_path():
    a = Agent(config(flow_setup="agent"))
    assert not [f for f in a.base() if isinstance(f, Flow) and f.table in (T_TRACK, T_TRACKED)]
    a.port_up("grx-1", 3)
    out = a.port_up("tpx-2-0", 4)
    assert _ip_classify(out, 4).actions[-1] == ("goto", T_FLOW)
    assert _label_rx(out, 4).actions[-1] == ("output", 4)


@pytest.mark.skipif(not shutil.which("ovs-ofctl"), reason="ovs-ofctl not installed")
def test_datapath_set_up_flows_are_what_ovs_decodes():
    """The os-ken encoding of the conntrack entries, read back by OVS itself."""
    from os_ken.ofproto import ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

    from vnetbench.kinds.vrouter.app import VRouterAgent

    class Dp:
        ofproto, ofproto_parser = ofp, parser

    def printed(flow):
        msg = VRouterAgent._message(Dp(), flow)
        msg.set_xid(1)
        msg.serialize()
        return subprocess.run(["ovs-ofctl", "ofp-print", bytes(msg.buf).hex()], capture_output=True,
                              text=True, check=True).stdout
    base = Agent(config(flow_setup="datapath")).base()
    track = printed(flows(base, T_TRACK)[0])
    assert "move:OXM_OF_METADATA[0..15]->NXM_NX_REG2[0..15],ct(table=5,zone=NXM_NX_REG2[0..15])" in track
    new = printed(max(flows(base, T_TRACKED), key=lambda f: f.priority))
    assert "ct_state=+new+trk,ip" in new
    assert "actions=ct(commit,zone=NXM_NX_REG2[0..15]),resubmit(,2)" in new
