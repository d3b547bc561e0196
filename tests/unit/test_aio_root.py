"""The all-in-one cloud's root (vnetbench.aio.release, rootcache, rootbuild, rootcmd):
the release file loader, the cache key, the marker check, bad input (one line, exit 2,
nothing built), the progress of recorded debootstrap and apt-get output, and the cleanup
step of an interrupted build (its marked processes stopped, its partial root removed,
never a path outside the cache's pattern)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vnetbench.aio import procs, release, rootbuild, rootcache, rootcmd
from vnetbench.aio.__main__ import main as aio_main
from vnetbench.errors import VnetbenchError
from vnetbench.state import Run

DATA = Path(__file__).resolve().parents[1] / "data" / "aio"
SETTINGS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EPOXY = release.RELEASES / "epoxy.yaml"


@pytest.fixture
def state(tmp_path, monkeypatch):
    r = tmp_path / "state"
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(r))
    return r


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = aio_main(["root", *argv])
        except SystemExit as exc:                 # argparse's usage errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def epoxy_doc() -> dict:
    return yaml.safe_load(EPOXY.read_text())


def write(tmp_path: Path, doc) -> Path:
    p = tmp_path / "epoxy.yaml"
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return p


# -- the release file ---------------------------------------------------------------------

def test_epoxy_pins_the_issue_versions():
    rel = release.load("epoxy")
    assert (rel.suite, rel.variant, rel.openstack) == ("trixie", "minbase", "2025.1")
    want = {"neutron-server": "2:26.0.3", "nova-api": "2:31.0.0", "heat-engine": "1:24.0.0",
            "placement-api": "13.0.0", "keystone": "2:27.0.0", "ovn-central": "25.03.0",
            "ovn-host": "25.03.0", "openvswitch-switch": "3.5.0"}
    for name, upstream in want.items():
        assert rel.packages[name].startswith(upstream + "-"), name
    assert f"neutron-server={rel.packages['neutron-server']}" in rel.pins()
    assert rel.disk_bytes >= 2.2e9               # the finished root measured 2.2 GB


def test_key_is_the_file_hash(tmp_path):
    a = release.load_file(write(tmp_path, epoxy_doc()), "epoxy")
    assert a.key == release.load_file(write(tmp_path, epoxy_doc()), "epoxy").key
    doc = epoxy_doc()
    doc["packages"]["haproxy"] = "3.0.11-1+deb13u5"
    b = release.load_file(write(tmp_path, doc), "epoxy")
    assert a.key != b.key and len(a.key) == 12
    assert rootcache.entry(Path("/c"), a) != rootcache.entry(Path("/c"), b)


@settings(max_examples=150, **SETTINGS)
@given(st.text(max_size=40))
def test_unknown_release_is_one_line(name):
    if name in release.names():
        return
    with pytest.raises(VnetbenchError) as err:
        release.load(name)
    msg = str(err.value)
    assert "\n" not in msg and "--release" in msg and "epoxy" in msg


def _mutations():
    """A field of the epoxy file replaced by any YAML value, or removed, or one added."""
    value = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                         lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
    path = st.sampled_from([("release",), ("openstack",), ("debian",), ("debian", "suite"),
                            ("debian", "variant"), ("debian", "components"), ("mirror",),
                            ("disk_gb",), ("packages",), ("packages", "neutron-server"),
                            ("packages", "haproxy"), ("extra",)])
    return st.tuples(path, value, st.booleans())


@settings(max_examples=300, **SETTINGS)
@given(_mutations())
def test_any_release_file_is_loaded_or_refused_in_one_line(tmp_path, mutation):
    (path, value, remove) = mutation
    doc = epoxy_doc()
    node = doc
    for key in path[:-1]:
        node = node[key]
    if remove:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    try:
        rel = release.load_file(write(tmp_path, doc), "epoxy")
    except VnetbenchError as exc:
        msg = str(exc)
        assert "\n" not in msg and "epoxy.yaml" in msg and "fix the release file" in msg
        return
    # accepted: every field it carries passed its check
    assert all(release.PACKAGE_RE.match(n) and release.VERSION_RE.match(v) for n, v in rel.packages.items())
    assert rel.mirror == "host" or release.URL_RE.match(rel.mirror)


@settings(max_examples=100, **SETTINGS)
@given(st.binary(max_size=300))
def test_any_bytes_are_loaded_or_refused_in_one_line(tmp_path, data):
    p = tmp_path / "epoxy.yaml"
    p.write_bytes(data)
    with pytest.raises(VnetbenchError) as err:
        release.load_file(p, "epoxy")
    assert "\n" not in str(err.value)


def test_a_huge_release_file_is_refused_unread(tmp_path):
    p = tmp_path / "epoxy.yaml"
    p.write_text("#" * (release.MAX_BYTES + 10))
    with pytest.raises(VnetbenchError, match="larger than"):
        release.load_file(p, "epoxy")


def test_host_mirror_from_either_sources_format(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "a.sources").write_text("Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
                                 "Suites: bookworm\nURIs: http://mirror.example/debian/\nTypes: deb\n")
    assert release.host_mirror((tmp_path / "none.list", d)) == "http://mirror.example/debian"
    one = tmp_path / "sources.list"
    one.write_text("# deb http://commented.example/debian bookworm main\n"
                   "deb [arch=amd64] https://one.example/debian bookworm main\n")
    assert release.host_mirror((one, d)) == "https://one.example/debian"
    (tmp_path / "other.list").write_text("deb https://packages.cloud.google.com/apt cloud-sdk main\n")
    assert release.host_mirror((tmp_path / "other.list",)) == release.DEFAULT_MIRROR


# -- the cache and its marker -------------------------------------------------------------

def _complete(tmp_path: Path, rel, installed=None) -> Path:
    where = tmp_path / "cache" / f"{rel.name}-{rel.key}"
    (where / "root" / "usr" / "bin").mkdir(parents=True)
    rootcache.write_marker(where, rel, dict(rel.packages) if installed is None else installed)
    return where


def test_marker_check(tmp_path):
    rel = release.load("epoxy")
    where = _complete(tmp_path, rel, {**rel.packages, "libc6": "2.41-12"})
    assert rootcache.marker_problem(where, rel) == ""
    assert rootcache.cached(tmp_path / "cache", rel)["installed"]["libc6"] == "2.41-12"
    rootcache.write_marker(where, rel, {**rel.packages, "haproxy": "3.0.10-1"})
    assert "haproxy 3.0.11" in rootcache.marker_problem(where, rel)
    assert rootcache.cached(tmp_path / "cache", rel) is None
    (where / rootcache.MARKER).write_text("{torn")
    assert "unreadable" in rootcache.marker_problem(where, rel)
    (where / rootcache.MARKER).unlink()
    assert "unfinished" in rootcache.marker_problem(where, rel)


def test_a_partial_entry_is_never_cached(tmp_path):
    rel = release.load("epoxy")
    cache = tmp_path / "cache"
    part = rootcache.partial(cache, rel, "abc123")
    (part / "root" / "usr" / "bin").mkdir(parents=True)
    rootcache.write_marker(part, rel, dict(rel.packages))   # even with a marker inside
    assert rootcache.cached(cache, rel) is None
    assert rootcache.entries(cache) == [(part, "partial")]
    assert "partial" in rootcmd.listing(cache)[0]


def test_marker_of_another_release_file_is_refused(tmp_path):
    rel = release.load("epoxy")
    where = _complete(tmp_path, rel)
    doc = epoxy_doc()
    doc["disk_gb"] = 4
    other = release.load_file(write(tmp_path, doc), "epoxy")
    assert "another release file" in rootcache.marker_problem(where, other)


def test_remove_tree_refuses_a_mount_inside(tmp_path, monkeypatch):
    (tmp_path / "x" / "proc").mkdir(parents=True)
    monkeypatch.setattr(rootcache, "mounts_under", lambda p: [str(p / "proc")])
    with pytest.raises(RuntimeError, match="mounted"):
        rootcache.remove_tree(tmp_path / "x")
    assert (tmp_path / "x" / "proc").is_dir()


def test_mounts_under_reads_this_namespace():
    assert rootcache.mounts_under(Path("/proc")) != []
    assert rootcache.mounts_under(Path("/nonexistent-vnb")) == []


# -- bad input: one line, exit 2, nothing built -------------------------------------------

def _nothing_built(cache: Path, state: Path):
    assert not cache.exists() or list(cache.iterdir()) == []
    assert not state.exists() or list(state.iterdir()) == []


@settings(max_examples=40, **SETTINGS)
@given(st.text(min_size=1, max_size=30).filter(lambda s: s not in ("epoxy",) and not s.startswith("-")))
def test_cli_unknown_release(tmp_path, state, name):
    rc, out, err = run_cli("build", "--release", name, "--cache", str(tmp_path / "c"))
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--release" in err
    _nothing_built(tmp_path / "c", state)


def test_cli_cache_not_a_directory(tmp_path, state):
    f = tmp_path / "file"
    f.write_text("")
    for cache in (f, f / "sub"):
        rc, out, err = run_cli("build", "--release", "epoxy", "--cache", str(cache))
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "not a directory" in err and "pass a directory" in err
    assert f.read_text() == ""
    _nothing_built(tmp_path / "none", state)


def test_cli_no_room(tmp_path, state, monkeypatch):
    usage = shutil.disk_usage("/")._replace(free=int(1.5e9))
    monkeypatch.setattr(rootcache.shutil, "disk_usage", lambda p: usage)
    monkeypatch.setattr(rootbuild, "debootstrap_ready", lambda progress, suite: pytest.fail("went on"))
    rc, out, err = run_cli("build", "--release", "epoxy", "--cache", str(tmp_path / "c"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "1.5 GB free" in err and "needs 3.0 GB" in err and "--cache" in err
    _nothing_built(tmp_path / "c", state)


@settings(max_examples=100, **SETTINGS)
@given(st.text(max_size=80))
def test_cli_any_cache_path_is_used_or_refused_in_one_line(tmp_path, state, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli("list", f"--cache={text}")
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and "--cache" in err
    _nothing_built(tmp_path / "none", state)


def test_a_suite_debootstrap_does_not_know(monkeypatch, tmp_path):
    monkeypatch.setattr(rootbuild, "SCRIPTS", tmp_path)
    monkeypatch.setattr(rootbuild.shutil, "which", lambda *a, **k: "/usr/sbin/debootstrap")
    with pytest.raises(VnetbenchError, match="does not know trixie"):
        rootbuild.debootstrap_ready(print, "trixie")


def test_a_vanished_pin_names_the_release_file(tmp_path):
    log = open(tmp_path / "log", "w")
    steps = rootbuild.Steps("aio-root-test", log, lambda m: None, "epoxy.yaml")
    argv = ["sh", "-c", "echo \"E: Version '9.9' for 'haproxy' was not found\"; exit 100"]
    with pytest.raises(VnetbenchError) as err:
        steps.run("install", argv, {}, rootbuild.Install())
    msg = str(err.value)
    assert "haproxy" in msg and "set the one 'apt-cache policy' shows in epoxy.yaml" in msg


def test_cli_build_needs_a_release(tmp_path, state):
    rc, _, err = run_cli("build", "--cache", str(tmp_path / "c"))
    assert rc == 2 and "--release is required" in err
    _nothing_built(tmp_path / "c", state)


def test_cli_list_and_purge(tmp_path, state):
    rel = release.load("epoxy")
    where = _complete(tmp_path, rel)
    (tmp_path / "cache" / f"{where.name}.log").write_text("log")
    rc, out, _ = run_cli("list", "--cache", str(tmp_path / "cache"))
    assert rc == 0 and out.startswith(f"{where.name}  current") and f"{len(rel.packages)} packages" in out
    (tmp_path / "cache" / "epoxy-0123456789ab.log").write_text("an interrupted build's log")
    (tmp_path / "cache" / "notes.log").write_text("not ours")
    rc, _, err = run_cli("purge", "--release", "epoxy", "--cache", str(tmp_path / "cache"))
    assert rc == 0 and f"removed {where}" in err
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["notes.log"]


def test_cached_root_is_reused_without_building(tmp_path, state, monkeypatch):
    rel = release.load("epoxy")
    where = _complete(tmp_path, rel)
    monkeypatch.setattr(rootbuild, "debootstrap_ready", lambda progress, suite: pytest.fail("built again"))
    rc, out, err = run_cli("build", "--release", "epoxy", "--cache", str(tmp_path / "cache"))
    assert rc == 0 and out.strip() == str(where / "root") and "cached" in err


# -- progress from recorded output --------------------------------------------------------

def test_install_progress_from_recorded_apt_output():
    watch = rootbuild.Install()
    for line in (DATA / "apt-install-epoxy.log").read_text().splitlines(keepends=True):
        watch.see(line)
    assert watch.say() == "40/677 fetched, 20/677 unpacked, 25/677 set up packages"


def test_debootstrap_progress_from_recorded_output():
    watch = rootbuild.Debootstrap()
    for line in (DATA / "debootstrap-trixie.log").read_text().splitlines(keepends=True):
        watch.see(line)
    assert watch.say() == "Retrieving Packages"


# -- cleanup of an interrupted build ------------------------------------------------------

def test_undo_stops_marked_processes_and_removes_the_partial_root(tmp_path, state):
    rel = release.load("epoxy")
    run = Run("abc123", state)
    run.create(kind="aio-root")
    where = rootcache.partial(tmp_path / "cache", rel, run.run_id)
    (where / "root").mkdir(parents=True)
    mark = rootbuild.mark_of(run)
    child = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60; wait"], start_new_session=True,
                             env={**os.environ, procs.MARKER: mark})
    time.sleep(0.3)
    assert len(procs.marked(mark)) >= 2
    run.unlock()
    rootbuild.undo_root_build(run, {"kind": "aio_root", "path": str(where), "marker": mark})
    child.wait(timeout=5)
    assert procs.marked(mark) == [] and not where.exists() and (tmp_path / "cache").is_dir()


@settings(max_examples=100, **SETTINGS)
@given(st.sampled_from(["/", "/tmp", "/etc/.epoxy-35b9e18238bc.abc123.partial/..",
                        "relative/.epoxy-35b9e18238bc.abc123.partial",
                        "/c/.epoxy-35b9e18238bc.ffffff.partial", "/c/epoxy-35b9e18238bc"])
       | st.text(max_size=60), st.sampled_from(["aio-root-abc123", "aio-root-ffffff", None]))
def test_undo_never_touches_what_is_not_its_partial_root(tmp_path, path, mark):
    run = Run("abc123", tmp_path)
    if isinstance(path, str) and os.path.isabs(path) and mark == "aio-root-abc123" and \
            rootcache.PARTIAL_RE.match(Path(path).name or "-") and ".." not in Path(path).parts \
            and rootcache.PARTIAL_RE.match(Path(path).name).group(3) == "abc123":
        return                                   # a well-formed entry: the test above
    with pytest.raises(ValueError, match="left alone"):
        rootbuild.undo_root_build(run, {"kind": "aio_root", "path": path, "marker": mark})


def test_cleanup_backend_aio_owns_a_root_build(state):
    from vnetbench.cli_testbed import _cleanup_backend
    run = Run("abc123", state)
    run.create(kind="aio-root")
    run.unlock()
    assert _cleanup_backend(run) == "aio"



# -- the build's control flow, its commands replaced --------------------------------------

@pytest.fixture
def fake_steps(monkeypatch):
    """Steps that make the tree debootstrap would and report INSTALLED as dpkg's."""
    rel = release.load("epoxy")
    box = {"installed": dict(rel.packages), "ran": []}

    def run(self, name, argv, timings, watch):
        box["ran"].append(name)
        timings[name] = 0.0
        if name == "debootstrap":
            root = Path(argv[argv.index("trixie") + 1])
            for d in ("usr/bin", "usr/sbin", "etc/apt/apt.conf.d", "etc/dpkg/dpkg.cfg.d"):
                (root / d).mkdir(parents=True)
    monkeypatch.setattr(rootbuild.Steps, "run", run)
    monkeypatch.setattr(rootbuild.Steps, "installed", lambda self, root: box["installed"])
    monkeypatch.setattr(rootbuild, "debootstrap_ready", lambda progress, suite: None)
    return box


def test_build_publishes_a_complete_root_and_leaves_no_run(tmp_path, state, fake_steps):
    rel = release.load("epoxy")
    cache = tmp_path / "cache"
    final, marker = rootbuild.build(rel, cache, progress=lambda m: None)
    assert fake_steps["ran"] == ["debootstrap", "apt-get update", "install", "apt-get clean"]
    assert final == rootcache.entry(cache, rel) and rootcache.cached(cache, rel) == marker
    assert (final / "root/usr/sbin/policy-rc.d").read_text().endswith("exit 101\n")
    assert not (final / "root" / rootbuild.UNSAFE_IO).exists()
    assert [kind for _, kind in rootcache.entries(cache)] == ["complete"]
    assert list(state.iterdir()) == []


def test_build_with_a_pin_not_installed_leaves_nothing(tmp_path, state, fake_steps):
    rel = release.load("epoxy")
    fake_steps["installed"] = {**rel.packages, "haproxy": "3.0.10-1"}
    with pytest.raises(VnetbenchError, match="installed at another version: haproxy"):
        rootbuild.build(rel, tmp_path / "cache", progress=lambda m: None)
    assert rootcache.entries(tmp_path / "cache") == [] and list(state.iterdir()) == []
