"""One Deployment interface: every backend has all of it, and the code that measures
(battery, Rally scenarios, CPU windows) never imports a backend."""

import ast
from pathlib import Path

import pytest

from vnetbench.testbed import deployment

SRC = Path(__file__).resolve().parents[2] / "src" / "vnetbench"
BACKEND_NEUTRAL = ["battery", "rally_plugins/scenarios.py", "rally_plugins/scenarios_rfc2544.py", "cpu.py"]


@pytest.mark.parametrize("name", sorted(deployment.BACKENDS))
def test_backend_has_every_member(name):
    cls = deployment.backend_class(name)
    assert deployment.missing(cls) == []
    assert cls.backend == name


def test_a_backend_missing_a_method_is_caught():
    class Partial:
        backend = "partial"

        def exec(self, vm, argv, timeout=60): ...
    lacks = deployment.missing(Partial)
    assert {"popen", "ip", "down", "testbed", "run", "vm_port"} <= set(lacks)
    assert "exec" not in lacks and "backend" not in lacks


def test_unknown_backend_is_one_clear_error():
    with pytest.raises(deployment.VnetbenchError, match="backend 'vmware' is not available; use one of libvirt, netns"):
        deployment.backend_class("vmware")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _files(rel: str):
    p = SRC / rel
    return sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.exists() else []


@pytest.mark.parametrize("rel", BACKEND_NEUTRAL)
def test_measuring_code_never_imports_a_backend(rel):
    for path in _files(rel):
        backends = {m for m in _imports(path) if m.startswith("vnetbench.testbed.netns")}
        assert not backends, f"{path.relative_to(SRC)} imports {sorted(backends)}"
