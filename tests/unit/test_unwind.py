"""The one unwinder (``testbed.unwind``): every kind of entry any part of vnetbench
journals has exactly one undo step, registered by the backend that journals it; a
journal is read only as far as it needs (a netns run's teardown imports no other
backend); consecutive entries of a parallel kind are undone together, others alone."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vnetbench.testbed import unwind

SRC = Path(__file__).resolve().parents[2] / "src" / "vnetbench"
# the AIO's own journal (its state dir's), undone by its own `down`, not by the unwinder
AIO_OWN_JOURNAL = {"starting", "link", "bridge"}


def journaled_kinds() -> dict[str, list[str]]:
    """kind -> the modules whose code calls ``<something>.record("kind", ...)``."""
    found: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "record" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found.setdefault(node.args[0].value, []).append(str(path.relative_to(SRC)))
    return found


def test_every_journaled_kind_has_its_undo_step():
    kinds = journaled_kinds()
    assert {"netns", "daemon", "domain", "stack"} <= set(kinds)      # the scan sees the journals
    missing = {}
    for kind, where in kinds.items():
        if kind in AIO_OWN_JOURNAL:
            continue
        try:
            step = unwind.step(kind)
        except ValueError:
            missing[kind] = where
            continue
        assert callable(step.undo) or step.sweep is not None, kind
    assert not missing, f"journaled without an undo step: {missing}"


def test_the_aio_registration_and_root_build_have_theirs():
    from vnetbench.aio.rootbuild import JOURNAL_KIND
    from vnetbench.state import AIO
    for kind in (AIO, JOURNAL_KIND):
        assert callable(unwind.step(kind).undo)


def test_no_kind_is_registered_twice():
    import importlib
    seen = {kind: "testbed.unwind" for kind in unwind._CORE}
    for name in unwind.UNDO_MODULES:
        for kind in importlib.import_module(name).STEPS:
            assert kind not in seen, f"{kind} in {name} and {seen[kind]}"
            seen[kind] = name


def test_an_unknown_kind_is_a_value_error():
    for kind in ("warp-core", 7, None):
        with pytest.raises(ValueError, match="unknown journal entry kind"):
            unwind.step(kind)


def test_only_parallel_kinds_are_grouped():
    entries = [{"kind": k, "name": str(i)} for i, k in
               enumerate(["daemon", "daemon", "netns", "netns", "daemon", "process", "process", "daemon"])]
    groups = [[e["name"] for e in g] for g in unwind._groups(entries)]
    assert groups == [["0", "1"], ["2"], ["3"], ["4"], ["5"], ["6"], ["7"]]


def test_a_netns_run_is_unwound_without_importing_another_backend(tmp_path):
    """Run in a fresh interpreter: what the teardown imported is what it needed."""
    owned = tmp_path / "owned"
    owned.write_text("x")
    code = f"""
import json, sys
from pathlib import Path
from vnetbench.state import Run
from vnetbench.testbed.unwind import teardown
run = Run("abc125", Path({str(tmp_path)!r}))
run.create(testbed={{}})
run.record("file", path={str(owned)!r})
run.record("netns", name="vnb-abc125-gone")
run.record("deprovision", vnet="a")
run.unlock()
errors = teardown(run)
print(json.dumps({{"errors": errors, "modules": sorted(m for m in sys.modules if m.startswith("vnetbench"))}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["errors"] == [] and not owned.exists()
    assert "vnetbench.testbed.netns.undo" in doc["modules"]
    for other in ("vnetbench.testbed.libvirt.undo", "vnetbench.testbed.openstack.undo", "vnetbench.aio.undo"):
        assert other not in doc["modules"], other


def test_a_backend_that_cannot_load_is_named_not_fatal(monkeypatch):
    """A machine without one backend's libraries still unwinds the others' entries; an
    entry no loaded backend knows names the one that could not load."""
    monkeypatch.setattr(unwind, "UNDO_MODULES", ("vnetbench.testbed.netns.undo", "vnetbench.no_such_backend.undo"))
    monkeypatch.setattr(unwind, "_LOADED", {})
    assert unwind.step("netns").sweep is not None
    with pytest.raises(ValueError, match="vnetbench.no_such_backend.undo could not be loaded"):
        unwind.step("domain")
