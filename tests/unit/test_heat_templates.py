"""heat-templates/: every template parses as HOT and its resources and properties match
Heat's own resource schemas (Debian's python3-heat, offline); every environment file
matches the template it is for."""

from pathlib import Path

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

