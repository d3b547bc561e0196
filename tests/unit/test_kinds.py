"""The registry of vSwitch kinds (``vnetbench.kinds``): it finds every kind, refuses one
that lacks what the suite calls, and each kind's options agree with their schema."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import jsonschema
import pytest

from vnetbench import kinds
from vnetbench.kinds import base, driver
from vnetbench.testbed import capabilities
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import NetType, VSwitchKind

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_registry_finds_every_kind_and_the_model_names_them():
    assert [k.name for k in kinds.all_kinds()] == list(kinds.names()) == [k.value for k in VSwitchKind]
    assert kinds.DEFAULT in kinds.names()


def test_a_kind_is_found_by_name_by_enum_and_by_testbed():
    tb = loads("vswitch: ovn\nnetwork: {type: geneve}\n")
    assert kinds.of(tb) is kinds.get("ovn") is kinds.get(VSwitchKind.OVN)


def test_every_registered_kind_says_how_it_routes():
    """The registry's plain data (the model reads it without loading a kind)."""
    assert set(kinds.registry.ROUTERS) == set(kinds.REGISTRY)
    assert set(kinds.registry.ROUTERS.values()) <= {"l3-agent", "external", "ovn", "vrouter", ""}
    for k in kinds.all_kinds():
        assert k.routers or k.no_routers, f"{k.name}: no routers and no no_routers to say why"


def test_an_unknown_kind_is_named_with_the_registered_ones():
    with pytest.raises(kinds.UnknownKind, match="no vSwitch kind 'ivs'; registered: linuxbridge"):
        kinds.get("ivs")


class _Complete(base.Kind):
    name, summary, openstack_environment = "x", "a test kind", "x-env"


class _CompleteDriver(driver.NetnsDriver):
    def wire(self, ctx): pass
    def remove_vnet(self, dep, ctx, vnet): pass
    def restart(self, dep, host): pass
    def unplug(self, dep, host, port): pass
    def plug(self, dep, host, port, vm, k, nic): pass


def test_a_complete_kind_and_driver_pass_the_check():
    base.check(_Complete(), "x")
    driver.check(_CompleteDriver(_Complete()), _Complete())


@pytest.mark.parametrize("member", driver.REALISED)
def test_a_driver_missing_a_realisation_is_reported_by_name(member):
    lacking = type("Lacking", (_CompleteDriver,), {member: getattr(driver.NetnsDriver, member)})
    with pytest.raises(driver.DriverError, match=f"'x'.*: missing {member} "):
        driver.check(lacking(_Complete()), _Complete())


def test_a_controlled_kind_needs_its_drivers_control():
    controlled = type("Controlled", (_Complete,), {"controlled": True})()
    with pytest.raises(driver.DriverError, match="controlled=True, its driver's control"):
        driver.check(_CompleteDriver(controlled), controlled)


def test_something_else_than_a_driver_is_reported():
    with pytest.raises(driver.DriverError, match="Driver is not a vnetbench.kinds.driver.NetnsDriver"):
        driver.check(object(), _Complete())


@pytest.mark.parametrize("name", kinds.names())
def test_every_kind_has_a_checked_netns_driver_that_knows_its_kind(name):
    d = kinds.netns_driver(name)
    assert d.kind is kinds.get(name) and kinds.netns_driver(name) is d
    assert (d.control() is not None) == kinds.get(name).controlled


@pytest.mark.parametrize("attr", base.REQUIRED)
def test_a_kind_missing_a_description_is_reported_by_name(attr):
    lacking = type("Lacking", (_Complete,), {attr: "" if attr != "name" else "x"})()
    if attr == "name":
        lacking = type("Misnamed", (_Complete,), {"name": "y"})()
        with pytest.raises(base.KindError, match="its name is 'y', not the registered 'x'"):
            base.check(lacking, "x")
        return
    with pytest.raises(base.KindError, match=f"missing {attr}$"):
        base.check(lacking, "x")


def test_options_without_their_schema_are_reported():
    half = type("Half", (_Complete,), {"options": dict, "options_key": "x"})()
    with pytest.raises(base.KindError, match="options, options_key and options_schema go together"):
        base.check(half, "x")


def test_something_else_than_a_kind_is_reported():
    with pytest.raises(base.KindError, match="KIND is not a vnetbench.kinds.base.Kind"):
        base.check(object(), "x")


@pytest.mark.parametrize("kind", [k.name for k in kinds.all_kinds() if k.options])
def test_each_kinds_option_defaults_are_its_schemas(kind):
    """The dataclass and the JSON Schema say the same defaults, field by field."""
    k = kinds.get(kind)
    jsonschema.Draft202012Validator.check_schema(k.options_schema)
    fields = {f.name: f.default for f in dataclasses.fields(k.options)}
    props = k.options_schema["properties"]
    assert set(fields) == set(props)
    assert {n: p["default"] for n, p in props.items()} == fields


@pytest.mark.parametrize("kind", kinds.names())
def test_each_kind_carries_its_preferred_network_here_or_says_why(kind, tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "osken-manager").touch()         # Faucet's own environment
    monkeypatch.setenv("VNETBENCH_FAUCET_VENV", str(tmp_path))
    caps = capabilities.Capabilities(root=True, binaries={p: "/bin/true" for p in capabilities.PACKAGES},
                                     links={}, ovs_kernel=False, ovs_version="3.1.0")
    k = kinds.get(kind)
    assert caps.why_not(kind, k.preferred_network) is None
    refused = [t for t in NetType if caps.why_not(kind, t)]
    assert all(caps.why_not(kind, t).strip() for t in refused)


def _imports(path: Path, modules) -> set[str]:
    """What PATH imports: ``from package import module`` counts as the module only."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_netns_backend_and_the_kinds_import_no_cycle():
    """The netns builder, deployment and a kind's wiring once imported each other in a
    six-module cycle; now a kind depends on the backend's parts, never the reverse
    (imports inside functions count too)."""
    mods = {_module(p): p for p in SRC.rglob("*.py")}
    graph = {m: {i for i in _imports(p, mods) if i in mods and i != m} for m, p in mods.items()
             if m.startswith(("vnetbench.testbed.netns", "vnetbench.kinds"))}
    for m in graph:
        graph[m] &= set(graph)
    seen, stack = {}, []

    def visit(m):
        seen[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if seen.get(n) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in seen:
                visit(n)
        seen[m] = "done"
        stack.pop()
    for m in sorted(graph):
        if m not in seen:
            visit(m)


def test_a_kind_without_a_cloud_must_say_why():
    silent = type("Silent", (_Complete,), {"openstack_environment": None})()
    with pytest.raises(base.KindError, match=r"missing openstack_environment \(or no_cloud"):
        base.check(silent, "x")
    base.check(type("Said", (_Complete,), {"openstack_environment": None,
                                            "no_cloud": "no driver"})(), "x")
