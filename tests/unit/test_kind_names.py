"""No module outside ``vnetbench/kinds/`` names a vSwitch kind (issue 23): everything the
rest of the suite needs of a kind, it asks through ``vnetbench.kinds`` (the registry and
the ``Kind`` interface). Checked on the syntax tree, so docstrings and comments may talk
about kinds; code may not branch on one, import one's package, or spell its name.

What is flagged, outside ``src/vnetbench/kinds/``:
- ``VSwitchKind.<MEMBER>`` (a branch on one kind);
- a string constant equal to a registered kind's name;
- an import of a kind's package (``vnetbench.kinds.<package>``), or its module path in a
  string (``python -m`` argv).
Each exception is listed in ``ALLOWED`` with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vnetbench import kinds
from vnetbench.testbed.model import VSwitchKind

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (ROOT / "src" / "vnetbench", ROOT / "collectors")
KINDS_DIR = ROOT / "src" / "vnetbench" / "kinds"

AIO_ML2 = ("the all-in-one cloud's --ml2 values, Neutron's mechanism drivers (ovs: the OVS and L3 agents; ovn: OVN's databases, northd and ovn-controllers), not testbed kinds")
# (path from the repository root, the flagged text) -> why it is not a kind named
ALLOWED = {
    ("src/vnetbench/aio/cloud.py", "ovs"):
        "the all-in-one cloud's own Open vSwitch (a service it starts for Neutron), not a testbed kind",
    ("src/vnetbench/aio/conf.py", "ovs"):
        "the [ovs] section of Neutron's OVS agent configuration, not a testbed kind",
    ("src/vnetbench/capacity/openstack.py", "ovs"):
        "the [ovs] section of Neutron's OVS agent configuration (the hand-off's lines), not a testbed kind",
    ("src/vnetbench/testbed/libvirt/undo.py", "ovs"):
        "a journal entry's flag: the hypervisor bridge to remove is an OVS bridge (a technology)",
    ("src/vnetbench/testbed/libvirt/remote_deployment.py", "ovs"):
        "the key of the hypervisor's OVS bridge in the run's bridge names (a technology)",
    ("src/vnetbench/testbed/libvirt/remote_builder.py", "ovs"):
        "the key of the hypervisor's OVS bridge in the run's bridge names (a technology)",
    ("src/vnetbench/aio/__main__.py", "ovn"):
        AIO_ML2,
    ("src/vnetbench/aio/cloud.py", "ovn"):
        AIO_ML2,
    ("src/vnetbench/aio/conf.py", "ovn"):
        AIO_ML2,
    ("src/vnetbench/aio/ovn.py", "ovn"):
        AIO_ML2,
    ("src/vnetbench/aio/resources.py", "ovs"):
        AIO_ML2,
    ("src/vnetbench/aio/resources.py", "ovn"):
        AIO_ML2,
    ("src/vnetbench/aio/services.py", "ovs"):
        AIO_ML2,
    ("src/vnetbench/aio/services.py", "ovn"):
        AIO_ML2,
    ("src/vnetbench/report/provenance.py", "ovs"):
        "the key of the cloud's OVS package version in a record's provenance (testbed.openstack.facts)",
    ("src/vnetbench/report/provenance.py", "ovn"):
        "the key of the cloud's OVN package version in a record's provenance (testbed.openstack.facts)",
    ("src/vnetbench/testbed/openstack/facts.py", "ovs"):
        "the key of the cloud's OVS package version in its facts, not a testbed kind",
    ("src/vnetbench/testbed/openstack/facts.py", "ovn"):
        "Neutron's mechanism driver ovn (and the key of the cloud's OVN version); a driver's kind is asked of vnetbench.kinds",
    ("src/vnetbench/testbed/openstack/facts.py", "linuxbridge"):
        "Neutron's mechanism driver linuxbridge; a driver's kind is asked of vnetbench.kinds",
    ("collectors/vnetbench_collector/__main__.py", "ovs"):
        "the collector is installed alone on cloud hypervisors (no vnetbench to ask); its "
        "--vswitch label and the OVS kinds whose datapath counters it reads are its own CLI's",
    ("collectors/vnetbench_collector/__main__.py", "ovs-openflow"):
        "as above: the standalone collector's list of labels whose data plane is ovs-vswitchd",
    ("collectors/vnetbench_collector/__main__.py", "ovn"):
        "as above: the standalone collector's list of labels whose data plane is ovs-vswitchd",
}


def _packages() -> set[str]:
    return {module.rsplit(".", 1)[1] for module in kinds.REGISTRY.values()}


def _docstrings(tree) -> set[int]:
    """ids of the constant nodes that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def findings(path: Path, source: str) -> list[tuple[int, str, str]]:
    """(line, flagged text, what) of every place SOURCE names a kind."""
    tree = ast.parse(source, filename=str(path))
    names, members = set(kinds.names()), {m.name for m in VSwitchKind}
    packages = {f"vnetbench.kinds.{p}" for p in _packages()}
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "VSwitchKind" and node.attr in members:
            out.append((node.lineno, f"VSwitchKind.{node.attr}", "a branch on one kind"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value in names:
                out.append((node.lineno, node.value, "a kind's name"))
            elif any(node.value == p or node.value.startswith(p + ".") for p in packages):
                out.append((node.lineno, node.value, "a kind's module path"))
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            hit = next((m for m in mods if any(m == p or m.startswith(p + ".") for p in packages)), None)
            if hit:
                out.append((node.lineno, hit, "an import of a kind's package"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if any(a.name == p or a.name.startswith(p + ".") for p in packages):
                    out.append((node.lineno, a.name, "an import of a kind's package"))
    return out


def _scanned_files():
    for top in SCANNED:
        for path in sorted(top.rglob("*.py")):
            if KINDS_DIR in path.parents:
                continue
            yield path


def test_no_module_outside_kinds_names_a_kind():
    bad, used = [], set()
    for path in _scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, text, what in findings(path, path.read_text()):
            key = (rel, text.split(".", 1)[0] if what == "a branch on one kind" else text)
            if key in ALLOWED:
                used.add(key)
                continue
            bad.append(f"{rel}:{line}: {what}: {text!r}")
    assert not bad, ("ask the kind through vnetbench.kinds (kinds.of(testbed).<member>) "
                     "instead:\n" + "\n".join(bad))
    assert not set(ALLOWED) - used, f"allow-list entries no longer needed: {set(ALLOWED) - used}"


def test_every_allowance_says_why():
    assert all(len(reason) > 30 for reason in ALLOWED.values())


def test_the_check_sees_each_way_of_naming_a_kind():
    src = '''
"""Docstrings may say ovs."""
from vnetbench.kinds.ovn import netns
import vnetbench.kinds.vrouter.logic
from vnetbench.kinds import ovs_openflow
if kind is VSwitchKind.VROUTER:
    x = "linuxbridge"
argv = ["-m", "vnetbench.kinds.ovs.agent"]
def f():
    """ovs too."""
    return kinds.of(tb).l3 and "not a kind"
'''
    got = sorted((line, what) for line, _, what in findings(Path("<t>"), src))
    assert got == [(3, "an import of a kind's package"), (4, "an import of a kind's package"),
                   (5, "an import of a kind's package"), (6, "a branch on one kind"),
                   (7, "a kind's name"), (8, "a kind's module path")]
