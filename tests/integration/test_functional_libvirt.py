"""`vnetbench functional --backend libvirt`: the shipped matrix's rows measured in real QEMU
guests (TCG here) through the Deployment interface only: captures on the guests' own NICs,
a DHCP server whose files the guest writes, host-side counters, the Go probe tool and
deprovisioning with the guests' clocks mapped onto the runner's; the column names the
backend; nothing is left behind."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_libvirt_backend import nothing_left
from vnetbench.testbed.model import NetType, VSwitchKind

VNETBENCH = str(Path(sys.executable).parent / "vnetbench")


def run_matrix(state_dir, image, out, select: str) -> dict:
    """The matrix's rows SELECTed (pytest -k) on libvirt ovs/vxlan: {row: cell}."""
    t0 = time.monotonic()
    done = subprocess.run(
        [VNETBENCH, "functional", "--backend", "libvirt", "--image", str(image),
         "--vswitch", "ovs", "--network", "vxlan", "--out", str(out), "--", "-k", select,
         "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=1200,
        env={**os.environ, "VNETBENCH_STATE_DIR": str(state_dir)})
    print(f"{select} in TCG guests: {time.monotonic() - t0:.0f} s")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["backend"] == "libvirt"
    assert "| libvirt ovs/vxlan |" in (out / "matrix.md").read_text()
    runs = [d.name for d in state_dir.iterdir()] if state_dir.exists() else []
    assert all(nothing_left(r, state_dir) == {} for r in runs)
    return {c["row"]: c for c in matrix["cells"]}


@pytest.fixture
def ovs_vxlan(caps):
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))


# once an intermittent failure (4 of 10 runs): the guest's dropbear closed the bonding
# row's new iperf3-server session without an exit status right after the DHCP row's session
# ended (VNETBENCH_SSH_DEBUG_LOG showed it); session.iperf3_server now opens such a lost
# session once more, with a warning (8 of 8 runs passed, one of them through the retry)
def test_feature_rows_in_two_libvirt_guests(ovs_vxlan, state_dir, image, tmp_path):
    """One testbed of two guests: every probe's control worked in the guests (the owner's
    capture saw the ARP requests, the guest's own udhcpd answered, the flows showed on
    the host's underlay), so ovs's absent features are N/A by detection, not Errors."""
    cells = run_matrix(state_dir, image, tmp_path / "m", "test_features")
    assert {r: c["status"] for r, c in cells.items()} == \
        {"feature.proxy-arp": "N/A", "feature.dhcp": "N/A", "feature.bonding": "N/A"}
    assert cells["feature.proxy-arp"]["measurement"]["requests_at_owner"] > 0
    assert "only the control server in red-2 answered" in cells["feature.dhcp"]["detail"]
    assert "all left h1 through one link" in cells["feature.bonding"]["detail"]


# Two testbeds of 6 and 5 TCG guests: 3 to 8 min measured here (other sessions' load made
# the spread; one run's guests did not boot within 180 s at a load average of 19), beyond
# what the test command has room for.
FULL = os.environ.get("VNETBENCH_LIBVIRT_FUNCTIONAL") == "1"
ROWS = ("isolation.same-ips", "isolation.unicast", "isolation.broadcast",
        "isolation.unknown-unicast", "isolation.deprovision", "feature.encapsulation",
        "rate.compliance", "rate.same-vnet", "rate.other-vnet")


@pytest.mark.whole_machine     # the guests' rate within 10 % of the limit
@pytest.mark.skipif(not FULL, reason="isolation + ingress rate-limit rows in 11 TCG guests: "
                    "3-8 min here; set VNETBENCH_LIBVIRT_FUNCTIONAL=1 to run them")
def test_isolation_and_rate_rows_in_libvirt_guests(ovs_vxlan, state_dir, image, tmp_path):
    cells = run_matrix(state_dir, image, tmp_path / "m", "test_isolation or (test_rate_limit and not egress)")
    assert sorted(cells) == sorted(ROWS)
    assert {r: cells[r]["status"] for r in ROWS} == {r: "Pass" for r in ROWS}, \
        {r: cells[r]["detail"] for r in ROWS}
    for row in ("isolation.unicast", "isolation.broadcast"):      # captured on the guests
        m = cells[row]["measurement"]
        assert sum(m["other_vnet"].values()) == 0 and all(m["own_vnet"].values()), m
    dep = cells["isolation.deprovision"]
    assert dep["value"] < 1000 and dep["extra"]["clock_uncertainty_ms"] > 0     # a guest clock
    assert 9 <= cells["rate.compliance"]["value"] <= 11
    assert cells["feature.encapsulation"]["label"] == "VXLAN"
