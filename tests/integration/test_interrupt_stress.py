"""Interrupt stress (issue 14): SIGINT to the process group, SIGTERM, two SIGTERMs
0.15 s apart and SIGKILL at random points of the 4 x 32 bring-up, and ``vnetbench
cleanup`` racing it. After every trial ``vnetbench cleanup`` must leave nothing of
the run (namespaces, root-namespace links, processes -- the OVS daemons and their
databases live in the run directory --, state), a signalled builder must exit
(never build on regardless) without a traceback, a racing cleanup must leave the
run being built alone, and a decoy named like ours must be untouched.

Signal points: uniform from 0.2 s to 1.3 x the time of one uninterrupted bring-up
(measured first), at most 3.5 s; a builder that has already exited is signalled at
once, as nothing of it is left to interrupt. 40 trials (the test command's time): a
failure that happens in 1 trial of 20 is missed with probability 0.95^40 = 13%, one in
1 of 10 with 1.5%. ``VNETBENCH_STRESS_TRIALS`` changes the count;
bench/bench_interrupts.py runs many more and reports the failure count."""

import os
import random
import time
from pathlib import Path

import pytest

from interrupts import MODES, bring_up_seconds, trial
from leaks import decoys_touched

REPO = Path(__file__).resolve().parents[2]
TESTBED = REPO / "examples" / "scale-4x32.yaml"
TRIALS = int(os.environ.get("VNETBENCH_STRESS_TRIALS", 40))
LATEST = 3.5           # s after the start: the latest signal point
SEED = int(os.environ.get("VNETBENCH_CHAOS_SEED", time.time_ns() % 100000))


def test_interrupts_and_cleanup_races_leave_nothing(state_dir, decoys, caps):
    from vnetbench.testbed.model import NetType, VSwitchKind
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    rng = random.Random(SEED)
    seconds, problems = bring_up_seconds(TESTBED, env)
    # signal points over the bring-up and the outcome printed after it, as far as 3.5 s
    latest = min(LATEST, max(1.0, 1.3 * seconds))
    print(f"uninterrupted bring-up {seconds:.1f} s: signal points 0.2..{latest:.1f} s")
    for i in range(TRIALS):
        problems += trial(MODES[i % len(MODES)], rng.uniform(0.2, latest), TESTBED, env)
    assert decoys_touched(decoys) == []
    assert not problems, (f"{len(problems)} problems in {TRIALS} trials (seed {SEED}, signal points "
                          f"0.2..{latest:.1f} s: an uninterrupted bring-up took {seconds:.1f} s):\n"
                          + "\n".join(problems[:8]))
