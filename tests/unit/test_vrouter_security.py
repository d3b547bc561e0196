"""Security groups in the vRouter model's agent (issue 27): the verdict each agent gives
at a flow's set-up -- the sender's host judging egress, the receiver's host ingress --
composes to exactly what Neutron's rules say (``vnetbench.testbed.secgroups``, the
reference every kind is checked against), a rule change re-evaluates the flows set up,
and a port with port security takes its fabric traffic through the flow table."""

import dataclasses
import ipaddress
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from vnetbench.kinds.vrouter.logic import T_CLASSIFY, T_FLOW, T_ROUTE, Agent, reverse
from vnetbench.kinds.vrouter.netns import security
from vnetbench.testbed import secgroups
from vnetbench.testbed.codec import rule_to_dict
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import SgRule
from vnetbench.testbed.secgroups import Packet

WEB = "vswitch: vrouter\nnetwork: {type: gre}\n" + \
    (Path(__file__).parent.parent / "data" / "secgroups" / "web.yaml").read_text()
GRE = 50                                   # each agent's OpenFlow port of the tunnel
PROTO = {"icmp": 1, "tcp": 6, "udp": 17}
OPTS = {"headless": False, "hold_time": 90, "flow_setup": "agent", "flow_setup_rate": 0, "flow_hold_packets": 3,
        "flow_idle_timeout": 180, "dhcp": True}


def agents(tb):
    """One agent per host, told what the builder tells it (``netns.agent_config``'s
    shape), each VM port up at OpenFlow port = the VM's index + 1."""
    out = {}
    for host in tb.hosts:
        ifaces = {vm.name: {"port": vm.name, "vm": vm.name, "vnet": nic.vnet, "mac": nic.mac,
                            "ip": str(nic.ip), "prefixlen": 24, "egress": None,
                            "port_security": nic.port_security, "groups": list(nic.security_groups)}
                  for vm in tb.vms if vm.host == host.name for nic in vm.nics}
        a = Agent({"host": host.name, "underlay_ip": str(host.underlay_ip), "tenant_mtu": 1450,
                   "options": OPTS, "vnets": [v.name for v in tb.vnets],
                   "cidrs": {v.name: str(v.cidr) for v in tb.vnets}, "ifaces": ifaces,
                   "tunnels": {"198.18.0.99": "gre"}, "security": security(tb)})
        a.port_up("gre", GRE)
        for i, vm in enumerate(tb.vms):
            if vm.host == host.name:
                a.port_up(vm.name, i + 1)
        out[host.name] = a
    return out


def ofport(tb, vm):
    return [v.name for v in tb.vms].index(vm) + 1


def key(tb, src, dst, proto, port):
    s, d = tb.vm(src).nics[0], tb.vm(dst).nics[0]
    ports = (8, 0) if proto == "icmp" else (40000, port)
    return (1, str(s.ip), str(d.ip), PROTO[proto]) + ports


def delivered(tb, ags, src, dst, proto, port) -> bool:
    """A new connection's first packet through the agents: set up where it enters from
    the VM; across hosts, set up again where it enters from the fabric when the
    receiving port has port security (otherwise its label delivers it directly)."""
    k = key(tb, src, dst, proto, port)
    sh, dh = tb.vm(src).host, tb.vm(dst).host
    allow, _ = ags[sh].set_up(k, ofport(tb, src))
    if allow and sh != dh and tb.vm(dst).nics[0].port_security:
        allow, _ = ags[dh].set_up(k, GRE)
    return allow


def reference(tb, src, dst, proto, port) -> bool:
    s, d = tb.vm(src).nics[0], tb.vm(dst).nics[0]
    return secgroups.allowed(tb, s, d, Packet(proto, s.ip, d.ip, 8 if proto == "icmp" else port,
                                              0 if proto == "icmp" else None))


RULES = st.builds(
    lambda direction, proto, ports, remote: SgRule(direction, proto, *(ports if proto in ("tcp", "udp") else
                                                                       (None, None)), **remote),
    st.sampled_from(["ingress", "egress"]), st.sampled_from([None, "tcp", "udp", "icmp"]),
    st.tuples(st.integers(1, 100), st.integers(0, 100)).map(lambda t: (t[0], t[0] + t[1])),
    st.sampled_from([{}, {"remote_ip_prefix": ipaddress.IPv4Network("198.19.1.0/28")},
                     {"remote_ip_prefix": ipaddress.IPv4Network("198.19.1.16/28")},
                     {"remote_group": "web"}, {"remote_group": "default"}]))
VMS = st.sampled_from("abcde")


@settings(max_examples=200, deadline=None)
@given(st.lists(RULES, max_size=5), st.lists(RULES, max_size=3), VMS, VMS,
       st.sampled_from(["tcp", "udp", "icmp"]), st.integers(1, 210))
def test_the_agents_verdicts_compose_to_neutrons_rules(web, default, src, dst, proto, port):
    """Any rules in both groups, any pair of VMs (same host or across), any protocol:
    the packet passes the agents exactly when the reference says it is allowed."""
    if src == dst:
        return
    base = loads(WEB)
    tb = dataclasses.replace(base, security_groups=tuple(
        dataclasses.replace(g, rules=tuple(web if g.name == "web" else default)) for g in base.security_groups))
    assert delivered(tb, agents(tb), src, dst, proto, port) == reference(tb, src, dst, proto, port)


def test_a_denied_flow_drops_both_ways_and_an_allowed_one_continues_to_the_routes():
    tb = loads(WEB)
    ags = agents(tb)
    allow, (fwd, rev) = ags["h1"].set_up(key(tb, "b", "a", "tcp", 22), GRE)     # no rule for 22
    assert not allow and fwd.actions == rev.actions == ()
    allow, (fwd, rev) = ags["h1"].set_up(key(tb, "b", "a", "tcp", 5201), GRE)
    assert allow and fwd.actions == rev.actions == (("goto", T_ROUTE),)
    assert dict(rev.match)["tcp_src"] == 5201 and dict(rev.match)["ipv4_src"] == "198.19.1.10"


def test_a_spoofed_source_is_dropped_only_with_port_security():
    tb = loads(WEB)
    ags = agents(tb)
    spoofed = (1, "198.19.1.99", "198.19.1.20", 6, 40000, 5201)
    assert not ags["h1"].permits(spoofed, ofport(tb, "a"))
    assert ags["h2"].permits((1, "198.19.1.99", "198.19.1.10", 6, 40000, 5201), ofport(tb, "c"))


def test_a_rule_change_re_evaluates_the_flows_set_up():
    """Removing the TCP rule turns the established flow's entries to drop (Contrail
    re-evaluates flows on a policy change); putting it back allows them again; flows
    whose verdict did not change are not sent again."""
    tb = loads(WEB)
    a = agents(tb)["h1"]
    k = key(tb, "b", "a", "tcp", 5201)
    assert a.set_up(k, GRE)[0]
    a.set_up(key(tb, "d", "a", "icmp", 0), ofport(tb, "d"))            # a member's echo: allowed
    groups = security(tb)["groups"]
    no_tcp = {**groups, "web": [r for r in groups["web"] if r["protocol"] != "tcp"]}
    out = a.security_update(no_tcp)
    assert [dict(f.match)["ipv4_src"] for f in out] == ["198.19.1.2", "198.19.1.10"]
    assert all(f.actions == () and f.table == T_FLOW for f in out)
    back = a.security_update(groups)
    assert len(back) == 2 and all(f.actions == (("goto", T_ROUTE),) for f in back)
    assert a.security_update(groups) == []


def test_only_a_port_with_port_security_takes_its_fabric_traffic_through_the_flow_table():
    tb = loads(WEB)
    ags = agents(tb)
    label = {f.match: f for f in ags["h2"].port_up("b", ofport(tb, "b")) if dict(f.match).get("mpls_label")
             and f.table == T_CLASSIFY and dict(f.match)["mpls_label"] < 100_000}
    (b,) = label.values()
    assert b.actions[-2:] == (("metadata", 1), ("goto", T_FLOW))           # b: default group
    (c,) = [f for f in ags["h2"].port_up("c", ofport(tb, "c")) if dict(f.match).get("mpls_label", 1e9) < 100_000]
    assert c.actions[-1] == ("output", ofport(tb, "c"))                    # c: no port security


def test_a_held_packet_from_the_fabric_is_handed_to_its_port():
    tb = loads(WEB)
    a = agents(tb)["h1"]
    k = key(tb, "b", "a", "tcp", 5201)
    assert a.release(k, ofport(tb, "d")) is None                            # from a VM: the tables
    assert a.release(k, GRE)[-1] == ("output", ofport(tb, "a"))
    echo = key(tb, "a", "b", "icmp", 0)
    assert reverse(reverse(k)) == k and reverse(echo)[4] == 0 and reverse(reverse(echo)) == echo


def test_the_agents_configuration_carries_rules_and_members():
    tb = loads(WEB)
    got = security(tb)
    assert got["members"]["web"] == ["198.19.1.10", "198.19.1.20"]
    assert got["groups"]["web"][0] == rule_to_dict(tb.security_group("web").rules[0])
    assert got["groups"]["web"][0]["remote_ip_prefix"] == "198.19.1.0/28"


def test_settle_waits_until_every_agent_stood_still(tmp_path):
    """``netns.wait_quiet``: an agent whose counters moved 0.1 s ago is waited for until
    QUIET_S has passed; quiet agents cost no wait; a busy one is given up on at the
    timeout (the caller records the seconds)."""
    import json
    from vnetbench.kinds.vrouter import netns
    tb = loads(WEB)
    clock = [1000.0]

    def status(h1_t, h2_t):
        for host, t in (("h1", h1_t), ("h2", h2_t)):
            (tmp_path / host).mkdir(exist_ok=True)
            netns.agent_state(tmp_path, host).write_text(json.dumps({"t": t}))

    def sleep(s):
        clock[0] += s
    status(900.0, 999.9)
    waited = netns.wait_quiet(tmp_path, tb, 5.0, now=lambda: clock[0], sleep=sleep)
    assert netns.QUIET_S - 0.1 <= waited <= netns.QUIET_S - 0.1 + 0.02
    status(900.0, 900.0)
    assert netns.wait_quiet(tmp_path, tb, 5.0, now=lambda: clock[0], sleep=sleep) == 0.0

    def busy(s):                    # the agent keeps setting flows up
        clock[0] += s
        status(900.0, clock[0])
    status(900.0, clock[0])
    waited = netns.wait_quiet(tmp_path, tb, 2.0, now=lambda: clock[0], sleep=busy)
    assert 2.0 <= waited <= 2.3
