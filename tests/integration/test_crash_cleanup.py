"""SIGKILL the builder at random points of bring-up; ``vnetbench cleanup`` must then
remove everything the run made and nothing else -- including a namespace and a
bridge that look like ours but were made by the test."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyroute2 import netns

from leaks import decoys_touched, processes_mentioning

REPO = Path(__file__).resolve().parents[2]
TESTBED = REPO / "examples" / "ovs-vxlan.yaml"
# testbed -> span of the kill points (s after the run dir exists): its bring-up time
CRASHED = {"ovs-vxlan": 1.0, "ovn-geneve": 2.5, "ovs-openflow-vxlan": 2.5, "vrouter-gre": 2.5,
           "faucet-vlan": 3.0}
SEED = int(os.environ.get("VNETBENCH_CHAOS_SEED", time.time_ns() % 100000))
KILLS = 6          # per kind and run (random points: the seed is printed on a failure)


def _vnetbench(*args, env):
    return [sys.executable, "-m", "vnetbench", *args]


@pytest.mark.parametrize("name", sorted(CRASHED))
def test_cleanup_after_sigkill_at_random_points(state_dir, decoys, caps, name):
    from vnetbench.testbed.loader import load
    tb = load(REPO / "examples" / f"{name}.yaml")
    if caps.why_not(tb.vswitch.kind, tb.network.type):
        pytest.skip(caps.why_not(tb.vswitch.kind, tb.network.type))
    rng = random.Random(SEED)
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    delays = sorted(rng.uniform(0.0, CRASHED[name]) for _ in range(KILLS))   # after the run dir exists
    for i, delay in enumerate(delays):
        builder = subprocess.Popen(_vnetbench("testbed", "up", "-q", str(tb.source), env=env),
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_runs(state_dir, i + 1, builder)
        time.sleep(delay)
        builder.send_signal(signal.SIGKILL)
        builder.wait()
    run_ids = [p.name for p in state_dir.iterdir()]

    done = subprocess.run(_vnetbench("cleanup", env=env), env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    left = [n for n in netns.listnetns() for rid in run_ids if n.startswith(f"vnb-{rid}-")]
    assert left == [], f"namespaces left (seed {SEED}, delays {delays})"
    assert processes_mentioning(str(state_dir)) == [], f"processes left (seed {SEED})"
    assert list(state_dir.iterdir()) == [], f"state left (seed {SEED})"
    assert decoys_touched(decoys) == []


def _wait_for_runs(state_dir, n, builder, timeout=20):
    """Block until the n-th run directory exists: kill points then fall inside bring-up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state_dir.exists() and len(list(state_dir.iterdir())) >= n:
            return
        assert builder.poll() is None, "builder exited before creating its run"
        time.sleep(0.005)
    raise AssertionError(f"no run directory after {timeout} s")


def test_failed_bring_up_unwinds(state_dir, caps, monkeypatch):
    """A failure half-way (here: an OVS transaction rejected) leaves nothing behind."""
    from vnetbench.errors import BuildError
    from vnetbench.testbed.loader import load
    from vnetbench.kinds.ovs import netns as ovs
    from vnetbench.testbed.netns import builder
    if caps.why_not(*_ovs_vxlan()):
        pytest.skip(caps.why_not(*_ovs_vxlan()))
    monkeypatch.setattr(ovs.OvsHost, "_transaction",
                        lambda self, dp: ["--", "add-br", "x", "--", "add-br", "x"])
    with pytest.raises(BuildError, match="failed and was unwound") as err:
        builder.up(load(TESTBED), caps=caps)
    run_id = str(err.value).split("bring-up of run ")[1].split()[0]
    assert [n for n in netns.listnetns() if n.startswith(f"vnb-{run_id}-")] == []
    assert processes_mentioning(str(state_dir)) == []
    assert list(state_dir.iterdir()) == []


def _ovs_vxlan():
    from vnetbench.testbed.model import NetType, VSwitchKind
    return VSwitchKind.OVS, NetType.VXLAN
