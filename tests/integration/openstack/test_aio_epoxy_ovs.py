"""ML2/OVS on Epoxy (aio up --release epoxy --ml2 ovs): the session's cloud is ML2/OVN
(upstream's default), so this driver gets a cloud of the test's own, before the session's
comes up (aio_alone): one node, its OVS and L3 agents alive, a pinned server booted from
Glance bound by the OVS driver to the AIO's netdev integration bridge, the runner's ping
answered once a security-group rule admits it and not before; `down` leaves nothing.
(Its SIGKILL-then-cleanup on two nodes is test_aio's.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import aio_alone
from aio_nodes import layout_of, leftovers

REPO = Path(__file__).resolve().parents[3]
AIO = [sys.executable, "-m", "vnetbench.aio"]
BOOT_S = 300


@pytest.mark.own_aio
def test_epoxy_ml2_ovs_boots_a_pinned_server_the_runner_reaches(request, tmp_path):
    aio_alone.alone(request.config)
    image = request.getfixturevalue("aio_image")
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(tmp_path / "registered")}
    state = Path(tempfile.mkdtemp(prefix="vnbaio-", dir="/var/tmp")).resolve()
    lay, ok = None, False
    try:
        up = subprocess.run([*AIO, "up", "--state", str(state), "--image", str(image), "--release",
                             "epoxy", "--ml2", "ovs", "--computes", "1"],
                            capture_output=True, text=True, timeout=1800, cwd=REPO, env=env)
        assert up.returncode == 0, f"aio up failed (logs in {state}/logs):\n{up.stderr[-3000:]}"
        print(up.stderr.strip().splitlines()[-1])
        lay = layout_of(state / "clouds.yaml")
        _boot_and_reach(state / "clouds.yaml", lay)
        ok = True
    finally:
        down = subprocess.run([*AIO, "down", "--state", str(state)], capture_output=True, text=True,
                              timeout=600, cwd=REPO, env=env)
        assert down.returncode == 0, down.stderr[-2000:]
        assert lay is None or leftovers(lay) == []
        if ok:
            shutil.rmtree(state, ignore_errors=True)


def _boot_and_reach(clouds: Path, lay) -> None:
    from vnetbench.testbed.openstack import cloud
    c = cloud.connect("vnetbench-aio", str(clouds))
    try:
        alive = {(a.agent_type, a.host) for a in c.network.agents() if a.is_alive}
        assert {("Open vSwitch agent", lay.host), ("L3 agent", lay.host)} <= alive, alive
        assert c.config.config["vnetbench"]["mechanism_driver"] == "openvswitch"
        net = c.network.find_network("vnetbench-flat", ignore_missing=False)
        group = c.network.create_security_group(name=f"vnbaio{lay.run_id}-probe")
        server = c.compute.create_server(
            name=f"vnbaio{lay.run_id}-probe", networks=[{"uuid": net.id}], security_groups=[{"name": group.name}],
            image_id=c.image.find_image("vnetbench-guest", ignore_missing=False).id,
            flavor_id=c.compute.find_flavor("vnetbench-pinned", ignore_missing=False).id)
        t0 = time.monotonic()
        server = c.compute.wait_for_server(server, wait=BOOT_S)
        (port,) = c.network.ports(device_id=server.id)
        assert port.binding_vif_type == "ovs" and port.binding_vif_details["datapath_type"] == "netdev"
        assert port.binding_vif_details.get("bridge_name", lay.br_int) == lay.br_int
        ip = port.fixed_ips[0]["ip_address"]
        _wait_console(c, server, t0 + BOOT_S)
        assert not _pings(ip, 3), "the runner's ping answered before any rule admitted it"
        c.network.create_security_group_rule(security_group_id=group.id, direction="ingress",
                                             protocol="icmp", ethertype="IPv4")
        assert _pings(ip, 30), f"no echo from {ip} 30 s after the ICMP rule"
        print(f"epoxy/ovs: server ACTIVE and booted in {time.monotonic() - t0:.0f} s, ping answered")
    finally:
        c.close()


def _wait_console(c, server, deadline: float) -> None:
    while time.monotonic() < deadline:
        if "vnetbench-guest: ready" in c.compute.get_server_console_output(server).get("output", ""):
            return
        time.sleep(2)
    pytest.fail(f"the guest did not say it was ready within {BOOT_S} s")


def _pings(ip: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(["ping", "-c", "1", "-W", "1", ip], capture_output=True).returncode == 0:
            return True
    return False
