"""Routers in the vRouter model (issue 26), without a switch: the control node leaks a
router's vnets' VM routes into each other's VRF (to the announcing agent too) and
withdraws them when an interface goes; an agent routes a leaked route with dec_ttl (to
its tunnel, or to a VM of its own host), keeps a flow across VRFs stateful (the reverse
entry in the local receiver's VRF) and judges the receiver's security groups."""

import json
import shutil
import subprocess

import pytest

from vnetbench.kinds.vrouter import netns
from vnetbench.kinds.vrouter.control_node import ControlNode, joined, leaked
from vnetbench.kinds.vrouter.logic import (
    COOKIE_LEARNED, LABEL_BASE, T_FLOW, T_ROUTE, T_TRACK, VROUTER_MAC, Agent, Delete, Flow,
)
from vnetbench.testbed.loader import loads

OPTS = {"headless": False, "hold_time": 90, "flow_setup": "agent", "flow_setup_rate": 0, "flow_hold_packets": 3,
        "flow_idle_timeout": 180, "dhcp": True}
H1, H2 = "198.18.0.1", "198.18.0.2"
BLUE_A = {"vm": "a", "vnet": "blue", "mac": "02:76:6e:00:00:01", "ip": "198.19.1.1", "prefixlen": 24}
RED_C = {"vm": "c", "vnet": "red", "mac": "02:76:6e:00:00:03", "ip": "198.19.2.3", "prefixlen": 24}
# what h2's agent announces for b (red) and what the node makes of it in blue
RED_B = {"kind": "vm", "vnet": "red", "ip": "198.19.2.2", "label": LABEL_BASE + 5, "nh": H2}
RED_B_IN_BLUE = {**RED_B, "vnet": "blue", "origin": "red"}


def h1(**opts):
    """h1's agent: a (blue) and c (red) local, a tunnel to h2 at port 3."""
    cfg = {"host": "h1", "underlay_ip": H1, "tenant_mtu": 1472, "options": {**OPTS, **opts},
           "vnets": ["blue", "red"], "cidrs": {"blue": "198.19.1.0/24", "red": "198.19.2.0/24"},
           "ifaces": {"pa": {"port": "pa", **BLUE_A}, "pc": {"port": "pc", **RED_C}},
           "tunnels": {H2: "gre-2"}}
    a = Agent(cfg)
    a.port_up("gre-2", 3)
    return a


def routes(decisions, table=T_ROUTE):
    return {dict(f.match)["ipv4_dst"]: f for f in decisions if isinstance(f, Flow) and f.table == table}


# -- the control node ------------------------------------------------------------------

def test_a_router_leaks_vm_routes_between_its_vnets_and_never_broadcast():
    links = joined([["blue", "red", "green"], ["x"]])
    assert links == {"blue": ("green", "red"), "red": ("blue", "green"), "green": ("blue", "red")}
    bcast = {"kind": "bcast", "vnet": "red", "ip": H2, "label": 100002, "nh": H2}
    assert leaked([RED_B, bcast], links) == [RED_B_IN_BLUE, {**RED_B, "vnet": "green", "origin": "red"}]
    assert leaked([RED_B], joined([["blue"], ["red"]])) == []       # a router on one vnet joins none


class Session:
    """A socket the node writes to: the messages it sent."""

    def __init__(self):
        self.sent = []

    def sendall(self, data):
        self.sent += [json.loads(line) for line in data.decode().splitlines()]


def test_the_node_sends_leaks_to_every_agent_and_withdraws_them_with_the_interface():
    node = ControlNode(30, routers=[["blue", "red"]])
    s1, s2 = Session(), Session()
    node.handle(s1, None, {"type": "hello", "host": "h1"})
    node.handle(s2, None, {"type": "hello", "host": "h2"})
    node.handle(s2, "h2", {"type": "update", "add": [RED_B], "delete": []})
    assert s1.sent[-2:] == [{"type": "update", "add": [RED_B], "delete": []},
                            {"type": "update", "add": [RED_B_IN_BLUE], "delete": []}]
    # the announcing agent gets the leak too: its blue VMs reach its own red ones
    assert s2.sent[-1] == {"type": "update", "add": [RED_B_IN_BLUE], "delete": []}
    late = Session()                                   # an agent (re)connecting: the whole table
    node.handle(late, None, {"type": "hello", "host": "h3"})
    assert late.sent[0]["full"] and RED_B_IN_BLUE in late.sent[0]["add"] and RED_B in late.sent[0]["add"]
    node.reroute([["red"]])                            # r1's interface on blue removed
    for s in (s1, s2, late):
        assert s.sent[-1] == {"type": "update", "add": [], "delete": [RED_B_IN_BLUE]}
    node.reroute([["red"]])                            # nothing changed: nothing sent
    assert len(s1.sent) == 3 + 1


def test_the_routers_of_a_testbed_and_the_routes_each_agent_then_holds():
    tb = loads("vswitch: vrouter\nnetwork: {type: gre}\nvnets: [{name: blue}, {name: red}]\n"
               "vms:\n  - {name: a, host: h1, vnets: [blue]}\n  - {name: b, host: h2, vnets: [red]}\n"
               "  - {name: c, host: h1, vnets: [red]}\nrouters:\n  - {name: r1, host: h1, vnets: [blue, red]}\n")
    assert netns.routing_groups(tb) == [["blue", "red"]]
    assert netns.routing_groups(tb, [["r1", "blue"]]) == [["red"]]
    # h1: b's route and red's broadcast route from h2, and a, b, c each leaked once
    assert netns.expected_routes(tb, "h1") == 2 + 3
    assert netns.expected_routes(tb, "h2") == 2 + 2 + 3
    assert netns.expected_routes(tb, "h1", removed=[["r1", "red"]]) == 2


# -- the agent ---------------------------------------------------------------------------

def test_a_leaked_remote_route_decrements_the_ttl_then_tunnels_with_the_label():
    a = h1()
    out = a.learn(add=[RED_B, RED_B_IN_BLUE])
    by_vrf = {dict(f.match)["metadata"]: f for f in out if isinstance(f, Flow) and f.table == T_ROUTE}
    own, leak = by_vrf[2], by_vrf[1]
    assert dict(own.match)["metadata"] == 2 and ("dec_ttl",) not in own.actions      # red's own: no hop
    assert dict(leak.match) == {"metadata": 1, "eth_type": 0x0800, "ipv4_dst": "198.19.2.2"}
    assert leak.actions == (("dec_ttl",), ("push_mpls", 0x8847), ("set_field", "mpls_label", LABEL_BASE + 5),
                            ("output", 3))
    assert leak.cookie == COOKIE_LEARNED


def test_a_route_leaked_to_a_vm_of_this_host_delivers_to_its_port_even_if_it_came_first():
    a = h1()
    c_in_blue = {"kind": "vm", "vnet": "blue", "ip": RED_C["ip"], "label": LABEL_BASE + 5, "nh": H1,
                 "origin": "red"}
    assert a.learn(add=[c_in_blue]) == [f for f in a.flood("blue")]      # c's port not up yet
    out = a.port_up("pc", 5)
    (leak,) = [f for f in out if isinstance(f, Flow) and f.table == T_ROUTE and dict(f.match)["metadata"] == 1]
    assert leak.actions == (("dec_ttl",), ("set_field", "eth_src", VROUTER_MAC),
                            ("set_field", "eth_dst", RED_C["mac"]), ("output", 5))
    assert Delete(T_ROUTE, leak.match, COOKIE_LEARNED) in a.port_down("pc")
    # a route announced by this host in its own VRF is never taken back from the node
    assert a.learn(add=[{**c_in_blue, "vnet": "red", "origin": None}]) == []


def test_withdrawn_leaks_delete_their_routes():
    a = h1()
    a.learn(add=[RED_B, RED_B_IN_BLUE])
    out = a.learn(delete=[RED_B_IN_BLUE])
    assert Delete(T_ROUTE, (("eth_type", 0x0800), ("ipv4_dst", "198.19.2.2"), ("metadata", 1)),
                  COOKIE_LEARNED) in out
    assert ("vm", "red", "198.19.2.2") in a.learned and ("vm", "blue", "198.19.2.2") not in a.learned


def _secured(**opts):
    a = h1(**opts)
    for p in ("pa", "pc"):
        i = a.ifaces[p]
        a.ifaces[p] = type(i)(**{**i.__dict__, "port_security": True, "groups": ("web",)})
    a.port_up("pa", 4)
    a.port_up("pc", 5)
    a.learn(add=[{"kind": "vm", "vnet": "blue", "ip": RED_C["ip"], "label": LABEL_BASE + 5, "nh": H1,
                  "origin": "red"},
                 {"kind": "vm", "vnet": "red", "ip": BLUE_A["ip"], "label": LABEL_BASE + 4, "nh": H1,
                  "origin": "blue"}])
    return a


def test_a_flow_across_vrfs_on_one_host_comes_back_in_the_receivers_vrf():
    """a (blue) to c (red), both on h1: the forward entry in blue, the reverse one in red,
    where c's reply enters; c's ingress rules judge it (here: no rule admits ICMP)."""
    from vnetbench.testbed.model import SgRule
    a = _secured()
    a.rules = {"web": (SgRule("egress"), SgRule("ingress", "tcp", 80, 80))}
    key = (1, BLUE_A["ip"], RED_C["ip"], 6, 40000, 80)
    assert a.reverse_of(key) == (2, RED_C["ip"], BLUE_A["ip"], 6, 80, 40000)
    allow, entries = a.set_up(key, in_port=4)
    assert allow
    assert [dict(f.match)["metadata"] for f in entries] == [1, 2]
    assert a.again((2, RED_C["ip"], BLUE_A["ip"], 6, 80, 40000), in_port=5)[0]     # the reply: same flow
    assert not a.permits((1, BLUE_A["ip"], RED_C["ip"], 1, 8, 0), in_port=4)      # c admits no ICMP
    assert a.reverse_of((1, BLUE_A["ip"], "198.19.2.2", 6, 40000, 80))[0] == 1   # b is remote: same VRF


def test_datapath_set_up_sends_a_leak_to_a_secured_local_port_through_the_agent():
    a = _secured(flow_setup="datapath")
    c_in_blue = a.learned[("vm", "blue", RED_C["ip"])]
    track = routes(a._route(c_in_blue), T_TRACK)[RED_C["ip"]]
    assert dict(track.match)["metadata"] == 1 and track.actions == (("resubmit", T_FLOW),)
    assert Delete(T_TRACK, track.match, COOKIE_LEARNED) in a.learn(delete=[c_in_blue])


@pytest.mark.skipif(not shutil.which("ovs-ofctl"), reason="ovs-ofctl not installed")
def test_the_leaked_route_is_what_ovs_decodes():
    from os_ken.ofproto import ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

    from vnetbench.kinds.vrouter.app import VRouterAgent

    class Dp:
        ofproto, ofproto_parser = ofp, parser

    leak = [f for f in h1().learn(add=[RED_B_IN_BLUE]) if isinstance(f, Flow) and f.table == T_ROUTE][0]
    msg = VRouterAgent._message(Dp(), leak)
    msg.set_xid(1)
    msg.serialize()
    text = subprocess.run(["ovs-ofctl", "ofp-print", bytes(msg.buf).hex()], capture_output=True, text=True,
                          check=True).stdout
    assert f"actions=dec_ttl,push_mpls:0x8847,set_field:{LABEL_BASE + 5}->mpls_label,output:3" in text, text


def test_an_agent_whose_session_ends_has_its_leaks_withdrawn_too():
    """The session of h2 ends (its agent died or was cut): the others lose its routes and
    the routes the node had leaked from them."""
    import socket
    import threading
    node = ControlNode(30, routers=[["blue", "red"]])
    s1 = Session()
    node.handle(s1, None, {"type": "hello", "host": "h1"})
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=node.serve, args=(ours,))
    served.start()
    theirs.sendall(b'{"type": "hello", "host": "h2"}\n' +
                   json.dumps({"type": "update", "add": [RED_B], "delete": []}).encode() + b"\n")
    theirs.shutdown(socket.SHUT_WR)
    served.join(5)
    theirs.close()
    assert s1.sent[-1] == {"type": "update", "add": [], "delete": [RED_B, RED_B_IN_BLUE]}
