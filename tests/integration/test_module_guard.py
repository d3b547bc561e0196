"""The module guard itself (issue 21), on a suite of its own: a module that leaves a link
fails at its last teardown naming it; what a session-scoped fixture of a deeper conftest
makes is the session's, not the first module's (the all-in-one cloud's bridges were once
blamed on test_aio.py), and is checked once the session is over."""

import re
import secrets
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFTEST = f"""
import os, sys
from pathlib import Path
sys.path.insert(0, {str(HERE)!r})
import leaks

def pytest_configure(config):
    config.pluginmanager.register(leaks.ModuleGuard(Path(__file__).parent,
                                                    os.environ.get("VNETBENCH_TEST_LANE")), "guard")
"""
SESSION = """
import subprocess
import pytest

@pytest.fixture(scope="session")
def sess():
    subprocess.run(["ip", "link", "add", "{s}a", "type", "veth", "peer", "name", "{s}b"], check=True)
    yield
    subprocess.run(["ip", "link", "del", "{s}a"], check=True)
"""
LEAKY = """
import subprocess
def test_one(sess):
    pass
def test_two():
    subprocess.run(["ip", "link", "add", "{l}a", "type", "veth", "peer", "name", "{l}b"], check=True)
"""

# The inner suite's guard watches the whole machine it sees: so that it sees only what the
# inner suite does while the test command's other lane (lanes.py) builds testbeds, it runs
# in namespaces of its own: network (its "root-namespace links"), PID (its processes, no
# other QEMU), mount with a fresh /run (no other namespace, no libvirtd socket).
ALONE = ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c",
         'mount -t tmpfs tmpfs /run && mkdir /run/netns && ip link set lo up && exec "$0" "$@"']


# a test of a lane: a run of its own (a run directory in its temp tree) leaves a link
# named after the run; a link of no run of its own (the other lane's) appears meanwhile
LANE_LEAKY = """
import subprocess
def test_one(sess):
    pass
def test_two(tmp_path):
    (tmp_path / "state" / "{rid}").mkdir(parents=True)
    (tmp_path / "state" / "{rid}" / "journal.jsonl").write_text("")
    subprocess.run(["ip", "link", "add", "vnb{rid}a", "type", "veth", "peer", "name", "vnb{rid}b"], check=True)
    subprocess.run(["ip", "link", "add", "{l}a", "type", "veth", "peer", "name", "{l}b"], check=True)
"""


def _suite(root: Path, leaky: bool, s: str, l: str, lane: str | None = None,
           rid: str = "") -> subprocess.CompletedProcess:
    (root / "inner").mkdir(parents=True)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "inner" / "conftest.py").write_text(SESSION.format(s=s))
    body = (LANE_LEAKY if lane else LEAKY).format(l=l, rid=rid) if leaky else "def test_one(sess):\n    pass\n"
    (root / "inner" / "test_a.py").write_text(body)
    (root / "inner" / "test_b.py").write_text("def test_three(sess):\n    pass\n")
    return subprocess.run([*ALONE, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(root.parent), str(root)], capture_output=True, text=True, timeout=120,
                          env={"VNETBENCH_LEAK_GRACE_S": "1", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                               **({"VNETBENCH_TEST_LANE": lane} if lane else {})})


def test_a_leaking_module_fails_and_a_session_fixture_is_the_sessions(tmp_path):
    s, l = f"vgs{secrets.token_hex(2)}", f"vgl{secrets.token_hex(2)}"
    try:
        clean = _suite(tmp_path / "clean" / "suite", False, s, l)
        assert clean.returncode == 0, clean.stdout[-2000:]
        leaky = _suite(tmp_path / "leaky" / "suite", True, s, l)
        out = leaky.stdout
        assert leaky.returncode == 1, out[-2000:]
        assert f"inner/test_a.py left root-namespace links: {l}a, {l}b (" in out, out[-2000:]
        blamed = re.findall(r"left root-namespace links: ([^(]*)\(", out)
        assert blamed and not any(s in names for names in blamed), blamed
    finally:
        subprocess.run(["ip", "link", "del", f"{l}a"], capture_output=True)


def test_in_a_lane_the_guard_names_its_own_runs_leftovers_only(tmp_path):
    """The test command's lanes (lanes.py): what another session makes meanwhile is not
    this module's; what carries the id of a run this session made is."""
    s, l, rid = f"vgs{secrets.token_hex(2)}", f"vgl{secrets.token_hex(2)}", secrets.token_hex(3)
    leaky = _suite(tmp_path / "lane" / "suite", True, s, l, lane="netns", rid=rid)
    out = leaky.stdout
    assert leaky.returncode == 1, out[-2000:]
    assert f"inner/test_a.py left root-namespace links: vnb{rid}a, vnb{rid}b (" in out, out[-2000:]
    blamed = re.findall(r"left root-namespace links: ([^(]*)\(", out)
    assert blamed and not any(l in names for names in blamed), blamed
