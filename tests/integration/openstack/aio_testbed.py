"""A testbed on the all-in-one cloud, as a user brings it up (the cloud modules' fixtures)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path


@contextlib.contextmanager
def up_on_the_aio(aio_cloud, tmp: Path, text: str, *flags):
    """TEXT brought up as admin on the AIO with ``vnetbench testbed up --backend openstack
    FLAGS`` (a process of its own, as a user runs it), attached in this process with its
    state dir; yields (deployment, the up's JSON status); ``testbed down`` after, which
    must succeed."""
    from vnetbench.testbed import deployment
    vnetbench = str(Path(sys.executable).parent / "vnetbench")
    (tmp / "tb.yaml").write_text(text)
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(aio_cloud), "VNETBENCH_STATE_DIR": str(tmp / "state")}
    done = subprocess.run([vnetbench, "testbed", "up", str(tmp / "tb.yaml"), "--backend", "openstack",
                           "--cloud", "vnetbench-aio", *flags, "--json"], env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    st = json.loads(done.stdout)
    saved = {k: os.environ.get(k) for k in ("OS_CLIENT_CONFIG_FILE", "VNETBENCH_STATE_DIR")}
    os.environ.update({k: env[k] for k in saved})
    try:
        yield deployment.attach(st["run_id"]), st
    finally:
        down = subprocess.run([vnetbench, "testbed", "down", "--run", st["run_id"]], env=env,
                              capture_output=True, text=True, timeout=900)
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    assert down.returncode == 0, down.stderr
