"""Property test with real bring-ups (issue 14): schema-generated testbed documents,
some mutated, given to ``vnetbench testbed up``: exit 0 (then ``down``) or exit 2
with one line, and afterwards nothing of the run is left on the machine. Few
examples: most of the input space is covered through ``validate`` in
tests/unit/test_hostile_input.py; these check that what validates also builds
(or is refused before anything is built)."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from hostile_docs import VALID, mutated, to_yaml  # noqa: E402
from interrupts import leftovers, vnetbench  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(VALID.map(lambda d: ("none", d)), mutated()))
def test_generated_testbeds_build_or_fail_in_one_line_and_leave_nothing(state_dir, case):
    kind, doc = case
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(to_yaml(doc))
        f.flush()
        up = subprocess.run(vnetbench("testbed", "up", "-q", f.name), env=env, capture_output=True,
                            text=True, timeout=180)
    rids = set(re.findall(r"\brun ([0-9a-f]{6})\b", up.stdout + up.stderr))
    try:
        assert up.returncode in (0, 2), (up.returncode, up.stderr[-600:])
        assert "Traceback" not in up.stderr
        if up.returncode == 2:
            assert up.stderr.count("\n") == 1 and len(up.stderr) <= 601, up.stderr[:600]
    finally:
        if up.returncode == 0:
            down = subprocess.run(vnetbench("testbed", "down"), env=env, capture_output=True,
                                  text=True, timeout=120)
            assert down.returncode == 0, down.stderr
    assert leftovers(state_dir, rids) == {}
