"""heat-templates/: every template parses as HOT and its resources and properties match
Heat's own resource schemas (Debian's python3-heat, offline); every environment file
matches the template it is for."""


import pytest

from vnetbench.testbed.openstack import hot

TEMPLATES = sorted(hot.TEMPLATES.glob("*.yaml"))
ENVS = sorted((hot.TEMPLATES / "env").glob("*.yaml"))
MAIN = hot.TEMPLATES / "testbed.yaml"


@pytest.fixture(scope="module")
def view():
    return hot.heat_view([*TEMPLATES, *ENVS])


def test_there_are_templates_and_environments():
    assert {p.name for p in TEMPLATES} >= {"testbed.yaml", "pair.yaml"}
    assert {p.stem for p in ENVS} >= {"ml2-ovs", "ml2-ovn", "linuxbridge", "tungsten-fabric",
                                      "openflow-controller"}


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_template_is_hot_2021_04_16(view, path):
    entry = view["files"][str(path)]
    assert "error" not in entry, entry.get("error")
    assert entry["kind"] == "template"
    assert entry["template_class"] == "HOTemplate20210416"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_template_matches_heat_schemas(view, env):
    registry = hot.registry(env, view)
    for path in TEMPLATES:
        assert hot.Checker(path, view, registry).check() == []


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_environment_matches_the_template(view, env):
    assert view["files"][str(env)]["kind"] == "environment"
    assert hot.environment_problems(env, view, MAIN) == []
    assert "VNB::Pair" in hot.registry(env, view)


BROKEN = """heat_template_version: 2021-04-16
parameters:
  n: {type: number, default: 1}
conditions:
  big: {greater: [{get_param: n}, 2]}
resources:
  net:
    type: OS::Neutron::ProviderNet
    properties: {network_type: vxlan, segmentation_idd: 5}
  port:
    type: OS::Neutron::Port
    properties: {network: {get_resource: nett}, port_security_enabled: "maybe"}
  group:
    type: OS::Nova::ServerGroup
    properties: {policies: [same-host]}
  server:
    type: OS::Nova::Server
    properties: {image: x, networks: [{port: {get_resource: port}, portt: 1}]}
  thing:
    type: OS::Nova::NoSuchThing
outputs:
  ip: {value: {get_attr: [port, fixed_ipz]}}
"""


def test_the_check_catches_what_heat_would_reject(tmp_path):
    """The schema check is Heat's: each mistake below is reported, and Heat's own
    parser rejects an unknown HOT version."""
    path, old = tmp_path / "broken.yaml", tmp_path / "old.yaml"
    path.write_text(BROKEN)
    old.write_text("heat_template_version: 2099-01-01\nresources: {}\n")
    view = hot.heat_view([path, old])
    assert "error" in view["files"][str(old)]
    problems = "\n".join(hot.Checker(path, view, {}).check())
    for needle in ("'greater' is not a condition function", "'segmentation_idd' is not in Heat's schema",
                   "get_resource 'nett'", "'maybe' is not a boolean", "'same-host' not in",
                   "required property 'flavor' missing", "'portt' is not in Heat's schema",
                   "'OS::Nova::NoSuchThing' is unknown to Heat", "attribute 'fixed_ipz'"):
        assert needle in problems, f"{needle!r} not reported in:\n{problems}"



# -- Heat's engine resolves the templates with what the backend passes -------------------------

from vnetbench.rally_plugins import context as rally_context  # noqa: E402
from vnetbench.testbed.loader import load, loads  # noqa: E402
from vnetbench.testbed.openstack import stack as st  # noqa: E402

RID = "0a1b2c"
EXAMPLES = hot.TEMPLATES.parent / "examples"


def _params(nettype, placements=("same-host", "cross-host"), admin=True, **opts):
    tb = loads(rally_context.testbed_yaml("ovs", nettype, None, list(placements)), source="<t>",
               online_cpus=[0, 1])
    return st.parameters(tb, RID, st.Options(cloud="c", **opts), admin, "ssh-ed25519 AAAA k")


def _two_vnets():
    tb = load(EXAMPLES / "two-vnets-same-cidr.yaml", online_cpus=[0, 1])
    return {**st.parameters(tb, RID, st.Options(cloud="c"), True, "k"),
            "qos_max_kbps": 10000, "qos_max_burst_kbps": 8000}


ISOLATION = """
vswitch: ovs
network: {type: vxlan}
vnets:
  - {name: red, cidr: 198.19.1.0/24}
  - {name: blue, cidr: 198.19.1.0/24}
vms:
  - {name: red-1, host: h1, vnets: [red]}
  - {name: red-2, host: h2, vnets: [{name: red, qos: {max_kbps: 10000}}]}
  - {name: blue-1, host: h1, vnets: [blue]}
"""


def _vm_list():
    tb = loads(ISOLATION, source="<iso>", online_cpus=[0, 1])
    return st.parameters(tb, RID, st.Options(cloud="c"), True, "k")


LAYOUT = [{"name": "red-1", "vnet": "a", "host": 0, "zone_host": "", "mac": "fa:0a:1b:2c:00:00",
           "ip": "198.19.1.1", "qos": False},
          {"name": "blue-2", "vnet": "b", "host": 1, "zone_host": "nova:cmp2", "mac": "",
           "ip": "", "qos": True}]
VM = {"index": "1", "layout": LAYOUT, "prefix": f"vnb-{RID}", "networks": {"a": "na", "b": "nb"},
      "subnets": {"a": "sa", "b": ""}, "groups": ["g0", "g1"], "qos_policy": "p", "image": "i",
      "flavor": "f", "key_name": "k", "run_id": RID}
MEMBER = {"index": "1", "prefix": f"vnb-{RID}-same", "placement": "same-host", "network": "n",
          "macs_a": ["fa:00:00:00:00:01", "fa:00:00:00:00:03"],
          "macs_b": ["fa:00:00:00:00:02", "fa:00:00:00:00:04"],
          "qos_policy": "p", "qos_sides": ["b"], "image": "i", "flavor": "f", "key_name": "k",
          "run_id": RID, "host_a": "cmp1"}
SECURED = """
vswitch: ovs
network: {type: vxlan}
vnets: [{name: red, cidr: 198.19.1.0/24}]
security_groups:
  - name: web
    rules:
      - {direction: ingress, protocol: tcp, port_range_min: 5201}
      - {direction: ingress, protocol: icmp, remote_group: web}
  - name: app
    rules:
      - {direction: ingress, protocol: tcp, port_range_min: 5432, remote_group: web}
vms:
  - {name: web-1, host: h1, vnets: [{name: red, security_groups: [web, app]}]}
  - {name: def-1, host: h2}
  - {name: open-1, host: h2, vnets: [{name: red, port_security: false}]}
"""


def _secured():
    tb = loads(SECURED, source="<sg>", online_cpus=[0, 1])
    return st.parameters(tb, RID, st.Options(cloud="c", mgmt_network="flat"), True, "k")


def _routed(path=None):
    from vnetbench.rally_plugins.context import testbed_yaml
    tb = loads(testbed_yaml("ovs", "vxlan", None, ["same-host"], path=path), source="<p>",
               online_cpus=[0, 1]) if path else load(EXAMPLES / "routed-two-subnets.yaml", online_cpus=[0, 1])
    return st.parameters(tb, RID, st.Options(cloud="c", mgmt_network="flat", external_network="public",
                                             outside="netns:out"), True, "k")


ENV = hot.TEMPLATES / "env"
CASES = {
    "admin-vxlan": (MAIN, ENV / "ml2-ovs.yaml", _params("vxlan")),
    "admin-flat": (MAIN, ENV / "ml2-ovs.yaml", _params("flat", ["same-host"])),
    "user-existing": (MAIN, ENV / "ml2-ovs.yaml", _params("flat", ["same-host"], admin=False,
                                                          flavor="pinned", network="shared")),
    "two-vnets": (MAIN, ENV / "linuxbridge.yaml", _two_vnets()),
    "member": (hot.TEMPLATES / "pair.yaml", None, MEMBER),
    "free-member": (hot.TEMPLATES / "pair.yaml", None, {**MEMBER, "placement": "unplaced",
                                                        "macs_a": [], "macs_b": [], "host_a": ""}),
    # a member on a network it does not own: Neutron refuses both MACs and port security
    "guest-member": (hot.TEMPLATES / "pair.yaml", None, {**MEMBER, "port_overrides": False}),
    "vm-list": (MAIN, ENV / "ml2-ovs.yaml", _vm_list()),
    "vm-list-unpinned": (MAIN, ENV / "ml2-ovs.yaml", {**_vm_list(), "cpu_policy": "shared"}),
    "vm": (hot.TEMPLATES / "vm.yaml", None, VM),
    "vm-0": (hot.TEMPLATES / "vm.yaml", None, {**VM, "index": "0"}),
    "secured": (MAIN, ENV / "ml2-ovs.yaml", _secured()),
    "sg": (hot.TEMPLATES / "sg.yaml", None, {"index": "1", "groups": _secured()["security_groups"],
                                             "run_id": RID}),
    "sgrule": (hot.TEMPLATES / "sgrule.yaml", None, {"index": "0", "rules": _secured()["sg_cross_rules"]}),
    "vm-secured": (hot.TEMPLATES / "vm.yaml", None, {**VM, "index": "0", "layout": _secured()["vm_layout"]}),
    "routed": (MAIN, ENV / "ml2-ovs.yaml", _routed()),
    "routed-east-west": (MAIN, ENV / "ml2-ovs.yaml", _routed("l3-east-west")),
    "vm-fip": (hot.TEMPLATES / "vm.yaml", None, {**VM, "index": "1", "layout": _routed()["vm_layout"],
                                                 "floating_network": "public", "router_ports": ["r:a", "r:b"]}),
    "member-open": (hot.TEMPLATES / "pair.yaml", None, {**MEMBER, "port_overrides": False, "secured": True,
                                                        "security_groups": [f"vnb-{RID}-open"]}),
}


@pytest.fixture(scope="module")
def resolved():
    got = dict(zip(CASES, hot.resolve(CASES.values())))
    for name, r in got.items():
        assert "error" not in r, f"{name}: Heat: {r['error']}"
    return got


def _props(resolved, name):
    return resolved["resources"][name]["properties"]


def test_heat_resolves_the_admin_provider_stack(resolved):
    r, params = resolved["admin-vxlan"], CASES["admin-vxlan"][2]
    net = _props(r, "net_a")
    assert net["value_specs"] == {"provider:network_type": "vxlan"}   # no physnet for tunnels
    assert net["port_security_enabled"] is False and f"run-{RID}" in net["tags"]
    assert _props(r, "pinned_flavor")["extra_specs"] == {"hw:cpu_policy": "dedicated",
                                                         "hw:cpu_thread_policy": "prefer"}
    same = _props(r, "same_host")
    assert same["count"] == 1
    assert same["resource_def"]["properties"]["macs_a"] == params["macs"]["same_host"]["a"]
    assert _props(r, "cross_host")["count"] == 1
    assert not r["conditions"]["tenant"] and not r["conditions"]["second_vnet"]


def test_heat_resolves_flat_provider_with_its_physical_network(resolved):
    assert _props(resolved["admin-flat"], "net_a")["value_specs"] == {
        "provider:network_type": "flat", "provider:physical_network": "physnet1"}


def test_heat_resolves_a_non_admin_stack_on_an_existing_network(resolved):
    r = resolved["user-existing"]
    assert "pinned_flavor" not in r["resources"] and "net_a" not in r["resources"]
    pair = _props(r, "same_host")["resource_def"]["properties"]
    assert pair["network"] == "shared" and pair["flavor"] == "pinned"


def test_heat_resolves_two_vnets_with_one_cidr_and_a_qos_limit(resolved):
    r = resolved["two-vnets"]
    assert _props(r, "subnet_a")["cidr"] == _props(r, "subnet_b")["cidr"]
    assert _props(r, "qos_limit")["max_kbps"] == 10000 and _props(r, "qos_limit")["direction"] == "ingress"


def test_heat_resolves_a_pair_member(resolved):
    r, free = resolved["member"], resolved["free-member"]
    assert _props(r, "group")["policies"] == ["affinity"]
    a, b = _props(r, "port_a")["value_specs"], _props(r, "port_b")["value_specs"]
    assert a == {"mac_address": "fa:00:00:00:00:03", "port_security_enabled": False}
    assert b == {"mac_address": "fa:00:00:00:00:04", "port_security_enabled": False,
                 "qos_policy_id": "p"}
    assert _props(r, "vm_a")["availability_zone"] == "nova:cmp1"
    assert _props(r, "vm_a")["scheduler_hints"] == {"group": "group"}
    assert "group" not in free["resources"] and _props(free, "vm_a")["scheduler_hints"] is None
    assert _props(free, "port_a")["value_specs"] == {"port_security_enabled": False}
    guest = resolved["guest-member"]
    assert _props(guest, "port_a")["value_specs"] == {}
    assert _props(guest, "port_b")["value_specs"] == {"qos_policy_id": "p"}
    assert all(_props(guest, n).get("port_security_enabled") is None for n in ("port_a", "port_b"))
    # no string property left null: Heat reads null as '' and validates that
    for name in ("port_a", "port_b"):
        assert "mac_address" not in _props(free, name) and "qos_policy" not in _props(free, name)


def test_heat_rejects_what_create_would_reject(tmp_path):
    """The resolution is Heat's validation: a parameter outside its allowed values, and a
    resource named like a parameter (Heat: 'Duplicate names'), are errors."""
    clash = tmp_path / "clash.yaml"
    clash.write_text("heat_template_version: 2021-04-16\nparameters: {flavor: {type: string}}\n"
                     "resources:\n  flavor: {type: OS::Nova::Flavor, properties: {ram: 256, vcpus: 1}}\n")
    out = hot.resolve([(hot.TEMPLATES / "pair.yaml", None, {**MEMBER, "placement": "next-door"}),
                       (clash, None, {"flavor": "x"})])
    assert "next-door" in out[0]["error"] and "allowed" in out[0]["error"].lower()
    assert "Duplicate names" in out[1]["error"]


def test_heat_resolves_a_testbed_of_vms_in_no_pair(resolved):
    """The functional suite's testbeds: one VNB::Vm per VM, one affinity group per
    testbed host, both vnets with the same CIDR, the QoS policy for the VMs that ask."""
    r = resolved["vm-list"]
    vms = _props(r, "vms")
    assert vms["count"] == 3 and vms["resource_def"]["type"] == "VNB::Vm"
    member = vms["resource_def"]["properties"]
    assert [e["name"] for e in member["layout"]] == ["red-1", "red-2", "blue-1"]
    # resources to be created resolve to None offline: the conditions say which
    assert set(member["networks"]) == set(member["subnets"]) == {"a", "b"}
    assert r["conditions"]["second_vnet"] and r["conditions"]["qos"]
    assert "net_b" in r["resources"] and "qos_policy" in r["resources"]
    groups = _props(r, "host_groups")
    assert groups["count"] == 2 and groups["resource_def"]["properties"]["policies"] == ["affinity"]
    assert _props(r, "subnet_a")["cidr"] == _props(r, "subnet_b")["cidr"] == "198.19.1.0/24"
    for group in ("same_host", "cross_host"):
        assert _props(r, group)["count"] == 0


def test_heat_resolves_one_vm_from_its_layout_entry(resolved):
    r, first = resolved["vm"], resolved["vm-0"]
    port, server = _props(r, "port"), _props(r, "server")
    assert port["network"] == "nb" and port["fixed_ips"] == []      # no subnet, no IP: Neutron's
    assert port["value_specs"] == {"port_security_enabled": False, "qos_policy_id": "p"}
    assert server["availability_zone"] == "nova:cmp2"
    assert server["scheduler_hints"] == {"group": "g1"}
    assert server["name"] == f"vnb-{RID}-blue-2"
    port0, server0 = _props(first, "port"), _props(first, "server")
    assert port0["network"] == "na"
    assert port0["fixed_ips"] == [{"subnet": "sa", "ip_address": "198.19.1.1"}]
    assert port0["value_specs"] == {"port_security_enabled": False, "mac_address": "fa:0a:1b:2c:00:00"}
    assert server0["availability_zone"] is None and server0["scheduler_hints"] == {"group": "g0"}


def test_provider_attributes_only_where_set_segmentation_id_for_vlan():
    """Provider attributes reach Neutron through value_specs, each only when set (Heat's
    ProviderNet sent a null segmentation_id as '', which Neutron refused: found when
    the functional suite first built a VXLAN testbed on the all-in-one cloud); the
    backend gives a VLAN id only, vnet B taking the next one."""
    tb = loads(ISOLATION, source="<iso>", online_cpus=[0, 1])
    assert tb.vnets[0].segmentation_id and "segmentation_id" not in _vm_list()
    vlan = {**_vm_list(), "network_type": "vlan", "physical_network": "physnet1",
            "segmentation_id": 1001}
    out = hot.resolve([(MAIN, ENV / "ml2-ovs.yaml", _vm_list()), (MAIN, ENV / "ml2-ovs.yaml", vlan)])
    assert all("error" not in o for o in out), out
    assert _props(out[0], "net_b")["value_specs"] == {"provider:network_type": "vxlan"}
    assert _props(out[1], "net_b")["value_specs"] == {
        "provider:network_type": "vlan", "provider:physical_network": "physnet1",
        "provider:segmentation_id": 1002}
    # the networks are validated offline; what must ask a cloud first is said, not passed
    assert {"net_a", "net_b", "subnet_a"}.isdisjoint(out[1]["unchecked"])
    assert {"vms", "host_groups"} <= set(out[1]["unchecked"])


def test_heat_resolves_an_unpinned_flavor_without_a_thread_policy(resolved):
    """Nova takes hw:cpu_thread_policy with dedicated CPUs only."""
    assert _props(resolved["vm-list"], "pinned_flavor")["extra_specs"] == {
        "hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "prefer"}
    assert _props(resolved["vm-list-unpinned"], "pinned_flavor")["extra_specs"] == {
        "hw:cpu_policy": "shared"}


def test_heat_resolves_the_testbeds_security_groups(resolved):
    """Each group a VNB::SecurityGroup, rules naming another group VNB::SecurityGroupRule
    after them, every VM after both; the ports name their groups (Heat resolves names)."""
    r, params = resolved["secured"], CASES["secured"][2]
    assert _props(r, "sec_groups")["count"] == 3 and _props(r, "sec_cross_rules")["count"] == 1
    assert _props(r, "sec_groups")["resource_def"]["type"] == "VNB::SecurityGroup"
    layout = {e["name"]: e for e in params["vm_layout"]}
    assert layout["web-1"]["secured"] and layout["web-1"]["security_groups"] == [
        f"vnb-{RID}-sg-web", f"vnb-{RID}-sg-app"]
    assert not layout["open-1"]["secured"] and layout["open-1"]["security_groups"] == []
    group = _props(resolved["sg"], "group")
    assert group["name"] == f"vnb-{RID}-sg-web"
    assert group["rules"] == params["security_groups"][1]["rules"]
    rule = _props(resolved["sgrule"], "rule")
    assert (rule["security_group"], rule["remote_group"], rule["port_range_min"], rule["ethertype"]) \
        == (f"vnb-{RID}-sg-app", f"vnb-{RID}-sg-web", 5432, "IPv4")


def test_heat_gives_a_secured_port_its_groups_and_an_open_one_none(resolved):
    port = _props(resolved["vm-secured"], "port")
    assert port["security_groups"] == [f"vnb-{RID}-sg-web", f"vnb-{RID}-sg-app"]
    assert port["value_specs"]["port_security_enabled"] is True
    off = _props(resolved["vm"], "port")                # an entry without groups: off (admin)
    assert off["security_groups"] is None and off["value_specs"]["port_security_enabled"] is False
    mgmt = _props(resolved["vm-secured"], "mgmt_port") if "mgmt_port" in resolved["vm-secured"]["resources"] else None
    assert mgmt is None                                  # no --mgmt-network in this case
    member = _props(resolved["member-open"], "port_a")
    assert member["security_groups"] == [f"vnb-{RID}-open"]
    assert "port_security_enabled" not in member["value_specs"]   # not the member's to say


def test_heat_resolves_a_routed_testbed(resolved):
    """One Neutron router between the two subnets (their gateways its interface
    addresses: the VMs' default route), its gateway on the external network with SNAT;
    the VMs wait for its interfaces, b gets a floating IP there and a does not."""
    r = resolved["routed"]
    assert r["conditions"]["routed_a"] and r["conditions"]["routed_b"] and r["conditions"]["router_gateway"]
    assert _props(r, "subnet_a")["gateway_ip"] == "198.19.1.254"
    assert _props(r, "subnet_b")["gateway_ip"] == "198.19.2.254"
    assert _props(r, "router")["external_gateway_info"] == {"network": "public", "enable_snat": True}
    assert f"run-{RID}" in _props(r, "router")["tags"]
    vms = _props(r, "vms")["resource_def"]["properties"]
    assert vms["floating_network"] == "public"
    assert [(e["name"], e["vnet"], e["fip"]) for e in vms["layout"]] == [("a", "a", False), ("b", "b", True)]
    fip = resolved["vm-fip"]
    assert _props(fip, "floating_ip")["floating_network"] == "public"
    assert "floating_ip" not in resolved["vm"]["resources"]      # no floating network: none


def test_an_unrouted_testbed_has_no_router_and_subnets_without_gateway(resolved):
    r = resolved["vm-list"]
    assert not r["conditions"]["routed"] and "router" not in r["resources"]
    assert _props(r, "subnet_a")["gateway_ip"] is None


def test_heat_resolves_a_router_without_a_gateway(resolved):
    """East-west only (the l3-east-west path's testbed): the router has no
    external_gateway_info at all (a null one Heat validates as a map without its network),
    and no VM waits for a floating network."""
    r = resolved["routed-east-west"]
    assert r["conditions"]["routed"] and not r["conditions"]["router_gateway"]
    assert "router" not in r["resources"]
    assert _props(r, "router_east_west").get("external_gateway_info") is None
    assert _props(r, "vms")["resource_def"]["properties"]["floating_network"] == ""
