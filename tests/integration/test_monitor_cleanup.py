"""A monitor and the collectors of the testbeds attached to it are owned like the
testbeds: SIGKILL the attaching ``testbed up`` at random points, then
``vnetbench cleanup`` leaves no namespace, process, target list or state."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from leaks import processes_mentioning
from pyroute2 import netns

REPO = Path(__file__).resolve().parents[2]
TESTBED = REPO / "examples" / "ovs-vxlan.yaml"
SEED = int(os.environ.get("VNETBENCH_CHAOS_SEED", time.time_ns() % 100000))


def vnetbench(*args):
    return [sys.executable, "-m", "vnetbench", *args]


def test_cleanup_after_sigkill_while_attaching(state_dir, tmp_path, caps):
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    up = subprocess.run(vnetbench("monitor", "up", "--data", str(tmp_path / "prom")), env=env,
                        capture_output=True, text=True, timeout=60)
    assert up.returncode == 0, up.stderr
    mon_id = up.stdout.split()[1]
    rng = random.Random(SEED)
    # around build -> attach, and once after the attach is surely done
    delays = sorted(rng.uniform(0.3, 1.2) for _ in range(3)) + [None]
    for delay in delays:
        p = subprocess.Popen(vnetbench("testbed", "up", "-q", "--monitor", mon_id, str(TESTBED)),
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if delay is None:      # the last one: once its collectors are attached (load-proof)
            _wait_for(lambda: len(list((state_dir / mon_id / "targets").glob("*.json"))) > 0, p)
        else:
            time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
    runs = [d.name for d in state_dir.iterdir()]
    targets = list((state_dir / mon_id / "targets").glob("*.json"))
    done = subprocess.run(vnetbench("cleanup"), env=env, capture_output=True, text=True, timeout=120)
    assert targets, "no testbed got as far as being attached"      # (checked after the cleanup)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [n for n in netns.listnetns() for r in runs if n.startswith(f"vnb-{r}-")] == []
    assert processes_mentioning(str(state_dir)) == [], f"seed {SEED}, delays {delays}"
    assert list(state_dir.iterdir()) == [], f"seed {SEED}"
    assert (tmp_path / "prom" / "tsdb").is_dir()          # the data is the user's: kept


def _wait_for(cond, p, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
