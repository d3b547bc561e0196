"""Security groups in the testbed model (issue 27): loaded and refused as Neutron's API
does, kept by the state codec, and judged by the reference semantics every kind's
realisation is checked against."""

import dataclasses
import ipaddress
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vnetbench import errors
from vnetbench.testbed import codec, secgroups
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import SecurityGroup, SgRule
from vnetbench.testbed.secgroups import Packet

HEAD = "vswitch: ovs\nnetwork: {type: vxlan}\n"
WEB = HEAD + (Path(__file__).parent.parent / "data" / "secgroups" / "web.yaml").read_text()


def nic(tb, vm):
    return tb.vm(vm).nics[0]


def tcp(tb, src, dst, port):
    return secgroups.allowed(tb, nic(tb, src), nic(tb, dst), Packet("tcp", nic(tb, src).ip, nic(tb, dst).ip, port))


def ping(tb, src, dst):
    return secgroups.allowed(tb, nic(tb, src), nic(tb, dst), Packet("icmp", nic(tb, src).ip, nic(tb, dst).ip, 8, 0))


# --- loading ------------------------------------------------------------------

def test_no_security_groups_key_filters_nothing():
    tb = loads(HEAD)
    assert tb.security_groups == () and not tb.port_security
    assert all(not n.port_security and n.security_groups == () for vm in tb.vms for n in vm.nics)


def test_an_empty_list_puts_every_port_in_neutrons_default_group():
    tb = loads(HEAD + "security_groups: []\n")
    assert tb.port_security
    assert tb.security_groups == (SecurityGroup("default", (SgRule("ingress", remote_group="default"),
                                                            SgRule("egress"))),)
    assert all(n.port_security and n.security_groups == ("default",) for vm in tb.vms for n in vm.nics)


def test_a_declared_group_gets_neutrons_egress_rule_unless_it_declares_egress():
    tb = loads(WEB)
    assert tb.security_group("web").rules[-1] == SgRule("egress")
    only = loads(HEAD + "security_groups: [{name: x, rules: [{direction: egress, protocol: udp}]}]\n"
                 "vms: [{name: a, host: h1, vnets: [{name: vnet1, security_groups: [x]}]}]\n")
    assert only.security_group("x").rules == (SgRule("egress", "udp"),)


def test_ports_keep_their_own_setting():
    tb = loads(WEB)
    assert [(n.port_security, n.security_groups) for n in (nic(tb, v) for v in "abcde")] == [
        (True, ("web",)), (True, ("default",)), (False, ()), (True, ("web",)), (True, ())]


def test_a_tcp_range_defaults_its_max_to_its_min_and_any_means_no_protocol():
    tb = loads(HEAD + "security_groups: [{name: x, rules: [{direction: ingress, protocol: tcp, "
                      "port_range_min: 22}, {direction: ingress, protocol: any}]}]\n")
    assert [r for r in tb.security_group("x").rules][:2] == [
        SgRule("ingress", "tcp", 22, 22), SgRule("ingress", None)]


REFUSED = [
    ("security_groups: [{name: x}, {name: x}]", "security_groups[1].name", "duplicate name"),
    ("security_groups: [{name: x, rules: [{direction: ingress, port_range_min: 22}]}]",
     "security_groups[0].rules[0].port_range_min", "needs a protocol"),
    ("security_groups: [{name: x, rules: [{direction: ingress, protocol: tcp, port_range_max: 22}]}]",
     "security_groups[0].rules[0].port_range_min", "without port_range_min"),
    ("security_groups: [{name: x, rules: [{direction: ingress, protocol: udp, port_range_min: 0}]}]",
     "security_groups[0].rules[0].port_range_min", "port 0"),
    ("security_groups: [{name: x, rules: [{direction: ingress, protocol: tcp, port_range_min: 90, port_range_max: 80}]}]",
     "security_groups[0].rules[0].port_range_max", "below port_range_min 90"),
    ("security_groups: [{name: x, rules: [{direction: ingress, protocol: icmp, port_range_min: 300}]}]",
     "security_groups[0].rules[0].port_range_min", "not an ICMP type"),
    ("security_groups: [{name: x, rules: [{direction: ingress, protocol: icmp, port_range_max: 0}]}]",
     "security_groups[0].rules[0].port_range_min", "without a type"),
    ("security_groups: [{name: x, rules: [{direction: ingress, remote_group: x, remote_ip_prefix: 10.0.0.0/8}]}]",
     "security_groups[0].rules[0].remote_group", "together"),
    ("security_groups: [{name: x, rules: [{direction: ingress, remote_group: y}]}]",
     "security_groups[0].rules[0].remote_group", "'y' is not declared"),
    ("security_groups: [{name: x, rules: [{direction: ingress, remote_ip_prefix: 10.0.0.1/8}]}]",
     "security_groups[0].rules[0].remote_ip_prefix", "not a valid network"),
    ("vms: [{name: a, host: h1, vnets: [{name: vnet1, port_security: false, security_groups: [default]}]}]",
     "vms[0].vnets[0].security_groups", "port_security false"),
    ("security_groups: []\nvms: [{name: a, host: h1, vnets: [{name: vnet1, security_groups: [web]}]}]",
     "vms[0].vnets[0].security_groups", "'web' is not declared"),
    ("security_groups: [{name: x, rules: [{direction: sideways}]}]",
     "security_groups[0].rules[0].direction", "not allowed"),
]


@pytest.mark.parametrize("text, where, problem", REFUSED, ids=[r[1] + ":" + r[2] for r in REFUSED])
def test_what_neutron_refuses_is_refused_naming_the_field(text, where, problem):
    with pytest.raises(errors.TestbedFileError) as exc:
        loads(HEAD + text + "\n", source="t.yaml")
    line = str(exc.value)
    assert "\n" not in line and line.startswith("t.yaml") and where in line and problem in line, line


def test_the_state_codec_keeps_groups_and_port_settings():
    for text in (HEAD, WEB, HEAD + "security_groups: []\n"):
        tb = loads(text)
        assert codec.from_dict(codec.to_dict(tb)) == tb


def test_a_state_file_from_before_security_groups_loads_unfiltered():
    d = codec.to_dict(loads(HEAD))
    d.pop("security_groups")
    for vm in d["vms"]:
        for n in vm["nics"]:
            n.pop("port_security"), n.pop("security_groups")
    assert codec.from_dict(d) == loads(HEAD)


# --- the reference semantics ----------------------------------------------------

def test_neutrons_default_group_admits_its_members_on_anything():
    tb = loads(HEAD + "security_groups: []\n")
    for a, b in (("same-a", "same-b"), ("cross-b", "same-a")):
        assert tcp(tb, a, b, 5201) and ping(tb, a, b)


def test_an_allowed_tcp_port_passes_and_another_does_not():
    tb = loads(WEB)
    assert tcp(tb, "b", "a", 5201) and tcp(tb, "b", "a", 5210)
    assert not tcp(tb, "b", "a", 5211) and not tcp(tb, "b", "a", 22)


def test_remote_ip_prefix_is_matched_against_the_source():
    tb = loads(WEB)
    assert tcp(tb, "c", "a", 5201)            # 198.19.1.3 is in 198.19.1.0/28
    assert not tcp(tb, "e", "a", 5201)        # 198.19.1.30 is not (and e sends nothing anyway)
    assert not tcp(tb, "d", "a", 5201)        # 198.19.1.20: outside the /28


def test_a_remote_group_rule_admits_a_member_and_not_a_non_member():
    tb = loads(WEB)
    assert ping(tb, "d", "a")                 # d is in web
    assert not ping(tb, "b", "a")             # b is in default only
    assert not secgroups.allowed(tb, nic(tb, "d"), nic(tb, "a"),
                                 Packet("icmp", nic(tb, "d").ip, nic(tb, "a").ip, 0, 0))   # not type 8


def test_default_denies_ingress_from_outside_the_group_and_a_port_without_groups_drops_all():
    tb = loads(WEB)
    assert not tcp(tb, "a", "b", 80)          # a (web) -> b (default): b admits default members only
    assert tcp(tb, "c", "b", 80) is False     # c has no port security: b still filters what it receives
    assert not tcp(tb, "e", "c", 80)          # e has no groups: nothing leaves it
    assert not tcp(tb, "b", "e", 80)          # nor reaches it


def test_a_port_without_port_security_is_not_filtered():
    tb = loads(WEB)
    assert tcp(tb, "b", "c", 9) and ping(tb, "a", "c")
    assert secgroups.allowing_rule(tb, nic(tb, "c"), "ingress", Packet("udp", nic(tb, "a").ip,
                                                                      nic(tb, "c").ip, 1)) is secgroups.OPEN
    assert secgroups.may_spoof(nic(tb, "c")) and not secgroups.may_spoof(nic(tb, "a"))


RULES = st.builds(
    lambda direction, proto, ports, remote: SgRule(direction, proto, *(ports if proto in ("tcp", "udp") else
                                                                       (None, None)),
                                                   remote_ip_prefix=remote),
    st.sampled_from(["ingress", "egress"]), st.sampled_from([None, "tcp", "udp", "icmp"]),
    st.tuples(st.integers(1, 100), st.integers(0, 100)).map(lambda t: (t[0], t[0] + t[1])),
    st.sampled_from([None, ipaddress.IPv4Network("198.19.1.0/28"), ipaddress.IPv4Network("198.19.1.16/28")]))
PACKETS = st.builds(lambda proto, port, s, d: (proto, port, s, d), st.sampled_from(["tcp", "udp", "icmp"]),
                    st.integers(1, 210), st.sampled_from("abde"), st.sampled_from("abde"))


@settings(max_examples=150, deadline=None)
@given(st.lists(RULES, max_size=4), RULES, PACKETS)
def test_a_rule_added_to_a_group_never_denies_what_it_allowed(rules, extra, packet):
    """Security groups only allow: the union of rules is monotone."""
    base = loads(WEB)
    groups = tuple(dataclasses.replace(g, rules=tuple(rules) + (SgRule("egress"),)) if g.name == "web" else g
                   for g in base.security_groups)
    before = dataclasses.replace(base, security_groups=groups)
    after = dataclasses.replace(before, security_groups=tuple(
        dataclasses.replace(g, rules=g.rules + (extra,)) if g.name == "web" else g for g in groups))
    proto, port, s, d = packet
    pkt = Packet(proto, nic(base, s).ip, nic(base, d).ip, port, 0)
    if secgroups.allowed(before, nic(before, s), nic(before, d), pkt):
        assert secgroups.allowed(after, nic(after, s), nic(after, d), pkt)


# --- Neutron's RPC payload (vnetbench.kinds.neutron.sg) ---------------------------

def test_the_payload_is_neutrons_rpc_reply_for_the_hosts_ports():
    from vnetbench.kinds.neutron import sg as neutron_sg
    tb = loads(WEB)
    p = neutron_sg.payload(tb, "r1", "h1", device=lambda vm, n: f"tp-{vm}-{n}", bridge=lambda v: "br-" + v)
    ports = {d["device"]: d for d in p["devices"].values()}
    assert sorted(ports) == ["tp-a-0", "tp-d-0", "tp-e-0"]          # h1's VMs only
    a, web = ports["tp-a-0"], neutron_sg.sg_id("r1", "web")
    assert a["id"] == neutron_sg.port_id("r1", "a", 0) and a["fixed_ips"] == ["198.19.1.10"]
    assert a["security_groups"] == [web] and a["port_security_enabled"] and a["bridge"] == "br-vnet1"
    assert a["security_group_source_groups"] == [web]
    assert ports["tp-e-0"]["security_groups"] == [] and ports["tp-e-0"]["port_security_enabled"]
    assert p["security_groups"][web] == [
        {"direction": "ingress", "ethertype": "IPv4", "stateful": True, "security_group_id": web,
         "protocol": "tcp", "port_range_min": 5201, "port_range_max": 5210, "source_ip_prefix": "198.19.1.0/28"},
        {"direction": "ingress", "ethertype": "IPv4", "stateful": True, "security_group_id": web,
         "protocol": "icmp", "port_range_min": 8, "remote_group_id": web},
        {"direction": "egress", "ethertype": "IPv4", "stateful": True, "security_group_id": web}]
    # remote-group members are every web port of the testbed (d on h1, and a), as (ip, mac)
    assert p["sg_member_ips"] == {web: {"IPv4": [["198.19.1.10", tb.vm("a").nics[0].mac],
                                                 ["198.19.1.20", tb.vm("d").nics[0].mac]]}}
    assert neutron_sg.sg_id("r1", "web") != neutron_sg.sg_id("r2", "web")     # per run


def test_an_egress_prefix_is_the_destination():
    from vnetbench.kinds.neutron import sg as neutron_sg
    rule = SgRule("egress", "udp", 53, 53, ipaddress.IPv4Network("198.19.9.0/24"))
    assert neutron_sg.rule_dict("r", "g", rule)["dest_ip_prefix"] == "198.19.9.0/24"


def test_records_name_the_firewall_or_say_off():
    from vnetbench.results.provenance import _firewall
    assert _firewall(loads(HEAD)) == "off"
    assert "IptablesFirewallDriver" in _firewall(loads("vswitch: linuxbridge\nnetwork: {type: vxlan}\n"
                                                       "security_groups: []\n"))


def test_the_rally_context_turns_security_groups_on_with_neutrons_default_group():
    from vnetbench.rally_plugins.context import testbed_yaml
    on = loads(testbed_yaml("linuxbridge", "vxlan", None, ["same-host"], security_groups=True))
    off = loads(testbed_yaml("linuxbridge", "vxlan", None, ["same-host"]))
    assert on.port_security and [g.name for g in on.security_groups] == ["default"]
    assert not off.port_security


# --- the functional rows' verdicts --------------------------------------------------

def test_sg_admits_passes_fails_or_cannot_measure():
    from vnetbench.functional import verdict as v
    ok, no = {"what": "x", "open": True}, {"what": "y", "open": False}
    assert v.sg_admits({"allowed": [ok], "denied": [no]}).status is v.Status.PASS
    assert v.sg_admits({"allowed": [ok], "denied": [ok, no]}).status is v.Status.FAIL
    assert v.sg_admits({"allowed": [no], "denied": [no]}).status is v.Status.ERROR


def test_rule_latency_reports_the_median_and_names_the_slowest():
    from vnetbench.functional import verdict as v
    lat = [float(x) for x in range(1, 21)]
    got = v.sg_rule_latency({"latencies_ms": lat, "knock_ms": 5, "timeout_s": 10})
    assert got.status is v.Status.PASS and got.value in (10.0, 11.0) and got.extra["max_ms"] == 20.0
    assert "slowest 20.0 ms (= p99 of 20)" in got.detail
    missed = v.sg_rule_latency({"latencies_ms": lat[:19] + [None], "knock_ms": 5, "timeout_s": 10})
    assert missed.status is v.Status.FAIL and "1 rules never" in missed.detail
    assert v.sg_rule_latency({"latencies_ms": [None], "knock_ms": 5, "timeout_s": 10}).status is v.Status.FAIL


def test_rule_removal_stops_or_fails_open():
    from vnetbench.functional import verdict as v
    base = {"before": 90, "stopped_ms": 40.0, "window_s": 2.0}
    assert v.sg_rule_removal({**base, "after": 0}).status is v.Status.PASS
    assert v.sg_rule_removal({**base, "after": 150}).status is v.Status.FAIL_OPEN
    assert v.sg_rule_removal({**base, "before": 0, "after": 0}).status is v.Status.ERROR


def test_ovn_port_groups_and_acls_are_neutrons():
    """The OVN realisation's NB transaction: Neutron's drop group with every filtered port,
    a port group per security group with its ports, and the ACLs Neutron's OVN driver
    code writes for each rule (run with the system's python3-neutron)."""
    from vnetbench.kinds.neutron import sg as neutron_sg
    from vnetbench.kinds.ovn import acls
    missing = neutron_sg.neutron_python_missing()
    if missing:
        pytest.skip(missing)
    tb = loads(WEB)
    tx = acls.transaction(tb, "r1", lambda vm, k: f"lsp-{vm}-{k}")
    pg = "pg_" + neutron_sg.sg_id("r1", "web").replace("-", "_")
    text = " ".join(tx)
    assert "pg-add neutron_pg_drop lsp-a-0 lsp-b-0 lsp-d-0 lsp-e-0 --" in text     # not c: port security off
    assert f"pg-add {pg} lsp-a-0 lsp-d-0 --" in text
    assert (f"--type=port-group acl-add {pg} to-lport 1002 outport == @{pg} && ip4 && "
            f"ip4.src == 198.19.1.0/28 && tcp && tcp.dst >= 5201 && tcp.dst <= 5210 allow-related") in text
    assert "icmp4 && icmp4.type == 8" in text and f"ip4.src == ${pg}_ip4" in text
    assert "acl-add neutron_pg_drop to-lport 1001 outport == @neutron_pg_drop && ip drop" in text
    upd = " ".join(acls.update_transaction(tb, "r1", ["web"]))
    assert upd.startswith(f"--type=port-group acl-del {pg} --") and upd.count("acl-add") == 3
