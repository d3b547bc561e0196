"""After the README's setup (this suite runs after `make install`), every program the README
tells users to run is installed and answers, and `tox -e functional` works as named: tox
is installed with the rest (it was not: 'command not found' after `make test`), builds its
environment from tox.ini and runs one row of the functional matrix on the embedded
testbed. tests/unit/test_readme_commands.py checks each README command's subcommands and
options against the programs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from readme_commands import readme_commands  # noqa: E402  (the unit tests' README reader)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMMANDS = readme_commands((REPO / "README.md").read_text())


@pytest.mark.parametrize("program", sorted({c.split()[0] for c in COMMANDS}))
def test_each_program_is_installed_and_answers(program):
    where = BIN / program if (BIN / program).exists() else shutil.which(program)
    assert where, f"the README names '{program}', but the setup installed no such program " \
                  f"(neither {BIN} nor PATH has it)"
    ask = ["server", "-h"] if program == "vnetbench-flowgen" else ["--help"]    # a mode's flags (Go)
    done = subprocess.run([str(where), *ask], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0 and (done.stdout + done.stderr).strip(), \
        f"{program} {' '.join(ask)}: exit {done.returncode}: {done.stderr[-500:]}"


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
    cells = json.loads((out / "matrix.json").read_text())["cells"]
    row = [(c["vswitch"], c["network"], c["status"]) for c in cells if c["row"] == "isolation.same-ips"]
    assert row == [("linuxbridge", "flat", "Pass")], cells
