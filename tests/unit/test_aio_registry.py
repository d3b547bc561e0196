"""The all-in-one cloud as a run of vnetbench's state root (vnetbench.aio.registry): `aio up`
registers it before its first resource and holds it busy, `vnetbench cleanup` tears it
down with the AIO's own `down` (and only with no --backend or --backend aio), a
registration whose AIO is gone is dropped saying so, `aio down` removes it last.

A real Aio in a temp dir, brought "up" as far as one journaled daemon (a `sleep`) and
then failed, as a crash leaves it; the real `down` stops that daemon. Only the step that
would reach this machine's libvirtd (``_remove_domains``) and the preflight's checks of
the machine (root, ports, the netdev datapath) are replaced."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lock_holder import held

from vnetbench import cli, state
from vnetbench.aio import cloud, registry
from vnetbench.aio.__main__ import main as aio_main
from vnetbench.aio.cloud import Aio
from vnetbench.aio.procs import alive
from vnetbench.errors import VnetbenchError


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "root"
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(r))
    return r


@pytest.fixture(autouse=True)
def domains(monkeypatch):
    """_remove_domains (libvirt) recorded, never run; .left: what it reports as left."""
    calls = []

    def fake(prefix, uri=None):
        calls.append(prefix)
        return list(fake.left)
    fake.left, fake.calls = [], calls
    monkeypatch.setattr(cloud, "_remove_domains", fake)
    return fake


def cleanup(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["cleanup", *args])
    return code, out.getvalue()


def cleanup_elsewhere() -> subprocess.CompletedProcess:
    """`vnetbench cleanup` from another process (the run lock is per process)."""
    return subprocess.run([sys.executable, "-m", "vnetbench", "cleanup"], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def crashed(monkeypatch, domains):
    """``crashed(aio_dir, before=None, during=None)``: `aio up` in AIO_DIR that starts one
    journaled daemon and fails there, as a crash leaves an AIO; BEFORE(aio) runs where
    the preflight would, DURING(aio) in the first step, with the daemon running. After
    the test, what is left of each goes with the real `down`."""
    made = []

    def make(aio_dir: Path, before=None, during=None) -> Aio:
        made.append(aio_dir)
        return _crash(aio_dir, monkeypatch, before, during)
    yield make
    domains.left = []
    for aio_dir in made:
        assert Aio(aio_dir).down(progress=lambda msg: None) == []


def _crash(aio_dir: Path, monkeypatch, before, during) -> Aio:
    def preflight(self, image):
        if before:
            before(self)

    def first_step(self):
        self.daemons.start("sleeper", ["sleep", "60"])
        if during:
            during(self)
        raise VnetbenchError("aio: mariadb failed (the test's)")
    monkeypatch.setattr(Aio, "_preflight", preflight)
    monkeypatch.setattr(Aio, "_mariadb", first_step)
    aio = Aio(aio_dir)
    with pytest.raises(VnetbenchError, match="the test's"):
        registry.up(aio, Path("/nonexistent/disk.qcow2"), progress=lambda msg: None)
    return aio


def sleeper(aio_dir: Path) -> dict:
    return next(e for e in Aio(aio_dir).processes() if e["name"] == "sleeper")


def test_registration_is_journaled_and_held_before_the_first_resource(root, tmp_path, crashed):
    aio_dir = tmp_path / "aio"
    seen = {}

    def before(aio):                    # nothing of the AIO exists yet
        run = state.Run(aio.lay.run_id, root)
        seen["journal"] = run.entries()
        seen["meta"] = run.meta()
        seen["aio made"] = (aio_dir / "meta.json").exists() or aio.journal.entries()
        seen["cleanup"] = cleanup_elsewhere()

    def during(aio):
        seen["names"] = json.loads((aio_dir / "meta.json").read_text())["registration"]
    aio = crashed(aio_dir, before, during)
    rid = aio.lay.run_id
    assert state.RUN_ID_RE.match(rid) and not rid.isdigit()
    assert seen["journal"] == [{"kind": "aio", "state": str(aio_dir.resolve())}]
    assert seen["meta"]["kind"] == "aio" and seen["meta"]["builder_pid"] == os.getpid()
    assert not seen["aio made"]
    said = seen["cleanup"]
    assert said.returncode == 0 and f"run {rid} is in use by another process" in said.stdout, said
    assert seen["names"] == str(root / rid)
    # up failed after its first resource: the registration stays, no longer held
    assert [r.run_id for r in state.runs(state.AIO)] == [rid]
    assert alive(sleeper(aio_dir))


def test_cleanup_takes_a_crashed_aio_down_with_its_own_down(root, tmp_path, crashed, domains):
    aio = crashed(tmp_path / "aio")
    daemon = sleeper(aio.state)
    code, out = cleanup()
    assert code == 0 and out == f"run {aio.lay.run_id}: removed (the AIO in {aio.state})\n"
    assert not alive(daemon)
    assert domains.calls == [aio.lay.instance_prefix]
    assert not (aio.state / "journal.jsonl").exists() and not (aio.state / "meta.json").exists()
    assert (aio.state / "logs" / "sleeper.log").exists()        # down keeps the logs
    assert list(root.iterdir()) == []


def test_cleanup_dispatches_by_kind(root, tmp_path, crashed, domains):
    aio = crashed(tmp_path / "aio")
    daemon = sleeper(aio.state)
    owned = tmp_path / "owned"
    owned.write_text("x")
    tb = state.Run("abc123", root)
    tb.create(status="up", name="t", backend="netns", testbed={})
    tb.record("file", path=str(owned))
    tb.unlock()
    code, out = cleanup()
    assert code == 0
    assert f"run {aio.lay.run_id}: removed (the AIO in {aio.state})" in out
    assert "run abc123: removed\n" in out                       # no AIO's words for a testbed
    assert not owned.exists() and not alive(daemon)
    assert len(domains.calls) == 1 and list(root.iterdir()) == []


@pytest.mark.parametrize("backend", ["netns", "libvirt", "openstack"])
def test_a_testbed_backend_never_touches_an_aio(root, tmp_path, crashed, domains, backend):
    aio = crashed(tmp_path / "aio")
    (root / aio.lay.run_id / "meta.json").write_text("{}")     # damaged: the journal says aio
    code, out = cleanup("--backend", backend)
    assert code == 0 and out == "nothing to clean up\n"
    assert alive(sleeper(aio.state)) and domains.calls == []
    assert (root / aio.lay.run_id).is_dir()
    code, out = cleanup("--backend", "aio")
    assert code == 0 and f"run {aio.lay.run_id}: removed (the AIO in {aio.state})" in out


def test_backend_aio_leaves_testbeds_alone(root, tmp_path, crashed):
    aio = crashed(tmp_path / "aio")
    tb = state.Run("abc123", root)
    tb.create(status="up", name="t", backend="openstack", testbed={})
    tb.unlock()
    code, out = cleanup("--backend", "aio")
    assert code == 0 and out == f"run {aio.lay.run_id}: removed (the AIO in {aio.state})\n"
    assert [r.run_id for r in state.runs()] == ["abc123"]


def _registration(root: Path, rid: str, aio_dir: Path) -> state.Run:
    run = state.Run(rid, root)
    run.create(kind=state.AIO, name=f"aio-{rid}", state=str(aio_dir))
    run.record("aio", state=str(aio_dir))
    run.unlock()
    return run


def test_a_registration_whose_state_dir_is_gone_is_dropped_saying_so(root, tmp_path):
    gone = tmp_path / "was-here"
    _registration(root, "abc123", gone)
    code, out = cleanup("--run", "abc123")
    assert code == 0
    assert out == f"run abc123: removed (the registration only: its AIO's state dir {gone} is gone)\n"
    assert list(root.iterdir()) == [] and not gone.exists()


def test_a_state_dir_holding_another_aio_is_not_touched(root, tmp_path, crashed, domains):
    aio = crashed(tmp_path / "aio")           # run R, registered
    other = "fedcba" if aio.lay.run_id != "fedcba" else "fedcbb"
    _registration(root, other, aio.state)                  # names R's dir: not its AIO
    code, out = cleanup("--run", other)
    assert code == 0 and f"{aio.state} holds another AIO (run {aio.lay.run_id})" in out
    assert alive(sleeper(aio.state)) and domains.calls == []
    assert [r.run_id for r in state.runs()] == [aio.lay.run_id]


def test_an_up_that_made_nothing_leaves_no_registration(root, tmp_path, monkeypatch):
    def refuse(self, image):
        raise VnetbenchError("aio: port 19000 (keystone) is in use; another AIO up?")
    monkeypatch.setattr(Aio, "_preflight", refuse)
    code = aio_main(["up", "--state", str(tmp_path / "aio"), "--image", "/nonexistent/disk.qcow2"])
    assert code == 2 and state.runs() == []


def test_up_on_an_aio_already_there_registers_nothing_new(root, tmp_path, crashed):
    aio = crashed(tmp_path / "aio")
    with pytest.raises(VnetbenchError, match="partly-up or stopped AIO"):
        registry.up(Aio(aio.state), Path("/nonexistent/disk.qcow2"), progress=lambda msg: None)
    assert [r.run_id for r in state.runs()] == [aio.lay.run_id]


def test_aio_down_removes_the_registration_last(root, tmp_path, crashed, domains):
    aio = crashed(tmp_path / "aio")
    rid, reg = aio.lay.run_id, root / aio.lay.run_id
    domains.left = ["domain vnbaio-x: stuck"]
    assert aio_main(["down", "--state", str(aio.state)]) == 1
    assert json.loads((reg / "meta.json").read_text())["status"] == "teardown-failed"
    # what a retry needs stays: the same layout, the same journal
    assert Aio(aio.state).lay.run_id == rid and (aio.state / "journal.jsonl").exists()
    domains.left = []
    assert aio_main(["down", "--state", str(aio.state)]) == 0
    assert not reg.exists() and not (aio.state / "meta.json").exists()


def test_aio_down_and_cleanup_refuse_an_aio_held_by_another_process(root, tmp_path, crashed,
                                                                   capsys):
    aio = crashed(tmp_path / "aio")
    reg = root / aio.lay.run_id
    with held(reg):
        assert aio_main(["down", "--state", str(aio.state)]) == 2
        assert "is in use by another process" in capsys.readouterr().err
        code, out = cleanup()
        assert code == 0 and "is in use by another process" in out
        assert alive(sleeper(aio.state)) and reg.is_dir()
    code, out = cleanup()                   # the holder is gone: the lock went with it
    assert code == 0 and "removed (the AIO in" in out
