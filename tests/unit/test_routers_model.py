"""Routers, the external network, external hosts and floating IPs in the model (issue
26): defaults as Neutron gives them, what a kind can realise, the state file's round
trip, and for any routed document either a testbed whose addresses are consistent or
one line naming the field."""

from __future__ import annotations

import ipaddress
from collections import Counter

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from test_capabilities import caps
from vnetbench import errors, kinds
from vnetbench.testbed import loader
from vnetbench.testbed.codec import from_dict, to_dict
from vnetbench.testbed.model import VSwitchKind
from vnetbench.kinds.neutron import l3agent

TWO_SUBNETS = """
vswitch: linuxbridge
network: {type: vxlan}
vnets: [{name: blue}, {name: red}]
vms:
  - {name: a, host: h1, vnets: [blue]}
  - {name: b, host: h2, vnets: [red]}
routers:
  - {name: r1, vnets: [blue, red], external_gateway: true}
floating_ips:
  - {vm: b}
"""


def test_defaults_are_neutrons_where_they_can_be():
    """The router on the first host, its interfaces at each vnet's last address (the
    VMs have the first ones), the external network 198.18.128.0/24 with its gateway
    (the one external host) first, then the router's gateway, then the floating IP."""
    tb = loader.loads(TWO_SUBNETS)
    (r,) = tb.routers
    assert (r.host, [(p.vnet, str(p.ip)) for p in r.ports]) == \
        ("h1", [("blue", "198.19.1.254"), ("red", "198.19.2.254")])
    assert (str(tb.external.cidr), str(tb.external.gateway)) == ("198.18.128.0/24", "198.18.128.1")
    assert [(h.name, str(h.ip)) for h in tb.external_hosts] == [("outside", "198.18.128.1")]
    assert (str(r.gateway), r.snat) == ("198.18.128.2", True)
    assert [(f.vm, f.vnet, str(f.ip)) for f in tb.floating_ips] == [("b", "red", "198.18.128.3")]
    assert [str(vm.nics[0].ip) for vm in tb.vms] == ["198.19.1.1", "198.19.2.1"]


def test_a_router_carries_its_vnets_to_its_host():
    """h1 has no VM on red, but its router does: the vSwitch there carries red (bridges,
    tunnels, flood lists follow ``vnets_on``). The router is attached after the VMs, so a
    VM's position (its port names) is unchanged."""
    tb = loader.loads(TWO_SUBNETS)
    assert [v.name for v in tb.vnets_on("h1")] == ["blue", "red"]
    assert [v.name for v in tb.vnets_on("h2")] == ["red"]
    assert [v.name for v in tb.attached] == ["a", "b", "r1"]
    assert tb.attached[:2] == tb.vms
    macs = [n.mac for v in tb.attached for n in v.nics] + [tb.routers[0].gateway_mac] + \
        [h.mac for h in tb.external_hosts]
    assert len(set(macs)) == len(macs)


def test_state_file_round_trip():
    tb = loader.loads(TWO_SUBNETS)
    assert from_dict(to_dict(tb)) == tb
    plain = loader.loads("vswitch: ovs\nnetwork: {type: vxlan}\n")
    old = to_dict(plain)
    for key in ("routers", "external", "external_hosts", "floating_ips"):
        old.pop(key)                        # a state file from before routers
    assert from_dict(old) == plain


def test_nat_input_is_the_routers_as_neutron_knows_it():
    tb = loader.loads(TWO_SUBNETS)
    r = tb.routers[0]
    assert l3agent.nat_spec(r, tb.floating_ips, tb) == {
        "device": "qg", "gateway": "198.18.128.2", "snat": True,
        "floating_ips": [["198.19.2.1", "198.18.128.3"]]}


def test_a_router_without_gateway_has_no_external_network():
    tb = loader.loads(TWO_SUBNETS.replace(", external_gateway: true", "").split("floating_ips")[0])
    assert tb.external is None and not tb.external_hosts and tb.routers[0].gateway is None
    assert tb.gateway_hosts() == []


@pytest.mark.parametrize("kind", [k.value for k in VSwitchKind])
def test_each_kind_builds_routers_or_says_why_not(kind):
    """Kinds that route as Neutron's legacy agent does (or through an external router)
    build the testbed; the others refuse it in one line naming what is missing."""
    net = kinds.get(kind).preferred_network.value
    tb = loader.loads(TWO_SUBNETS.replace("linuxbridge", kind).replace("vxlan", net), source="t.yaml")
    reason = caps().why_not_routers(tb)
    if kinds.get(kind).routers and kinds.get(kind).no_north_south:      # east-west only
        assert reason == kinds.get(kind).no_north_south and "\n" not in reason, reason
        east_west = TWO_SUBNETS.replace(", external_gateway: true", "").split("floating_ips")[0]
        tb = loader.loads(east_west.replace("linuxbridge", kind).replace("vxlan", net), source="t.yaml")
        assert caps().why_not_routers(tb) is None
    elif kinds.get(kind).routers:
        assert reason is None
    else:
        assert reason == kinds.get(kind).no_routers and "\n" not in reason, reason
        with pytest.raises(errors.UnsupportedError, match=f"t.yaml: {kind}"):
            caps().require(tb)


def test_routers_with_security_groups_build_where_the_kind_has_both():
    """Router ports are unfiltered (port security off), as Neutron's router interfaces:
    the testbed builds wherever the kind realises routers and security groups."""
    tb = loader.loads(TWO_SUBNETS + "security_groups: []\n", source="t.yaml")
    assert caps().why_not_routers(tb) is None
    assert all(not n.port_security for r in tb.attached if r.name == "r1" for n in r.nics)
    assert all(n.port_security for v in tb.vms for n in v.nics)


# --- any routed document ----------------------------------------------------------

VNETS = ["blue", "red", "green"]


@st.composite
def routed_docs(draw):
    vnets = [{"name": v} for v in VNETS]
    if draw(st.booleans()):
        vnets[1]["cidr"] = draw(st.sampled_from(["198.19.1.0/24", "198.19.9.0/30", "198.18.128.0/25"]))
    vms = [{"name": f"vm{i}", "host": draw(st.sampled_from(["h1", "h2"])),
            "vnets": [draw(st.sampled_from(VNETS * 12 + ["nope"]))]} for i in range(draw(st.integers(2, 4)))]
    for vm in vms:
        if draw(st.integers(0, 9)) == 0:
            vm["vnets"] = [{"name": vm["vnets"][0], "ip": draw(st.sampled_from(
                ["198.19.1.254", "198.19.2.254", "198.19.1.1", "198.19.3.7"]))}]
    routers, pool = [], draw(st.permutations(VNETS))
    cut = draw(st.integers(1, 3))
    shares = [pool[:cut], pool[cut:]] if draw(st.integers(0, 7)) else [pool, pool[:1]]  # a clash, rarely
    for i, share in enumerate(s for s in shares[:draw(st.integers(0, 2))] if s):
        r = {"name": draw(st.sampled_from([f"r{i}"] * 8 + ["vm0", "outside"])), "vnets": share}
        for key, values in (("host", ["h1", "h2", "h2", "h9"]), ("external_gateway", [True, True, False]),
                            ("snat", [True, False]), ("gateway_ip", ["198.18.128.1", "198.18.128.9", "10.1.1.1"])):
            if draw(st.integers(0, 3)) == 0:
                r[key] = draw(st.sampled_from(values))
        routers.append(r)
    doc = {"vswitch": "ovs", "network": {"type": "vxlan"}, "vnets": vnets, "vms": vms, "routers": routers}
    if draw(st.booleans()):
        doc["external"] = {k: draw(st.sampled_from(v)) for k, v in
                           (("cidr", ["198.18.128.0/24"] * 4 + ["198.18.129.0/30", "198.19.2.0/24"]),
                            ("gateway", ["198.18.128.1"] * 4 + ["198.18.128.200", "198.18.129.1"]))
                           if draw(st.booleans())}
    if draw(st.integers(0, 3)) == 0:
        doc["external_hosts"] = [{"name": n, **({"ip": ip} if ip else {})} for n, ip in draw(st.lists(
            st.tuples(st.sampled_from(["outside", "x2", "vm1"]), st.sampled_from([None, "198.18.128.1", "198.18.128.4"])),
            max_size=3))]
    if draw(st.booleans()):
        doc["floating_ips"] = [{"vm": draw(st.sampled_from(["vm0", "vm1", "vm1", "vm9"])),
                                **({"ip": draw(st.sampled_from(["198.18.128.3", "198.18.128.2"]))}
                                   if draw(st.booleans()) else {})} for _ in range(draw(st.integers(1, 2)))]
    return doc


@settings(max_examples=300, deadline=None, derandomize=False, database=None)
@given(routed_docs())
def test_any_routed_document_loads_consistently_or_names_the_field(doc):
    try:
        tb = loader.loads(yaml.safe_dump(doc), source="t.yaml")
    except errors.TestbedFileError as exc:
        text = str(exc)
        assert text.startswith("t.yaml: ") and "\n" not in text and "; " in text, text
        return
    for vnet in tb.vnets:               # every address of a vnet is one holder's, inside it
        held = [n.ip for v in tb.attached for n in v.nics if n.vnet == vnet.name]
        assert len(held) == len(set(held)) and all(ip in vnet.cidr for ip in held)
        assert sum(1 for r in tb.routers for p in r.ports if p.vnet == vnet.name) <= 1
    for r in tb.routers:                # no router joins overlapping subnets
        cidrs = [tb.vnet(p.vnet).cidr for p in r.ports]
        assert not any(a.overlaps(b) for i, a in enumerate(cidrs) for b in cidrs[i + 1:])
    if tb.external is not None:         # every external address once, inside the network
        ext = [h.ip for h in tb.external_hosts] + [r.gateway for r in tb.routers if r.gateway] + \
            [f.ip for f in tb.floating_ips]
        assert len(ext) == len(set(ext)) and all(ip in tb.external.cidr for ip in ext)
        assert not any(tb.external.cidr.overlaps(v.cidr) for v in tb.vnets)
    for f in tb.floating_ips:           # a floating IP's vnet is routed out
        assert tb.router_of(f.vnet).gateway is not None
    assert Counter(f.vm + "/" + f.vnet for f in tb.floating_ips).most_common(1)[0][1] <= 1 \
        if tb.floating_ips else True
    names = [v.name for v in tb.attached] + [h.name for h in tb.external_hosts]
    assert len(names) == len(set(names))
    assert from_dict(to_dict(tb)) == tb
    assert all(isinstance(r.gateway, (ipaddress.IPv4Address, type(None))) for r in tb.routers)


def test_ovn_writes_the_routers_as_neutrons_ovn_driver_does():
    """One Logical_Router, a router port per interface with its peer of type router on
    the vnet's switch, the gateway port on the router's host's chassis, a default route,
    SNAT per routed subnet and dnat_and_snat per floating IP (centralized)."""
    from vnetbench.kinds.ovn import routers
    tb = loader.loads(TWO_SUBNETS.replace("linuxbridge", "ovn"))
    tx = " ".join(routers.transaction(tb, "abc123")).split(" -- ")
    assert "lr-add r1" in tx and "lsp-set-type rp-r1-red router" in tx
    assert "lrp-add r1 lrp-r1-blue 02:76:6e:00:02:00 198.19.1.254/24" in tx
    assert "lsp-set-options rp-r1-blue router-port=lrp-r1-blue" in tx
    assert "lsp-set-options rp-r1-ext_net router-port=lrp-r1-ext_net nat-addresses=router" in tx
    assert "lsp-set-options ln-ext_net network_name=extnet" in tx
    assert "lrp-set-gateway-chassis lrp-r1-ext_net abc123-h1 1" in tx
    assert "lr-route-add r1 0.0.0.0/0 198.18.128.1" in tx
    assert {t for t in tx if t.startswith("lr-nat-add")} == {
        "lr-nat-add r1 snat 198.18.128.2 198.19.1.0/24", "lr-nat-add r1 snat 198.18.128.2 198.19.2.0/24",
        "lr-nat-add r1 dnat_and_snat 198.18.128.3 198.19.2.1"}
    assert [v.name for v in tb.attached] == ["a", "b"]      # no namespace: a logical router
    assert routers.remove_interface("r1", "red") == ["lrp-del", "lrp-r1-red", "--", "lsp-del", "rp-r1-red"]


def test_a_floating_ip_pair_is_the_outside_to_a_vm_of_its_own_with_a_floating_ip():
    """``path: floating-ip``: the external host first, then a VM made for the pair with a
    floating IP of its own (after any declared one); its traffic is addressed there."""
    from types import SimpleNamespace
    from vnetbench.rally_plugins.context import testbed_yaml
    from vnetbench.testbed.base import RunDeployment
    tb = loader.loads(testbed_yaml("ovs", "vxlan", None, ["same-host", "cross-host"], path="floating-ip"),
                      source="t.yaml", online_cpus=[0, 1])
    same, cross = tb.pairs
    assert same.vms == ("outside", "same-fip-a") and cross.vms == ("outside", "cross-fip-a")
    assert [(v.name, v.host) for v in tb.vms] == [("same-fip-a", "h1"), ("cross-fip-a", "h2")]
    assert [(f.vm, str(f.ip)) for f in tb.floating_ips] == [("same-fip-a", "198.18.128.3"),
                                                            ("cross-fip-a", "198.18.128.4")]
    dep = RunDeployment.__new__(RunDeployment)
    dep.testbed, dep.run = tb, SimpleNamespace(run_id="x")
    assert dep.reach("outside", "cross-fip-a") == "198.18.128.4"       # from outside: the floating IP
    assert dep.reach("same-fip-a", "cross-fip-a") == dep.ip("cross-fip-a")   # inside: the fixed one
    assert dep.reach("cross-fip-a", "outside") == "198.18.128.1"
    no_gw = TWO_SUBNETS.split("floating_ips")[0].replace(", external_gateway: true", "")
    with pytest.raises(errors.TestbedFileError, match=r"pairs\[0\].path: vnet 'blue' has no router with an external"):
        loader.loads(no_gw + "pairs: [{placement: same-host, vnet: blue, path: floating-ip}]\n", source="t.yaml")


def test_the_sg_agent_asks_for_the_routers_ports_and_the_server_leaves_them_out():
    """Neutron's OVS agent asks the server about every port of its bridge; the reply has
    no security information for a router interface, so the agent's driver takes it as a
    trusted port. The payload carries the router's ports apart (``trusted``)."""
    from vnetbench.kinds.neutron import sg as neutron_sg
    tb = loader.loads(TWO_SUBNETS + "security_groups: []\n", source="t.yaml")
    dev = lambda vm, n: f"{vm}-{n}"              # noqa: E731
    on_h1 = neutron_sg.payload(tb, "abc123", "h1", device=dev, trusted=True)
    assert on_h1["trusted"] == [neutron_sg.port_id("abc123", "r1", 0), neutron_sg.port_id("abc123", "r1", 1)]
    assert not set(on_h1["trusted"]) & set(on_h1["devices"])
    assert neutron_sg.payload(tb, "abc123", "h2", device=dev, trusted=True)["trusted"] == []
    assert "trusted" not in neutron_sg.payload(tb, "abc123", "h1", device=dev)     # linuxbridge's agent
