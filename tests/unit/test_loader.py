"""Loader, schema and model: everything a testbed file decides before anything is built."""

import ipaddress
import json
import re
from collections import Counter
from dataclasses import FrozenInstanceError
from pathlib import Path

import jsonschema
import pytest

from vnetbench import errors
from vnetbench.testbed import loader
from vnetbench.testbed.model import (
    CROSS_HOST, ENCAP_OVERHEAD, SAME_HOST, NetType, Qos, VSwitchKind,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
BAD = sorted((ROOT / "tests/data/bad").glob("*.yaml"))
ONLINE = [0, 1]


def tb(text, online=ONLINE):
    return loader.loads(text, source="t.yaml", online_cpus=online)


def minimal(ntype="vxlan", extra=""):
    """Smallest valid file, so each test states only what it is about."""
    return f"vswitch: ovs\nnetwork: {{type: {ntype}}}\n{extra}"


def error(text, online=ONLINE) -> str:
    with pytest.raises(errors.TestbedFileError) as exc:
        tb(text, online)
    return str(exc.value)


# --- model ---------------------------------------------------------------

def test_overhead_per_type():
    assert {t.value: o for t, o in ENCAP_OVERHEAD.items()} == {
        "flat": 0, "vlan": 0, "vxlan": 50, "gre": 42, "geneve": 50}


def test_only_overlays_are_tunnels():
    assert {t.value for t in NetType if t.is_tunnel} == {"vxlan", "gre", "geneve"}


def test_lookups_and_placement_queries():
    t = tb(minimal())
    assert t.host("h2").name == "h2" and t.vnet("vnet1").name == "vnet1"
    assert t.pair("cross").vms == ("cross-a", "cross-b")
    assert [vm.name for vm in t.vms_on("h2")] == ["cross-b"]
    assert [v.name for v in t.vnets_on("h1")] == ["vnet1"]
    assert t.vm("same-a").nic("vnet1").ip == ipaddress.IPv4Address("198.19.1.1")
    for lookup in (t.host, t.vnet, t.vm, t.pair, t.vm("same-a").nic):
        with pytest.raises(KeyError):
            lookup("nope")


def test_model_is_frozen():
    with pytest.raises(FrozenInstanceError):
        tb(minimal()).hosts[0].name = "x"


# --- schema --------------------------------------------------------------

def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(loader.schema())


def test_packaged_schema_is_the_published_one():
    """schemas/ holds the schema editors read, kinds included: ``make schema`` writes it."""
    published = json.loads((ROOT / "schemas/testbed.schema.json").read_text())
    assert loader.schema() == published, "schemas/testbed.schema.json is stale: run make schema"


def test_schema_enums_match_model():
    s = loader.schema()
    assert s["$defs"]["vswitchKind"]["enum"] == [k.value for k in VSwitchKind]
    assert s["properties"]["network"]["properties"]["type"]["enum"] == [t.value for t in NetType]


# --- defaults ------------------------------------------------------------

def test_defaults():
    t = tb(minimal())
    assert t.name == "ovs-vxlan" and t.source == "t.yaml"
    assert t.vswitch.kind is VSwitchKind.OVS and t.vswitch.datapath == "auto"
    assert [h.name for h in t.hosts] == ["h1", "h2"]
    assert [(v.name, str(v.cidr)) for v in t.vnets] == [("vnet1", "198.19.1.0/24")]
    assert [(p.name, p.placement, p.vnet) for p in t.pairs] == [
        ("same", SAME_HOST, "vnet1"), ("cross", CROSS_HOST, "vnet1")]
    assert [(vm.name, vm.host) for vm in t.vms] == [
        ("same-a", "h1"), ("same-b", "h1"), ("cross-a", "h1"), ("cross-b", "h2")]


def test_vswitch_object_form():
    t = tb("vswitch: {kind: ovs, datapath: netdev}\nnetwork: {type: gre}")
    assert t.vswitch.datapath == "netdev" and t.name == "ovs-gre"


def test_explicit_vms_replace_default_pairs():
    t = tb(minimal(extra="vms: [{name: a, host: h2}]"))
    assert t.pairs == () and [(vm.name, vm.host, vm.cpus) for vm in t.vms] == [("a", "h2", (1,))]


@pytest.mark.parametrize("ntype, first", [
    ("flat", None), ("vlan", 101), ("vxlan", 1001), ("gre", 1001), ("geneve", 1001)])
def test_default_segmentation_ids(ntype, first):
    vnets = tb(minimal(ntype, "vnets: [{name: a}, {name: b}]")).vnets
    want = [None, None] if first is None else [first, first + 1]
    assert [v.segmentation_id for v in vnets] == want
    assert [str(v.cidr) for v in vnets] == ["198.19.1.0/24", "198.19.2.0/24"]


def test_default_segmentation_id_skips_explicit_ones():
    vnets = tb(minimal(extra="vnets: [{name: a, segmentation_id: 1002}, {name: b}]")).vnets
    assert [v.segmentation_id for v in vnets] == [1002, 1003]


@pytest.mark.parametrize("online, want", [
    ([0, 1], [(0,), (1,), (0,), (1,)]),
    ([0, 1, 2, 3], [(0,), (1,), (2,), (3,)]),
    ([5], [(5,)] * 4),
    (None, [(0,), (1,), (0,), (1,)]),
])
def test_host_cpus_spread_round_robin_over_online(online, want):
    hosts = "hosts: [{name: a}, {name: b}, {name: c}, {name: d}]\npairs: []"
    assert [h.cpus for h in tb(minimal(extra=hosts), online).hosts] == want


def test_vm_cpus_default_to_host_and_may_narrow():
    extra = "hosts: [{name: h1, cpus: [0, 1]}]\nvms: [{name: a, host: h1}, {name: b, host: h1, cpus: [1]}]"
    assert [vm.cpus for vm in tb(minimal(extra=extra)).vms] == [(0, 1), (1,)]


# --- addresses -----------------------------------------------------------

def test_underlay_ips_in_host_order():
    assert [str(h.underlay_ip) for h in tb(minimal()).hosts] == ["198.18.0.1", "198.18.0.2"]
    t = tb("vswitch: ovs\nnetwork: {type: vxlan, underlay_cidr: 10.9.0.0/30}")
    assert [str(h.underlay_ip) for h in t.hosts] == ["10.9.0.1", "10.9.0.2"]


def test_underlay_too_small_for_hosts():
    msg = error("vswitch: ovs\nnetwork: {type: vxlan, underlay_cidr: 10.9.0.0/30}\n"
                "hosts: [{name: a}, {name: b}, {name: c}]")
    assert msg.startswith("t.yaml: network.underlay_cidr: 10.9.0.0/30 has room for 2 hosts")


def test_tenant_ips_allocated_in_order():
    assert [str(vm.nics[0].ip) for vm in tb(minimal()).vms] == [
        "198.19.1.1", "198.19.1.2", "198.19.1.3", "198.19.1.4"]


def test_explicit_ips_honoured_and_reserved():
    extra = ("vms:\n  - {name: a, host: h1}\n"
             "  - {name: b, host: h2, vnets: [{name: vnet1, ip: 198.19.1.1}]}\n"
             "  - {name: c, host: h2}")
    ips = {vm.name: str(vm.nics[0].ip) for vm in tb(minimal(extra=extra)).vms}
    assert ips == {"a": "198.19.1.2", "b": "198.19.1.1", "c": "198.19.1.3"}


def test_several_nics_one_per_vnet_entry():
    extra = ("vnets: [{name: a}, {name: b}]\n"
             "vms: [{name: r, host: h1, vnets: [b, {name: a, ip: 198.19.1.9}]}]")
    vm = tb(minimal(extra=extra)).vm("r")
    assert [(n.vnet, str(n.ip)) for n in vm.nics] == [("b", "198.19.2.1"), ("a", "198.19.1.9")]


def test_overlapping_cidrs_between_vnets_allowed():
    extra = ("vnets: [{name: red, cidr: 10.1.0.0/24}, {name: blue, cidr: 10.1.0.0/16}]\n"
             "pairs: [{name: r, placement: same-host, vnet: red},"
             " {name: b, placement: same-host, vnet: blue}]")
    t = tb(minimal(extra=extra))
    assert [str(vm.nics[0].ip) for vm in t.vms] == ["10.1.0.1", "10.1.0.2"] * 2


def test_vnet_runs_out_of_addresses():
    extra = "vnets: [{name: a, cidr: 10.1.0.0/30}]\npairs: [{placement: same-host}, {name: x, placement: same-host}]"
    assert "vnet 'a' (10.1.0.0/30) has no free address left" in error(minimal(extra=extra))


# --- MTU -----------------------------------------------------------------

@pytest.mark.parametrize("ntype, overhead", [(t.value, o) for t, o in ENCAP_OVERHEAD.items()])
def test_tenant_mtu_derived_from_overhead(ntype, overhead):
    for underlay in (1500, 9000):
        net = tb(f"vswitch: ovs\nnetwork: {{type: {ntype}, underlay_mtu: {underlay}}}").network
        assert (net.tenant_mtu, net.overhead) == (underlay - overhead, overhead)


def test_explicit_tenant_mtu_honoured():
    assert tb("vswitch: ovs\nnetwork: {type: vxlan, tenant_mtu: 1400}").network.tenant_mtu == 1400
    assert tb("vswitch: ovs\nnetwork: {type: vxlan, tenant_mtu: 1450}").network.tenant_mtu == 1450


def test_tenant_mtu_too_large_rejected():
    msg = error("vswitch: ovs\nnetwork: {type: vxlan, tenant_mtu: 1451}")
    assert msg.startswith("t.yaml: network.tenant_mtu: 1451 does not fit")
    assert msg.endswith("use tenant_mtu <= 1450 or raise underlay_mtu to >= 1501")


def test_underlay_mtu_too_small_rejected_at_the_boundary():
    assert tb("vswitch: ovs\nnetwork: {type: gre, underlay_mtu: 618}").network.tenant_mtu == 576
    msg = error("vswitch: ovs\nnetwork: {type: gre, underlay_mtu: 617}")
    assert msg.endswith("raise underlay_mtu to at least 618")


# --- MACs ----------------------------------------------------------------

def macs(t):
    return [n.mac for vm in t.vms for n in vm.nics]


def test_macs_unique_per_nic_and_locally_administered():
    extra = "vnets: [{name: a}, {name: b}]\nvms: [{name: r, host: h1, vnets: [a, b]}, {name: s, host: h2}]"
    got = macs(tb(minimal(extra=extra)))
    assert len(set(got)) == 3
    assert all(re.fullmatch(r"02(:[0-9a-f]{2}){5}", m) for m in got)


@pytest.mark.parametrize("name", ["scale-4x32", "two-vnets-same-cidr"])
def test_macs_unique_across_hosts_and_vnets(name):
    got = macs(loader.load(ROOT / f"examples/{name}.yaml"))
    assert len(set(got)) == len(got)


# --- examples ------------------------------------------------------------

def test_examples_cover_every_implemented_combination():
    names = {p.stem for p in EXAMPLES}
    want = {f"{k}-{t.value}" for k in ("linuxbridge", "ovs") for t in NetType} | {"ovn-geneve", "ovn-vxlan"}
    want |= {f"ovs-openflow-{t.value}" for t in NetType} | {"vrouter-gre", "faucet-vlan", "faucet-flat"}
    assert want | {"two-vnets-same-cidr", "scale-4x32", "jumbo-vxlan", "routed-two-subnets", "seed000-svi",
                   "seed000-stick"} == names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads(path):
    assert path.read_text().startswith("# ")
    t = loader.load(path, online_cpus=ONLINE)
    assert t.vms and all(set(vm.cpus) <= set(ONLINE) for vm in t.vms)


def test_two_vnets_same_cidr_example():
    t = loader.load(ROOT / "examples/two-vnets-same-cidr.yaml", online_cpus=ONLINE)
    assert [(v.name, str(v.cidr)) for v in t.vnets] == [("red", "198.19.1.0/24"), ("blue", "198.19.1.0/24")]
    assert len({v.segmentation_id for v in t.vnets}) == 2
    assert Counter((p.vnet, p.placement) for p in t.pairs) == Counter(
        {(v, pl): 1 for v in ("red", "blue") for pl in (SAME_HOST, CROSS_HOST)})


def test_scale_example():
    t = loader.load(ROOT / "examples/scale-4x32.yaml", online_cpus=ONLINE)
    assert ([h.cpus for h in t.hosts], len(t.vnets), len(t.vms)) == ([(0,), (1,), (0,), (1,)], 8, 32)
    assert Counter(vm.host for vm in t.vms) == {f"h{i}": 8 for i in range(1, 5)}
    assert all(len(vm.nics) == 1 for vm in t.vms)
    for vnet in t.vnets:
        assert len({vm.host for vm in t.vms if vm.nics[0].vnet == vnet.name}) > 1


def test_jumbo_example():
    net = loader.load(ROOT / "examples/jumbo-vxlan.yaml").network
    assert (net.underlay_mtu, net.tenant_mtu) == (9000, 8950)


# --- error messages ------------------------------------------------------

@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_file_message(path, monkeypatch):
    """The message names the path as given, so compare from the repo root."""
    monkeypatch.chdir(ROOT)
    expected = path.with_suffix(".expected").read_text()
    assert expected.count("\n") == 1 and expected.endswith("\n")
    rel = path.relative_to(ROOT)
    with pytest.raises(errors.TestbedFileError) as exc:
        loader.load(rel, online_cpus=ONLINE)
    assert str(exc.value) == expected.rstrip("\n")
    assert str(exc.value).startswith(f"{rel}: ") and "; " in str(exc.value)


def test_every_expected_has_its_yaml():
    assert {p.stem for p in BAD} == {p.stem for p in (ROOT / "tests/data/bad").glob("*.expected")}
    assert len(BAD) >= 20


def test_unreadable_file():
    msg = str(pytest.raises(errors.TestbedFileError, loader.load, "no/such.yaml").value)
    assert msg == "no/such.yaml: cannot read file (No such file or directory); check the path"


def test_error_carries_its_parts():
    with pytest.raises(errors.TestbedFileError) as exc:
        tb(minimal(extra="vms: [{name: a, host: h9}]"))
    e = exc.value
    assert (e.path, e.where, e.exit_code) == ("t.yaml", "vms[0].host", 2)
    assert e.fix == "use one of: h1, h2"


def test_openflow_options_default_and_round_trip():
    from vnetbench.testbed.codec import from_dict, to_dict
    t = loader.loads("vswitch: {kind: ovs-openflow, openflow: {fail_mode: standalone, "
                     "controllers: 2}}\nnetwork: {type: gre}\n", online_cpus=ONLINE)
    of = t.vswitch.options
    assert (of.fail_mode, of.controllers, of.match, of.idle_timeout, of.packet_in_rate,
            of.packet_in_burst, of.broadcast_isolation) == ("standalone", 2, "host-pair", 5, 200, 32, False)
    assert from_dict(to_dict(t)) == t
    assert loader.loads("vswitch: ovs\nnetwork: {type: gre}\n").vswitch.options is None


def test_vrouter_options_default_round_trip_and_mtu():
    from vnetbench.testbed.codec import from_dict, to_dict
    t = loader.loads("vswitch: {kind: vrouter, vrouter: {headless: true, hold_time: 2}}\n"
                     "network: {type: gre}\n", online_cpus=ONLINE)
    vr = t.vswitch.options
    assert (vr.headless, vr.hold_time, vr.flow_setup, vr.flow_setup_rate, vr.flow_hold_packets,
            vr.dhcp) == (True, 2, "datapath", 1000, 3, True)
    assert t.network.tenant_mtu == 1500 - 28          # outer IP + GRE + MPLS, no inner Ethernet
    assert from_dict(to_dict(t)) == t
    with pytest.raises(errors.TestbedFileError, match="flow_setup"):
        loader.loads("vswitch: {kind: vrouter, vrouter: {flow_setup: kernel}}\nnetwork: {type: gre}\n",
                     online_cpus=ONLINE)


def test_ovn_options_default_round_trip_and_instances():
    from vnetbench.testbed.codec import from_dict, to_dict
    from vnetbench.kinds.ovn import netns as ovn
    t = loader.loads("vswitch: {kind: ovn, ovn: {northd: 3}}\nnetwork: {type: geneve}\n",
                     online_cpus=ONLINE)
    assert t.vswitch.options.northd == 3 and from_dict(to_dict(t)) == t
    assert ovn.components(t) == ["ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd",
                                 "ovn-northd-2", "ovn-northd-3"]
    assert list(ovn.fault_targets(t)) == ["northd", "northd-2", "northd-3", "sb", "nb"]
    one = loader.loads("vswitch: ovn\nnetwork: {type: geneve}\n", online_cpus=ONLINE)
    assert one.vswitch.options.northd == 1 and list(ovn.fault_targets(one)) == ["northd", "sb", "nb"]


@pytest.mark.parametrize("doc,where", [
    ("vswitch: {kind: ovs-openflow, openflow: {fail_mode: open}}", "vswitch.openflow.fail_mode"),
    ("vswitch: {kind: ovs-openflow, openflow: {idle: 5}}", "vswitch.openflow"),
    ("vswitch: {kind: ovs, openflow: {}}", "vswitch.openflow"),
    ("vswitch: {kind: vrouter, vrouter: {headless: maybe}}", "vswitch.vrouter.headless"),
    ("vswitch: {kind: vrouter, vrouter: {hold: 5}}", "vswitch.vrouter"),
    ("vswitch: {kind: ovs, vrouter: {}}", "vswitch.vrouter"),
    ("vswitch: {kind: ovn, ovn: {northd: 5}}", "vswitch.ovn.northd"),
    ("vswitch: {kind: ovn, ovn: {northd: 0}}", "vswitch.ovn.northd"),
    ("vswitch: {kind: ovn, ovn: {controllers: 2}}", "vswitch.ovn"),
    ("vswitch: {kind: ovs, ovn: {}}", "vswitch.ovn"),
])
def test_bad_kind_options_name_the_field(doc, where):
    ntype = "gre" if "vrouter" in doc else "vxlan"
    with pytest.raises(errors.TestbedFileError) as err:
        loader.loads(doc + f"\nnetwork: {{type: {ntype}}}\n", source="t.yaml")
    assert f"t.yaml: {where}:" in str(err.value)


# --- QoS (bandwidth limit per VM NIC) ----------------------------------------

def qos_file(qos):
    return minimal(extra=f"vms:\n  - {{name: a, host: h1, vnets: [{{name: vnet1, qos: {qos}}}]}}\n"
                         "  - {name: b, host: h2}\n")


def test_qos_default_burst_is_neutrons_80_percent():
    t = tb(qos_file("{max_kbps: 10000}"))
    assert t.vm("a").nics[0].qos == Qos(max_kbps=10000, max_burst_kbits=8000)
    assert t.vm("b").nics[0].qos is None


def test_qos_explicit_burst_and_state_round_trip():
    from vnetbench.testbed.codec import from_dict, to_dict
    t = tb(qos_file("{max_kbps: 10000, max_burst_kbits: 100}"))
    assert t.vm("a").nics[0].qos.max_burst_kbits == 100
    assert from_dict(json.loads(json.dumps(to_dict(t)))) == t


def test_qos_direction_ingress_by_default_egress_when_asked():
    from vnetbench.testbed.codec import from_dict, to_dict
    assert not tb(qos_file("{max_kbps: 10000}")).vm("a").nics[0].qos.egress
    t = tb(qos_file("{max_kbps: 10000, direction: egress}"))
    assert t.vm("a").nics[0].qos.egress and from_dict(json.loads(json.dumps(to_dict(t)))) == t
    msg = error(qos_file("{max_kbps: 10000, direction: up}"))
    assert "vms[0].vnets[0].qos.direction" in msg and "egress" in msg, msg


@pytest.mark.parametrize("qos, where, fix", [
    ("{max_kbps: 1}", "vnets[0].qos.max_kbps", ">= 8"),
    ("{}", "vnets[0].qos", "add it"),
    ("{rate: 5}", "vnets[0]", "qos: {max_kbps"),
])
def test_bad_qos_named(qos, where, fix):
    msg = error(qos_file(qos))
    assert f"vms[0].{where}" in msg and fix in msg, msg
