"""`vnetbench functional --backend libvirt`: the shipped matrix's isolation rows measured in
real QEMU guests (TCG here) through the Deployment interface only, on one testbed (the
isolation module's six guests, booted once): the Go probe tool in the guests, captures on
the guests' own NICs, deprovisioning with the guests' clocks mapped onto the runner's;
the column names the backend; nothing is left behind."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_libvirt_backend import image, nothing_left  # noqa: F401  (image: a fixture)
from vnetbench.testbed.model import NetType, VSwitchKind

VNETBENCH = str(Path(sys.executable).parent / "vnetbench")
ROWS = ("isolation.same-ips", "isolation.unicast", "isolation.broadcast",
        "isolation.unknown-unicast", "isolation.deprovision", "feature.encapsulation")


def test_isolation_rows_in_libvirt_guests(state_dir, image, caps, tmp_path):  # noqa: F811
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    out = tmp_path / "matrix"
    t0 = time.monotonic()
    done = subprocess.run(
        [VNETBENCH, "functional", "--backend", "libvirt", "--image", str(image),
         "--vswitch", "ovs", "--network", "vxlan", "--out", str(out), "--",
         "-k", "test_isolation", "-p", "no:cacheprovider"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "VNETBENCH_STATE_DIR": str(state_dir)})
    print(f"isolation rows in 6 TCG guests: {time.monotonic() - t0:.0f} s")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["backend"] == "libvirt"
    cells = {c["row"]: c for c in matrix["cells"]}
    assert sorted(cells) == sorted(ROWS)
    assert {r: cells[r]["status"] for r in ROWS} == {r: "Pass" for r in ROWS}, \
        {r: cells[r]["detail"] for r in ROWS}
    # every leak row saw its own vnet's traffic on the guests' NICs (the capture works) and
    # none of it on the other vnet's guests
    for row in ("isolation.unicast", "isolation.broadcast"):
        m = cells[row]["measurement"]
        assert sum(m["other_vnet"].values()) == 0 and all(m["own_vnet"].values()), m
    dep = cells["isolation.deprovision"]
    assert dep["value"] < 1000 and dep["extra"]["clock_uncertainty_ms"] > 0     # a guest clock
    assert cells["feature.encapsulation"]["label"] == "VXLAN"
    assert "| libvirt ovs/vxlan |" in (out / "matrix.md").read_text()
    runs = [d.name for d in state_dir.iterdir()] if state_dir.exists() else []
    assert all(nothing_left(r, state_dir) == {} for r in runs)
