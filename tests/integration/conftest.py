"""Functional tests build real testbeds in network namespaces: they need root."""

import os
import subprocess
import sys
from pathlib import Path

import secrets

import pytest
from pyroute2 import IPRoute, NetNS, netns

import lanes
import leaks
import turns
from leaks import leftovers
from vnetbench.testbed import capabilities
from vnetbench.testbed.netns import builder


OPENSTACK = Path(__file__).parent / "openstack"


def pytest_collection_modifyitems(config, items):
    # the all-in-one cloud's tests last: its session-scoped cloud (about 15 processes that
    # poll and tick) is then up only while they run, not idle beside the guests' tests
    items.sort(key=lambda item: OPENSTACK in item.path.parents)
    lane = lanes.selected()
    if lane is not None:            # the test command's lanes (lanes.py)
        other = [item for item in items if lanes.lane_of(item.path) != lane]
        if other:
            config.hook.pytest_deselected(items=other)
            items[:] = [item for item in items if lanes.lane_of(item.path) == lane]
    if lane == "netns":
        items[:] = turns.first_whole_machine(items)
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create namespaces")
        for item in items:
            item.add_marker(skip)


# --- the module guard: after each test module, nothing it started is left ---------------
#
# A module that leaves a namespace, a root-namespace link (tap, veth, bridge), a QEMU
# process, a libvirt domain or a daemon running from a test's directory fails at its last
# test's teardown, naming what it left, instead of making a later module fail for reasons
# nobody can see (issue 21). What session-scoped fixtures make (the all-in-one cloud) is
# theirs: it is checked once they are torn down, at the end of the session.
# VNETBENCH_LEAK_GUARD=off turns it off (e.g. with another suite running on the machine).
# A plugin, not hooks of this conftest: pytest asks a session-scoped fixture's hooks of
# the session node, which a conftest below the root directory does not reach.

def pytest_configure(config):
    stale = _stale_flowgen()
    if stale:
        raise pytest.UsageError(stale)
    try:
        lane = lanes.selected()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(turns.Turns(lane), "vnetbench-machine-turns")
    if os.geteuid() == 0 and os.environ.get("VNETBENCH_LEAK_GUARD", "on") != "off":
        config.pluginmanager.register(leaks.ModuleGuard(Path(__file__).parent, lane), "vnetbench-module-guard")


def _stale_flowgen() -> str | None:
    """The Go tool in the venv, older than its sources: the guests' image and the netns
    tests would run an earlier build (a guest's counter without ``--replies`` failed the
    broadcast scenario as 'no JSON result line' while a clean clone passed). ``make``
    rebuilds it; running pytest directly after a pull does not."""
    binary = Path(sys.executable).parent / "vnetbench-flowgen"
    src = Path(__file__).resolve().parents[2] / "tools" / "flowgen"
    if not binary.exists():
        return None
    newer = [p.name for p in sorted(src.glob("*.go")) + [src / "go.mod"]
             if p.exists() and not p.name.endswith("_test.go") and p.stat().st_mtime > binary.stat().st_mtime]
    return newer and (f"{binary} is older than tools/flowgen/{', '.join(newer)}: the tests would run "
                      f"an earlier build of the tool; run 'make flowgen' (or 'make install')")


@pytest.fixture(scope="session")
def caps():
    return capabilities.probe()


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """Each test keeps its runs in a private state root, so it can find exactly its own."""
    root = tmp_path / "state"
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(root))
    return root


@pytest.fixture
def netns_up(caps, state_dir):
    """``netns_up(testbed)``: TESTBED built on the netns backend, or the test skipped naming
    what this kernel lacks for its kind and network type. After the test every testbed
    built is torn down and must leave no namespace, process or state."""
    built = []

    def make(tb):
        reason = caps.why_not(tb.vswitch.kind, tb.network.type)
        if reason:
            pytest.skip(f"{tb.vswitch.kind.value}/{tb.network.type.value} unsupported here: {reason}")
        built.append(builder.up(tb, caps=caps))
        return built[-1]
    yield make
    problems = {}
    for dep in built:
        errors, left = dep.down(), leftovers(dep.run_id, dep.run.dir)
        if errors or left:
            problems[dep.run_id] = {"teardown errors": errors, "left": left}
    assert problems == {}


RALLY = str(Path(sys.executable).parent / "rally")


def _rally(conf: Path, home: Path, env: dict, *args, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([RALLY, "--config-file", str(conf), *args], cwd=home,
                          capture_output=True, text=True, timeout=900, env=env)
    assert not check or done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="session")
def rally_db(tmp_path_factory) -> Path:
    """The config file of a private Rally database with the env 'vnetbench': made once a
    session (each rally start costs seconds), shared by the modules' ``rally``."""
    home = tmp_path_factory.mktemp("rally-db")
    conf = home / "rally.conf"
    conf.write_text(f"[database]\nconnection = sqlite:///{home / 'rally.sqlite'}\n")
    _rally(conf, home, dict(os.environ), "db", "create")
    _rally(conf, home, dict(os.environ), "env", "create", "--name", "vnetbench", "--no-use")
    return conf


@pytest.fixture(scope="module")
def rally(rally_db, tmp_path_factory):
    """``rally(*args, check=True)`` with the session's private Rally database and env
    ('vnetbench'), and this module's private vnetbench state dir (``rally.state``) for
    the testbeds it builds."""
    home = tmp_path_factory.mktemp("rally")
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(home / "state")}

    def run(*args, check=True):
        return _rally(rally_db, home, env, *args, check=check)
    run.state = home / "state"
    return run


@pytest.fixture
def decoys():
    """A namespace and a root-namespace bridge named like a run's, but not owned."""
    fake = secrets.token_hex(3)
    ns_name, br_name = f"vnb-{fake}-h-h1", f"br{fake}-0"
    netns.create(ns_name)
    with NetNS(ns_name) as ns:
        ns.link("add", ifname=f"br{fake}-0", kind="bridge")
    with IPRoute() as ipr:
        ipr.link("add", ifname=br_name, kind="bridge")
    yield ns_name, br_name
    with IPRoute() as ipr:
        for idx in ipr.link_lookup(ifname=br_name):
            ipr.link("del", index=idx)
    if ns_name in netns.listnetns():
        netns.remove(ns_name)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The project's guest image, kernel + initrd, for the libvirt tests (built from the
    package cache: seconds)."""
    from vnetbench.image import build
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vnetbench" / "image"
    out = tmp_path_factory.mktemp("image")
    build.build(out, cache, formats=("kernel",), flowgen=build.default_flowgen())
    return out
