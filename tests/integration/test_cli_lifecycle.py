"""The CLI end to end: up/status/exec/down, two testbeds at once, and refusals
(missing binary, not root) that exit 2 with one line and build nothing."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leaks import leftovers

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def vnetbench(*args, env=None, user=None, check=False):
    argv = [sys.executable, "-m", "vnetbench", *args]
    if user:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def env(state_dir):
    return {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}


def test_two_testbeds_up_at_once(env, state_dir, caps):
    files = [EXAMPLES / "ovs-vxlan.yaml", EXAMPLES / "linuxbridge-vxlan.yaml"]
    runs = []
    for f in files:
        st = json.loads(vnetbench("testbed", "up", "--json", "-q", str(f), env=env, check=True).stdout)
        runs.append(st["run_id"])
    status = json.loads(vnetbench("testbed", "status", "--json", env=env, check=True).stdout)
    assert sorted(s["run_id"] for s in status) == sorted(runs)
    assert all(s["status"] == "up" and all(v["present"] for v in s["vms"]) for s in status)
    for rid in runs:   # same addresses in both testbeds, no clash: each answers in its own namespaces
        done = vnetbench("testbed", "exec", "--run", rid, "cross-a", "--",
                         "ping", "-c", "2", "-i", "0.1", "-W", "1", "198.19.1.4", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    pinned = vnetbench("testbed", "exec", "--run", runs[0], "cross-b", "--", "grep",
                       "Cpus_allowed_list", "/proc/self/status", env=env, check=True).stdout
    assert pinned.split()[-1] == "1"
    ambiguous = vnetbench("testbed", "down", env=env)
    assert ambiguous.returncode == 2 and "several testbeds are up" in ambiguous.stderr
    for rid in runs:
        vnetbench("testbed", "down", "--run", rid, env=env, check=True)
        assert leftovers(rid, state_dir / rid) == {}


def test_missing_binary_is_refused(env, state_dir, tmp_path):
    """PATH without ovs-vswitchd: exit 2, one line naming it and its package."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for prog in ("ip", "taskset", "ping", "ethtool", "ovsdb-server", "ovsdb-tool", "ovs-vsctl",
                 "ovs-appctl"):
        if shutil.which(prog):
            (bin_dir / prog).symlink_to(shutil.which(prog))
    done = vnetbench("testbed", "up", str(EXAMPLES / "ovs-vxlan.yaml"),
                     env={**env, "PATH": str(bin_dir)})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "ovs-vswitchd not found" in done.stderr
    assert "openvswitch-switch" in done.stderr
    assert not state_dir.exists() or list(state_dir.iterdir()) == []


def test_not_root_is_refused(env, state_dir):
    done = vnetbench("testbed", "up", str(EXAMPLES / "ovs-vxlan.yaml"), env=env, user=65534)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "needs root" in done.stderr
    assert not state_dir.exists() or list(state_dir.iterdir()) == []


def test_unsupported_combination_is_refused(env, state_dir, caps):
    from vnetbench.testbed.model import NetType, VSwitchKind
    assert caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.GRE)   # no kernel gretap, or not wired
    done = vnetbench("testbed", "up", str(EXAMPLES / "linuxbridge-gre.yaml"), env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "gretap" in done.stderr
    assert not state_dir.exists() or list(state_dir.iterdir()) == []
