"""The openstack backend's routers (docs/routers.md, 'On a cloud'): a routed testbed's
one router becomes the template's, its gateway on the cloud's external network; what the
template cannot carry is refused in one line naming the field and the fix; the cloud's
north-south addresses replace the model's."""

import ipaddress
from pathlib import Path

import pytest

from vnetbench.errors import UnsupportedError
from vnetbench.testbed.loader import load, loads
from vnetbench.testbed.openstack import stack as st

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROUTED = EXAMPLES / "routed-two-subnets.yaml"
OPTS = dict(cloud="c", mgmt_network="flat", external_network="public", outside="netns:out")


def _params(tb, **over):
    return st.parameters(tb, "0a1b2c", st.Options(**{**OPTS, **over}), True, "k")


def test_the_router_its_interfaces_and_gateway_become_parameters():
    p = _params(load(ROUTED, online_cpus=[0, 1]))
    assert (p["router_ip_a"], p["router_ip_b"]) == ("198.19.1.254", "198.19.2.254")
    assert p["external_network"] == "public" and p["enable_snat"] is True
    assert p["cidr"] == "198.19.1.0/24" and p["cidr_b"] == "198.19.2.0/24"
    assert [(e["name"], e["fip"]) for e in p["vm_layout"]] == [("a", False), ("b", True)]
    assert p["same_host_pairs"] == p["cross_host_pairs"] == 0      # VM by VM


EAST_WEST = """
vswitch: ovs
network: {type: vxlan}
vnets: [{name: blue}, {name: red}]
vms:
  - {name: a, host: h1, vnets: [blue]}
  - {name: b, host: h1, vnets: [red]}
routers:
  - {name: r1, vnets: [blue, red]}
"""


def test_an_east_west_router_needs_no_external_network():
    p = _params(loads(EAST_WEST, source="<ew>", online_cpus=[0, 1]), external_network="", outside="")
    assert p["router_ip_a"] and p["router_ip_b"] and "external_network" not in p


@pytest.mark.parametrize("over,text,names", [
    ({"external_network": ""}, None, "--external-network"),
    ({"outside": ""}, None, "--outside netns:NAME"),
    ({"network": "shared"}, None, "--existing-network"),
    ({}, EAST_WEST.replace("vxlan", "vlan").replace("vnets: [blue, red]}", "vnets: [blue, red], routing: svi}"),
     "routers[0].routing"),
    ({}, EAST_WEST.replace("vnets: [blue, red]}", "vnets: [blue]}\n  - {name: r2, vnets: [red]}"),
     "one router"),
])
def test_what_the_template_cannot_carry_is_one_line(over, text, names):
    tb = loads(text, source="<t>", online_cpus=[0, 1]) if text else load(ROUTED, online_cpus=[0, 1])
    with pytest.raises(UnsupportedError) as exc:
        _params(tb, **over)
    assert names in str(exc.value) and "\n" not in str(exc.value)


def test_the_clouds_north_south_addresses_replace_the_models():
    tb = load(ROUTED, online_cpus=[0, 1])
    vms = {"a": {}, "b": {"floating_ip": "198.18.250.23"}}
    got = st.realised_routing(tb, vms, "198.18.250.17", "198.18.250.0/24", "198.18.250.1", "198.18.250.1")
    assert got.floating_ips[0].ip == ipaddress.ip_address("198.18.250.23")
    assert got.routers[0].gateway == ipaddress.ip_address("198.18.250.17")
    assert got.external.cidr == ipaddress.ip_network("198.18.250.0/24")
    assert got.external_hosts[0].ip == ipaddress.ip_address("198.18.250.1")
    with pytest.raises(Exception, match="no floating IP for b"):
        st.realised_routing(tb, {"a": {}, "b": {}}, "198.18.250.17", "198.18.250.0/24", "", "198.18.250.1")
