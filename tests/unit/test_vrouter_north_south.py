"""North-south in the vRouter model, without a switch (``kinds/vrouter/northsouth.py``):
the public VN is a VRF of every agent, a floating IP a route of it announced by its VM's
host with its own label and NAT'd in that host's tables (DNAT in, SNAT out, a hop each
way), the SDN gateway's host takes the external link as a port and announces the public
VRF's default, and a router's SNAT service instance has a left VN joined to the router's
VNs (its default route leaked into them)."""

import subprocess
from pathlib import Path

from vnetbench.kinds.vrouter import netns, northsouth
from vnetbench.kinds.vrouter.control_node import joined, leaked
from vnetbench.kinds.vrouter.logic import (
    FIP_LABEL_BASE, FIP_SNAT_PRIORITY, GATEWAY_LABEL, T_CLASSIFY, T_FLOW, T_ROUTE, T_TRACK, VROUTER_MAC, Agent,
    Delete, Flow, priority, unroute,
)
from vnetbench.testbed.capabilities import probe
from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns.names import Names

#: the documented routed testbed (docs/routers.md): a (blue) on h1, b (red) on h2 with a floating
#: IP, r1 on h1 with a gateway; on vrouter over gre
ROUTED = (Path(__file__).parents[2] / "examples" / "routed-two-subnets.yaml").read_text() \
    .replace("vswitch: ovs", "vswitch: vrouter").replace("{type: vxlan}", "{type: gre}")
OPTS = {"headless": False, "hold_time": 90, "flow_setup": "datapath", "flow_setup_rate": 0,
        "flow_hold_packets": 3, "flow_idle_timeout": 180, "dhcp": True}
H1, H2 = "198.18.0.1", "198.18.0.2"


def config(tb, host, names=Names("abc123")):
    """What the builder gives HOST's agent (``netns.agent_config`` without a build)."""
    from types import SimpleNamespace
    ctx = SimpleNamespace(testbed=tb, names=names, host_index=lambda h: [x.name for x in tb.hosts].index(h))
    return netns.agent_config(ctx, tb.host(host))


def flows(decisions, table):
    return [f for f in decisions if isinstance(f, Flow) and f.table == table]


def test_the_public_vn_and_the_snat_left_vn_are_vrfs_and_the_left_vn_joins_the_router():
    tb = loads(ROUTED)
    assert northsouth.vrf_names(tb) == ["blue", "red", northsouth.PUBLIC, northsouth.left_vn("r1")]
    assert netns.routing_groups(tb) == [["blue", "red", northsouth.left_vn("r1")]]
    # the left VN's default route is leaked into blue and red, as a service chain's static route
    left = {"kind": "vm", "vnet": northsouth.left_vn("r1"), "ip": "0.0.0.0/0", "label": 20, "nh": H1}
    assert {r["vnet"] for r in leaked([left], joined(netns.routing_groups(tb)))} == {"blue", "red"}
    assert northsouth.gateway_host(tb) == "h1"
    assert northsouth.why_not(tb) is None and probe().why_not_routers(tb) is None


def test_routes_each_agent_holds_with_north_south():
    tb = loads(ROUTED)
    # h1 learns from h2: b, red's broadcast, b's floating IP; leaks: a, b into the other VN and the
    # left VN (2 each), the left VN's default into blue and red (2); the right NIC leaks nowhere
    assert netns.expected_routes(tb, "h1") == 3 + 4 + 2
    # h2 learns from h1: a, blue's broadcast, the SI's left and right NICs, their VNs' broadcast
    # routes, the gateway's default
    assert netns.expected_routes(tb, "h2") == 2 + 4 + 1 + 4 + 2


def test_routers_with_gateways_on_two_hosts_are_refused_in_one_line():
    tb = loads(ROUTED.split("floating_ips:")[0].replace(
        "routers:\n", "routers:\n  - {name: r2, host: h2, vnets: [green], external_gateway: true}\n")
        .replace("[{name: blue}, {name: red}]", "[{name: blue}, {name: red}, {name: green}]"))
    why = probe().why_not_routers(tb)
    assert why and "one SDN gateway" in why and "h1, h2" in why and "\n" not in why


def test_a_floating_ip_is_a_public_route_of_its_host_nated_in_its_flows():
    tb = loads(ROUTED)
    cfg = config(tb, "h2")
    agent = Agent(cfg)
    agent.port_up("grabc123-0", 2)
    port = cfg["floating_ips"][0]["port"]
    out = agent.port_up(port, 5)
    pub, red = agent.vrfs[northsouth.PUBLIC], agent.vrfs["red"]
    fip, fixed = str(tb.floating_ips[0].ip), str(tb.vm("b").nics[0].ip)
    dnat = [f for f in flows(out, T_ROUTE) if dict(f.match).get("ipv4_dst") == fip]
    assert dnat == [Flow(T_ROUTE, 100, dnat[0].match, (("set_field", "ipv4_dst", fixed), ("dec_ttl",),
                                                       ("set_field", "metadata", red), ("resubmit", T_TRACK)))]
    assert dict(dnat[0].match)["metadata"] == pub
    snat = [f for f in flows(out, T_ROUTE) if dict(f.match).get("ipv4_src") == fixed]
    assert snat[0].priority == FIP_SNAT_PRIORITY and snat[0].actions == (
        ("set_field", "ipv4_src", fip), ("dec_ttl",), ("set_field", "metadata", pub), ("resubmit", T_ROUTE))
    label = [f for f in flows(out, T_CLASSIFY) if dict(f.match).get("mpls_label") == FIP_LABEL_BASE + 5]
    assert label[0].actions == (("pop_mpls", 0x0800), ("metadata", pub), ("goto", T_ROUTE))
    assert {"kind": "vm", "vnet": northsouth.PUBLIC, "ip": fip, "label": FIP_LABEL_BASE + 5,
            "nh": cfg["underlay_ip"]} in agent.local_routes(cfg["underlay_ip"])
    gone = agent.port_down(port)
    assert Delete(T_ROUTE, snat[0].match, priority=FIP_SNAT_PRIORITY) in gone
    assert Delete(T_ROUTE, dnat[0].match) in gone
    assert not [r for r in agent.local_routes(cfg["underlay_ip"]) if r["vnet"] == northsouth.PUBLIC]


def test_with_agent_set_up_the_dnat_goes_to_the_agents_flow_table():
    tb = loads(ROUTED.replace("vswitch: vrouter", "vswitch: {kind: vrouter, vrouter: {flow_setup: agent}}"))
    cfg = config(tb, "h2")
    agent = Agent(cfg)
    out = agent.port_up(cfg["floating_ips"][0]["port"], 5)
    (dnat,) = [f for f in flows(out, T_ROUTE) if f.priority == 100 and "ipv4_dst" in dict(f.match)
               and dict(f.match)["metadata"] == agent.vrfs[northsouth.PUBLIC]]
    assert dnat.actions[-1] == ("resubmit", T_FLOW)


def test_the_sdn_gateway_answers_arp_for_public_addresses_and_routes_out_of_its_port():
    tb = loads(ROUTED)
    cfg = config(tb, "h1")
    assert cfg["gateway"]["port"] == Names("abc123").ext_uplink
    agent = Agent(cfg)
    out = agent.port_up(cfg["gateway"]["port"], 9)
    pub = agent.vrfs[northsouth.PUBLIC]
    arp = {dict(f.match)["arp_tpa"] for f in flows(out, T_CLASSIFY) if f.priority == 300}
    assert arp == {str(tb.floating_ips[0].ip), str(tb.routers[0].gateway)}
    outside = tb.external_hosts[0]
    routes = {dict(f.match)["ipv4_dst"]: f for f in flows(out, T_ROUTE)}
    assert routes[str(outside.ip)].actions == (("set_field", "eth_src", VROUTER_MAC),
                                               ("set_field", "eth_dst", outside.mac), ("output", 9))
    assert routes["0.0.0.0/0"].priority == priority("0.0.0.0/0") == 30   # the outside is the gateway
    assert all(dict(f.match)["metadata"] == pub for f in routes.values())
    label = [f for f in flows(out, T_CLASSIFY) if dict(f.match).get("mpls_label") == GATEWAY_LABEL]
    assert label[0].actions[-1] == ("goto", T_ROUTE)
    assert {"kind": "vm", "vnet": northsouth.PUBLIC, "ip": "0.0.0.0/0", "label": GATEWAY_LABEL,
            "nh": cfg["underlay_ip"]} in agent.local_routes(cfg["underlay_ip"])
    assert config(tb, "h2")["gateway"] is None


def test_the_snat_service_instance_is_two_interfaces_of_the_routers_host():
    tb = loads(ROUTED)
    (left, right) = northsouth.si_ifaces(tb, Names("abc123"))
    assert left["vnet"] == northsouth.left_vn("r1") and left["ip"] == "0.0.0.0/0" and left["host"] == "h1"
    assert right["vnet"] == northsouth.PUBLIC and right["ip"] == str(tb.routers[0].gateway)
    agent = Agent(config(tb, "h1"))
    out = agent.port_up(left["port"], 7)
    (to_left,) = [f for f in flows(out, T_ROUTE) if dict(f.match).get("ipv4_dst") == "0.0.0.0/0"]
    assert to_left.priority == 30            # below every VM route of the left VN
    arp = [f for f in flows(out, T_CLASSIFY) if f.priority == 300]
    assert dict(arp[0].match)["arp_tpa"] == "0.0.0.0/0"     # every ARP on the left NIC answered


def test_a_prefix_route_is_deleted_strictly():
    match = (("metadata", 1), ("ipv4_dst", "0.0.0.0/0"))
    assert unroute(T_ROUTE, match, "0.0.0.0/0") == Delete(T_ROUTE, match, None, 30)
    assert unroute(T_ROUTE, match, "198.19.1.1") == Delete(T_ROUTE, match, None, None)


def test_the_nat_and_the_strict_delete_are_what_ovs_decodes():
    from os_ken.ofproto import ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

    from vnetbench.kinds.vrouter.app import VRouterAgent

    class Dp:
        ofproto, ofproto_parser = ofp, parser

    tb = loads(ROUTED)
    cfg = config(tb, "h2")
    agent = Agent(cfg)
    fixed = str(tb.vm("b").nics[0].ip)
    out = agent.port_up(cfg["floating_ips"][0]["port"], 5)
    (snat,) = [f for f in flows(out, T_ROUTE) if dict(f.match).get("ipv4_src") == fixed]

    def printed(d):
        msg = VRouterAgent._message(Dp(), d)
        msg.set_xid(1)
        msg.serialize()
        return subprocess.run(["ovs-ofctl", "ofp-print", bytes(msg.buf).hex()], capture_output=True, text=True,
                              check=True).stdout
    text = printed(snat)
    assert (f"set_field:{tb.floating_ips[0].ip}->ip_src,dec_ttl,set_field:0x3->metadata,resubmit(,2)"
            in text), text
    text = printed(Delete(T_ROUTE, (("metadata", 1), ("eth_type", 0x0800), ("ipv4_dst", "0.0.0.0/0")), None, 30))
    assert "DEL_STRICT" in text and "priority=30" in text, text
