"""One test per failure of issue 14: each bad input, damaged state or misuse gives a
true one-line message with exit 2 (or is refused / handled), never a traceback."""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lock_holder import held

from vnetbench import cli, errors, state
from vnetbench.testbed import loader

ONLINE = [0, 1]
BASE = "vswitch: ovs\nnetwork: {type: vxlan}\n"


def error(text: str) -> str:
    with pytest.raises(errors.TestbedFileError) as exc:
        loader.loads(text, source="t.yaml", online_cpus=ONLINE)
    return str(exc.value)


def cli_run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def one_line_error(*argv) -> str:
    code, out, err = cli_run(*argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("vnetbench: error: "), (code, err)
    return err


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "state"
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(r))
    return r


# --- names and whole-number floats -------------------------------------------

@pytest.mark.parametrize("name", ["h1\n", "h1\r\n", "h\x00", "h1\u2028"])
def test_name_with_newline_or_control_character_is_refused(name):
    msg = error(BASE + f"hosts: [{{name: {json.dumps(name)}}}]\n")
    assert "hosts[0].name" in msg and "control character" in msg and "\n" not in msg


@pytest.mark.parametrize("field, text", [
    ("network.underlay_mtu", "vswitch: ovs\nnetwork: {type: vxlan, underlay_mtu: 1500.0}\n"),
    ("hosts[0].cpus[0]", BASE + "hosts: [{name: h1, cpus: [0.0]}]\n"),
    ("vnets[0].segmentation_id", BASE + "vnets: [{name: a, segmentation_id: 101.0}]\n"),
    ("network.tenant_mtu", "vswitch: ovs\nnetwork: {type: vxlan, tenant_mtu: true}\n"),
])
def test_whole_number_floats_and_bools_are_not_integers(field, text):
    assert f"{field}: " in error(text) and "is not of type integer" in error(text)


# --- parse limits -------------------------------------------------------------

def test_non_utf8_file(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_bytes(b"vswitch: ovs\n\xff\xfe\n")
    err = one_line_error("testbed", "validate", str(p))
    assert "not UTF-8 text (byte 0xff at offset 13)" in err


def test_non_string_key_beside_unknown_key():
    msg = error(BASE + "1: x\nfrob: y\n")
    assert "key 1 is not a string" in msg


def test_deep_nesting_is_refused_without_recursion():
    msg = error(BASE + "x: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested deeper than 32 levels" in msg


def test_recursive_alias_is_refused():
    assert "nested deeper than" in error(BASE + "hosts: &h [*h]\n")


def test_integer_over_4300_digits():
    msg = error("vswitch: ovs\nnetwork: {type: vxlan, underlay_mtu: " + "9" * 5000 + "}\n")
    assert "an integer of 5000 digits" in msg and len(msg) < 200


def test_alias_bomb_is_bounded_in_time_and_message():
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    t0 = time.monotonic()
    msg = error(bomb + BASE)
    assert time.monotonic() - t0 < 10 and "expands to more than" in msg and len(msg) < 300


def test_a_megabyte_name_is_echoed_as_a_short_excerpt():
    msg = error(BASE + "name: " + "a" * 100_000 + "\n")
    assert "(100000 characters)" in msg and len(msg) < 300


def test_file_size_cap(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(BASE + "#" * (loader.MAX_FILE_BYTES + 1))
    assert "larger than 128 KiB" in one_line_error("testbed", "validate", str(p))


def test_dev_zero_and_fifo_are_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        t0 = time.monotonic()
        assert "is not a regular file" in one_line_error("testbed", "validate", path)
        assert time.monotonic() - t0 < 5      # a FIFO used to hang forever, /dev/zero 16 s


def test_directory_is_refused(tmp_path):
    assert "is a directory" in one_line_error("testbed", "validate", str(tmp_path))


# --- address ranges and scale --------------------------------------------------

@pytest.mark.parametrize("cidr", ["10.0.0.0/8", "128.0.0.0/1", "0.0.0.0/0"])
def test_huge_underlay_is_never_enumerated(cidr):
    t0 = time.monotonic()
    try:
        tb = loader.loads(f"vswitch: ovs\nnetwork: {{type: vxlan, underlay_cidr: {cidr}}}\n",
                          online_cpus=ONLINE)
        assert str(tb.hosts[1].underlay_ip).endswith(".2")
    except errors.TestbedFileError as exc:
        msg = str(exc)
        assert "overlaps the underlay" in msg
        assert "shrink network.underlay_cidr" in msg or not ipaddress.IPv4Network(
            msg.split("e.g. ")[1]).overlaps(ipaddress.IPv4Network(cidr))
    assert time.monotonic() - t0 < 5      # /8 took 11 s and 1.5 GB, /1 ran out of memory


def test_host_bits_on_a_slash_zero_suggest_a_usable_prefix():
    msg = error("vswitch: ovs\nnetwork: {type: vxlan, underlay_cidr: 198.18.0.0/0}\n")
    assert "use a longer prefix, e.g. 198.18.0.0/24" in msg


def test_overlapping_underlay_is_told_a_range_outside_it():
    msg = error("vswitch: ovs\nnetwork: {type: vxlan, underlay_cidr: 198.19.0.0/16}\n")
    fix = msg.split("e.g. ")[1]
    assert not ipaddress.IPv4Network(fix).overlaps(ipaddress.IPv4Network("198.19.0.0/16"))


def test_300_vnets_without_cidr_blame_the_missing_cidr_not_an_invented_one():
    vnets = "".join(f"  - {{name: v{i}}}\n" for i in range(300))
    msg = error(BASE + "vnets:\n" + vnets)
    assert "vnets[255]: has no cidr" in msg and "198.19.256" not in msg


def test_uniqueness_checks_are_linear():
    hosts = "".join(f"  - {{name: h{i}}}\n" for i in range(4000))
    t0 = time.monotonic()
    tb = loader.loads("vswitch: ovs\nnetwork: {type: vxlan, underlay_cidr: 10.0.0.0/16}\nhosts:\n"
                      + hosts, online_cpus=ONLINE)
    assert len(tb.hosts) == 4000 and time.monotonic() - t0 < 15
    dup = error("vswitch: ovs\nnetwork: {type: vxlan, underlay_cidr: 10.0.0.0/16}\nhosts:\n"
                + hosts + "  - {name: h17}\n")
    assert "hosts[4000].name: duplicate name 'h17' (also hosts[17].name)" in dup


# --- command line and environment -----------------------------------------------

def test_unknown_flag_is_named():
    assert "unrecognized argument '--frob'" in one_line_error("--frob")
    assert "unrecognized argument '--frob'" in one_line_error("testbed", "up", "--frob")


def test_usage_errors_are_one_line():
    assert "required: ACTION" in one_line_error("testbed")


def test_no_such_run_says_it_plainly(root):
    root.mkdir()
    msg = one_line_error("cleanup", "--run", "zzz")
    assert "no run has the id or name 'zzz'" in msg and "run run" not in msg


@pytest.mark.parametrize("value, problem", [
    ("relative/dir", "is not an absolute path"), ("/tmp/a\nb", "control character")])
def test_state_dir_must_be_a_usable_path(monkeypatch, value, problem):
    monkeypatch.setenv("VNETBENCH_STATE_DIR", value)
    assert problem in one_line_error("testbed", "status")


def test_state_dir_pointing_at_a_file(tmp_path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("x")
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(f))
    for argv in (("testbed", "status"), ("cleanup",), ("monitor", "status")):
        assert "exists and is not a directory" in one_line_error(*argv)


# --- damaged run directories, the run lock ----------------------------------------

def _damaged_run(root: Path, rid: str, meta: str | None, journal: str) -> Path:
    d = root / rid
    d.mkdir(parents=True)
    if meta is not None:
        (d / "meta.json").write_text(meta)
    (d / "journal.jsonl").write_text(journal)
    return d


@pytest.mark.parametrize("meta", [None, "", "{trunc", "[]", '{"status": "up"}'])
def test_run_without_usable_meta_is_reported_and_cleanable(root, tmp_path, meta):
    owned = tmp_path / "owned-file"
    owned.write_text("x")
    journal = json.dumps({"kind": "file", "path": str(owned)}) + "\n" + '{"kind": "netns", "na'
    d = _damaged_run(root, "abc123", meta, journal)
    code, out, err = cli_run("testbed", "status")
    assert code == 0 and "run abc123 [damaged]" in out and "vnetbench cleanup --run abc123" in out
    assert "vnetbench cleanup --run abc123" in one_line_error("testbed", "exec", "--run", "abc123",
                                                              "vm", "--", "true")
    code, out, err = cli_run("testbed", "down", "--run", "abc123")
    assert code == 0 and "removed" in out, err
    assert not d.exists() and not owned.exists()


def test_unknown_journal_kind_keeps_the_run_for_a_later_cleanup(root):
    d = _damaged_run(root, "abc124", "{}", '{"kind": "warp-core"}\n7\n"x"\n')
    code, out, err = cli_run("cleanup")
    assert code == 1 and "unknown journal entry kind 'warp-core'" in out and d.exists()


def test_cleanup_leaves_a_run_locked_by_a_live_process_alone(root, tmp_path):
    owned = tmp_path / "owned"
    owned.write_text("x")
    d = _damaged_run(root, "abc125", json.dumps({"builder_pid": 1}),
                     json.dumps({"kind": "file", "path": str(owned)}) + "\n")
    with held(d):
        code, out, err = cli_run("cleanup")
        assert code == 0 and "run abc125 is in use by another process" in out
        assert d.exists() and owned.exists()
    code, out, err = cli_run("cleanup")      # the holder is gone: the lock went with it
    assert code == 0 and "run abc125: removed" in out and not owned.exists()


def test_a_half_made_run_directory_is_removed_by_cleanup(root):
    (root / ".abc126.new").mkdir(parents=True)
    code, out, err = cli_run("cleanup")
    assert code == 0 and not (root / ".abc126.new").exists()


def test_run_directory_appears_with_its_meta_and_locked(root):
    run = state.Run("abc127", root)
    run.create(status="building", name="x")
    try:
        assert run.meta()["status"] == "building"
        with run.locked():                     # re-entrant in the owner
            pass
        probe = subprocess.run([sys.executable, "-c", (
            "import fcntl, os\n"
            f"fd = os.open({str(run.dir)!r}, os.O_RDONLY)\n"
            "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
            "except BlockingIOError:\n    print('held')\n")], capture_output=True, text=True)
        assert probe.stdout.strip() == "held"
    finally:
        run.unlock()


# --- monitor -------------------------------------------------------------------------

class _FakeRun:
    def __init__(self, meta):
        self._meta = meta

    def meta(self):
        return self._meta


class _FakeMonitor:
    id = "m00001"

    def __init__(self, exc=None, result=None):
        self.exc, self.result, self.run = exc, result, _FakeRun({"data_dir": "/srv/prom-data"})

    def query(self, expr):
        if self.exc:
            raise self.exc
        return self.result

    def down(self):
        self.run._meta = {}      # the run directory is gone after down
        return []


@pytest.mark.parametrize("exc, words", [
    (RuntimeError("GET /api/v1/query -> 400: 1:5: parse error: unexpected <EOF>"), "Prometheus rejected"),
    (ConnectionRefusedError(111, "Connection refused"), "Prometheus does not answer"),
    (FileNotFoundError(2, "No such file or directory"), "Prometheus does not answer"),
])
def test_monitor_query_failures_are_one_line(monkeypatch, exc, words):
    from vnetbench.monitor import commands
    monkeypatch.setattr(commands, "_monitor", lambda args: _FakeMonitor(exc))
    assert words in one_line_error("monitor", "query", "rate(x[")


def test_monitor_query_prints_scalars_and_matrices(monkeypatch):
    from vnetbench.monitor import commands
    monkeypatch.setattr(commands, "_monitor", lambda args: _FakeMonitor(result=[1.0, "2"]))
    assert cli_run("monitor", "query", "1+1")[1] == "{} 2\n"
    monkeypatch.setattr(commands, "_monitor", lambda args: _FakeMonitor(
        result=[{"metric": {"a": "b"}, "values": [[1, "1"], [2, "2"]]}]))
    assert cli_run("monitor", "query", "x[1m]")[1] == '{a="b"} 2 samples\n'


def test_monitor_down_says_where_the_data_is(monkeypatch):
    from vnetbench.monitor import commands
    monkeypatch.setattr(commands, "_monitor", lambda args: _FakeMonitor())
    code, out, err = cli_run("monitor", "down")
    assert code == 0 and "Prometheus data kept in /srv/prom-data" in out
