"""Who may import whom (DEVELOPERS.md, "Architecture"), checked on the syntax tree of
every module under ``src/vnetbench``:

- the Linux toolkit (``vnetbench.linux``) imports nothing of ``vnetbench.testbed`` or
  ``vnetbench.kinds``: every backend, kind and the monitor build on it;
- nothing above the testbed (everything but ``testbed/``, ``kinds/`` and ``linux/``)
  imports a backend (``vnetbench.testbed.{netns,libvirt,openstack}``): it asks
  ``vnetbench.testbed.deployment`` (``build``, ``attach``, ``teardown``) and the
  ``Deployment`` it returns;
- a kind's description (``kinds/base.py``, ``kinds/__init__.py``, ``kinds/registry.py``,
  ``kinds/<kind>/__init__.py``) imports no backend;
- ``testbed/model.py`` imports nothing of ``vnetbench.kinds`` but the registry's data;
- the import graph of module-level imports has no cycle.

A rule that does not hold everywhere yet lists its present exceptions, each with the
reason it exists; the lists may only shrink (an exception that no longer occurs fails
too, so the list stays true). Function-local imports are how the code breaks cycles
today: they are counted, not forbidden, and their number may only fall.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
BACKENDS = ("vnetbench.testbed.netns", "vnetbench.testbed.libvirt", "vnetbench.testbed.openstack")
BELOW = ("vnetbench.testbed", "vnetbench.kinds", "vnetbench.linux")

# (importing module, backend package) -> why it still imports that backend: none today
ABOVE_TESTBED_ALLOWED: dict[tuple[str, str], str] = {}

# (kind description module, backend package) -> why it still imports that backend
KIND_DESCRIPTION_ALLOWED: dict[tuple[str, str], str] = {}

# what testbed/model.py may import of vnetbench.kinds, function-local imports included
MODEL_MAY_IMPORT = {"vnetbench.kinds.registry"}
MODEL_ALLOWED: dict[str, str] = {}

# vnetbench modules named by imports inside functions today: the number may only fall
FUNCTION_LOCAL_CEILING = 403


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted((SRC / "vnetbench").rglob("*.py"))}


@cache
def _imports(module: str) -> tuple[tuple[str, bool], ...]:
    """(imported vnetbench module, inside a function?) for every import of MODULE;
    ``from P import m`` names P and, when it is a module, P.m. Imports under
    ``if TYPE_CHECKING:`` never run and are left out."""
    path, mods = _modules()[module], _modules()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                found.append((base, inner))
                found.extend((f"{base}.{a.name}", inner) for a in child.names
                             if f"{base}.{a.name}" in mods)
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return tuple((m, inner) for m, inner in found if m in mods)


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _reaching(importers, targets) -> set[tuple[str, str]]:
    """(importer, target package) for each importer that imports into a target package."""
    return {(m, t) for m in importers for imported, _ in _imports(m)
            for t in targets if _under(imported, t)}


def test_linux_toolkit_imports_no_testbed_or_kind():
    toolkit = [m for m in _modules() if _under(m, "vnetbench.linux")]
    assert toolkit, "vnetbench/linux is missing"
    assert _reaching(toolkit, ("vnetbench.testbed", "vnetbench.kinds")) == set()


def test_nothing_above_the_testbed_imports_a_backend():
    above = [m for m in _modules() if not any(_under(m, b) for b in BELOW)]
    found = _reaching(above, BACKENDS)
    assert found - set(ABOVE_TESTBED_ALLOWED) == set(), "use vnetbench.testbed.deployment"
    assert set(ABOVE_TESTBED_ALLOWED) - found == set(), "fixed: drop it from ABOVE_TESTBED_ALLOWED"


def test_a_kind_description_imports_no_backend():
    kind_packages = {m for m, p in _modules().items()
                     if _under(m, "vnetbench.kinds") and p.name == "__init__.py"}
    descriptions = kind_packages | {"vnetbench.kinds.base", "vnetbench.kinds.registry"}
    found = _reaching(descriptions, BACKENDS)
    assert found - set(KIND_DESCRIPTION_ALLOWED) == set()
    assert set(KIND_DESCRIPTION_ALLOWED) - found == set(), "fixed: drop it from KIND_DESCRIPTION_ALLOWED"


def test_the_model_imports_only_the_kind_registry():
    found = {m for m, _ in _imports("vnetbench.testbed.model")
             if _under(m, "vnetbench.kinds")} - MODEL_MAY_IMPORT
    assert found - set(MODEL_ALLOWED) == set()
    assert set(MODEL_ALLOWED) - found == set(), "fixed: drop it from MODEL_ALLOWED"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycles_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_module_level_imports_have_no_cycle():
    edges = {m: {i for i, local in _imports(m) if not local and i != m} for m in _modules()}
    assert _cycles(edges) == []


def test_function_local_imports_do_not_grow():
    count = sum(1 for m in _modules() for _, local in _imports(m) if local)
    assert count <= FUNCTION_LOCAL_CEILING, (
        f"{count} function-local imports (ceiling {FUNCTION_LOCAL_CEILING}): import at the "
        "top of the module, or break the cycle by moving code down a layer")
