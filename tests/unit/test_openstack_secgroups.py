"""The testbed's security groups on a cloud (testbed/openstack/secgroups.py): what the
stack creates for each group and port, and the rule changes sent to Neutron."""

from __future__ import annotations

import ipaddress
import warnings

import pytest
from hypothesis import given, strategies as st

from vnetbench.errors import VnetbenchError

from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import SgRule
from vnetbench.testbed.openstack import secgroups, stack

with warnings.catch_warnings():     # its row marks are the functional plugin's
    warnings.simplefilter("ignore")
    from vnetbench.functional.tests.test_security_groups import TESTBED

RID = "0a1b2c"


def _tb(text=None):
    return loads(text or TESTBED.format(kind="ovs", ntype="vxlan"), source="<sg>", online_cpus=[0, 1])


def test_every_group_is_the_runs_own_with_its_rules():
    p = secgroups.parameters(_tb(), RID, overrides=True, mgmt=True)
    names = [g["name"] for g in p["security_groups"]]
    # Neutron's 'default' is the run's own copy: the project's group is never touched
    assert names == [f"vnb-{RID}-sg-default", f"vnb-{RID}-sg-web", f"vnb-{RID}-sg-knock"]
    assert p["sg_count"] == 3 and p["sg_cross_count"] == 0
    default, web, knock = p["security_groups"]
    assert default["rules"] == [
        {"direction": "ingress", "ethertype": "IPv4", "remote_mode": "remote_group_id"},
        {"direction": "egress", "ethertype": "IPv4", "remote_mode": "remote_ip_prefix",
         "remote_ip_prefix": "0.0.0.0/0"}]
    assert web["rules"][0] == {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                               "port_range_min": 5201, "port_range_max": 5201,
                               "remote_mode": "remote_ip_prefix", "remote_ip_prefix": "0.0.0.0/0"}
    assert web["rules"][1]["remote_mode"] == "remote_group_id" and web["rules"][1]["protocol"] == "icmp"
    # every declared group carries an egress rule: Heat drops Neutron's allow-all ones
    assert all(any(r["direction"] == "egress" for r in g["rules"]) for g in p["security_groups"])
    assert knock["rules"] == [default["rules"][1]]


def test_ports_get_their_groups_and_ssh_only_where_the_command_channel_is():
    tb = _tb()
    with_mgmt = secgroups.parameters(tb, RID, overrides=True, mgmt=True)
    assert with_mgmt["ports"]["web-1"] == (True, [f"vnb-{RID}-sg-web", f"vnb-{RID}-sg-knock"])
    assert with_mgmt["ports"]["def-1"] == (True, [f"vnb-{RID}-sg-default"])
    assert with_mgmt["mgmt_security_groups"] == []          # admin: port security off there
    on_test_nic = secgroups.parameters(tb, RID, overrides=True, mgmt=False)
    assert on_test_nic["ports"]["def-1"] == (True, [f"vnb-{RID}-sg-default", f"vnb-{RID}-control"])
    control = on_test_nic["security_groups"][-1]
    assert control["name"] == f"vnb-{RID}-control"
    assert {(r["direction"], r.get("port_range_min")) for r in control["rules"]} == {("ingress", 22), ("egress", 22)}
    member = secgroups.parameters(tb, RID, overrides=False, mgmt=True)
    assert member["mgmt_security_groups"] == [f"vnb-{RID}-control"]


def test_an_unfiltered_port_is_off_or_in_the_open_group():
    plain = _tb("vswitch: ovs\nnetwork: {type: vxlan}\nvms:\n  - {name: a, host: h1}\n  - {name: b, host: h2}\n")
    admin = secgroups.parameters(plain, RID, overrides=True, mgmt=False)
    assert admin["ports"] == {"a": (False, []), "b": (False, [])} and admin["sg_count"] == 0
    member = secgroups.parameters(plain, RID, overrides=False, mgmt=False)
    assert member["ports"]["a"] == (True, [f"vnb-{RID}-open"])
    assert member["security_groups"] == [{"name": f"vnb-{RID}-open", "rules": [
        {"direction": "ingress", "ethertype": "IPv4", "remote_mode": "remote_ip_prefix",
         "remote_ip_prefix": "0.0.0.0/0"}]}]


CROSS = """
vswitch: ovs
network: {type: vxlan}
security_groups:
  - name: db
    rules:
      - {direction: ingress, protocol: tcp, port_range_min: 5432, remote_group: app}
      - {direction: egress, protocol: tcp, port_range_min: 5201, remote_ip_prefix: 198.19.0.0/16}
  - name: app
vms:
  - {name: a, host: h1, vnets: [{name: vnet1, security_groups: [app]}]}
  - {name: d, host: h2, vnets: [{name: vnet1, security_groups: [db]}]}
"""


def test_a_rule_naming_another_group_is_its_own_resource_by_names():
    p = secgroups.parameters(_tb(CROSS), RID, overrides=True, mgmt=False)
    assert p["sg_cross_rules"] == [{"security_group": f"vnb-{RID}-sg-db", "direction": "ingress",
                                    "protocol": "tcp", "port_range_min": 5432, "port_range_max": 5432,
                                    "remote_group": f"vnb-{RID}-sg-app"}]
    db = next(g for g in p["security_groups"] if g["name"].endswith("-db"))
    assert [r["direction"] for r in db["rules"]] == ["egress"]


def test_egress_only_to_other_groups_is_refused_in_one_line():
    text = CROSS.replace("{direction: egress, protocol: tcp, port_range_min: 5201, remote_ip_prefix: 198.19.0.0/16}",
                         "{direction: egress, protocol: tcp, remote_group: app}")
    with pytest.raises(VnetbenchError, match=r"<sg>: security group 'db': its egress rules all name other groups"):
        secgroups.parameters(_tb(text), RID, overrides=True, mgmt=False)


def test_pairs_share_one_setting_in_the_stack():
    from vnetbench.rally_plugins import context
    tb = loads(context.testbed_yaml("ovs", "vxlan", None, ["same-host"], security_groups=True),
               source="<p>", online_cpus=[0, 1])
    p = stack.parameters(tb, RID, stack.Options(cloud="c"), True, "k")
    assert p["pair_secured"] is True
    assert p["pair_security_groups"] == f"vnb-{RID}-sg-default,vnb-{RID}-control"


# -- rule changes --------------------------------------------------------------------------

def _neutron(body, rid="r"):
    """A rule as openstacksdk's to_dict() lists it."""
    return {"id": rid, "ether_type": "IPv4", "protocol": None, "port_range_min": None,
            "port_range_max": None, "remote_ip_prefix": None, "remote_group_id": None, **body}


RULES = st.builds(
    SgRule, direction=st.sampled_from(["ingress", "egress"]),
    protocol=st.sampled_from([None, "tcp", "udp"]),
    port_range_min=st.none(), port_range_max=st.none(),
    remote_ip_prefix=st.one_of(st.none(), st.sampled_from([ipaddress.ip_network("198.19.1.0/24"),
                                                           ipaddress.ip_network("198.18.0.0/15")])),
    remote_group=st.none())


@given(st.lists(RULES, max_size=6, unique=True), st.lists(RULES, max_size=6, unique=True))
def test_changes_turn_what_neutron_has_into_what_the_group_should_have(before, after):
    have = [_neutron(secgroups.neutron_rule(r, {}), f"id{i}") for i, r in enumerate(before)]
    want = [secgroups.neutron_rule(r, {}) for r in after]
    drop, add = secgroups.changes(have, want)
    kept = [h for h in have if h not in drop]
    result = {secgroups._key(r) for r in kept} | {secgroups._key(r) for r in add}
    assert result == {secgroups._key(w) for w in want}
    assert not any(secgroups._key(a) in {secgroups._key(k) for k in kept} for a in add)


def test_changes_leave_ipv6_rules_and_match_any_prefix_as_neutron_stores_it():
    have = [_neutron({"direction": "egress", "remote_ip_prefix": "0.0.0.0/0"}, "v4"),
            _neutron({"direction": "egress", "ether_type": "IPv6"}, "v6")]
    drop, add = secgroups.changes(have, [secgroups.neutron_rule(SgRule("egress"), {})])
    assert drop == [] and add == []


def test_provenance_says_what_filters_the_ports():
    plain = _tb("vswitch: ovs\nnetwork: {type: vxlan}\nvms:\n  - {name: a, host: h1}\n  - {name: b, host: h2}\n")
    assert secgroups.filtering(secgroups.parameters(plain, RID, True, False)) == "off"
    assert "allow-all" in secgroups.filtering(secgroups.parameters(plain, RID, False, False))
    assert "testbed's security groups" in secgroups.filtering(secgroups.parameters(_tb(), RID, True, True))
