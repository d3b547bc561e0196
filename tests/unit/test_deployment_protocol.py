"""One Deployment interface: every backend has all of it, and the code that uses a
testbed (battery, Rally, CPU windows, monitor, CLI, functional matrix, reports) never
imports a backend: it reaches one only through the registry (vnetbench.testbed.deployment)."""

import ast
from pathlib import Path

import pytest

from vnetbench.testbed import deployment

SRC = Path(__file__).resolve().parents[2] / "src" / "vnetbench"
BACKENDS = ("vnetbench.testbed.netns", "vnetbench.testbed.libvirt", "vnetbench.testbed.openstack")
# monitor/server.py builds the monitor's own namespace with the namespace helpers; it
# touches no testbed, so it is not a consumer of one
CONSUMERS = ["battery", "rally_plugins", "cpu.py", "monitor/watch.py", "cli.py", "cli_testbed.py", "compare.py",
             "demo.py", "functional", "history", "report", "results", "traffic"]


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


@pytest.mark.parametrize("rel", CONSUMERS)
def test_consumers_never_import_a_backend(rel):
    files = _files(rel)
    assert files, f"{rel}: no such module (update CONSUMERS)"
    for path in files:
        backends = {m for m in _imports(path) if m.startswith(BACKENDS)}
        assert not backends, f"{path.relative_to(SRC)} imports {sorted(backends)}"


def test_the_import_check_sees_imports_inside_functions(tmp_path):
    """The CLI imports lazily (inside commands): the check must see those too."""
    f = tmp_path / "m.py"
    f.write_text("def cmd():\n    from vnetbench.testbed.netns.deployment import Deployment\n")
    assert _imports(f) == {"vnetbench.testbed.netns.deployment"}


def test_consumer_modules_load_no_backend():
    """Importing the CLI, monitor watch, the Rally plugins and the battery loads no
    backend's Deployment or builder (the grep above could miss an importlib call)."""
    import subprocess
    import sys
    registered = sorted({v.split(":")[0] for v in (*deployment.BACKENDS.values(),
                                                   *deployment.BUILDERS.values())})
    code = ("import sys, vnetbench.cli, vnetbench.monitor.watch, vnetbench.rally_plugins.scenarios, "
            "vnetbench.rally_plugins.context, vnetbench.battery.broadcast, vnetbench.cpu\n"
            f"print(sorted(m for m in sys.modules if m in {registered!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_remote_libvirt_deployment_has_every_member():
    """A libvirt run on a remote hypervisor attaches as its own class (no local hosts)."""
    from vnetbench.testbed.libvirt.remote_deployment import RemoteLibvirtDeployment
    assert deployment.missing(RemoteLibvirtDeployment) == []
    assert RemoteLibvirtDeployment.backend == "libvirt"
