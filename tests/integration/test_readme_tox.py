"""`tox -e functional`, as the README names it, works after the README's setup: tox is
installed with the rest (it was not: 'command not found' after `make test`), builds its
environment from tox.ini and runs one row of the functional matrix on the embedded
testbed. tests/unit/test_readme_commands.py checks every other README command's
subcommands and options; this one runs for real because tox builds an environment of its
own that nothing else exercises."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_tox_functional_runs_one_row(tmp_path):
    tox = BIN / "tox"
    assert tox.exists(), f"the README's `tox -e functional` needs tox; the setup put none in {BIN}"
    out = tmp_path / "matrix"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",      # flowgen, as after setup
           "VNETBENCH_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [str(tox), "-e", "functional", "--workdir", str(tmp_path / "tox"), "--",
         "--vswitch", "linuxbridge", "--network", "flat", "--out", str(out),
         "--", "-k", "test_same_ips_each_vnet_reaches_itself"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    cells = json.loads((out / "matrix.json").read_text())
    text = json.dumps(cells)
    assert "linuxbridge" in text and "Pass" in text, text[:2000]
