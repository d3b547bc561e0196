"""The libvirt backend on the embedded testbed: real QEMU guests (TCG here) booted from
the project's image, plugged into the emulated hosts' OVS and Linux bridge, reached over
SSH; the shipped Rally tasks run in them with only task arguments changed; teardown and
SIGKILL-then-cleanup leave no domain, tap, namespace or process, and spare a decoy domain
whose name looks like ours."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaks import leftovers
from vnetbench.image import build
from vnetbench.rally_plugins.context import testbed_yaml as make_testbed
from vnetbench.testbed import deployment
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.deployment import connect
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import NetType, VSwitchKind
from vnetbench.traffic import ping

REPO = Path(__file__).resolve().parents[2]
VNETBENCH = str(Path(sys.executable).parent / "vnetbench")


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vnetbench" / "image"
    out = tmp_path_factory.mktemp("image")
    build.build(out, cache, formats=("kernel",), flowgen=build.default_flowgen())
    return out


def domains_of(run_id: str) -> list[str]:
    conn = connect()
    try:
        return [d.name() for d in conn.listAllDomains() if d.name().startswith(f"vnb-{run_id}-")]
    finally:
        conn.close()


def taps_of(run_id: str) -> list[str]:
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if run_id in line.split()[0]]


def nothing_left(run_id: str, state_dir: Path) -> dict:
    left = leftovers(run_id, state_dir / run_id)
    left.update({k: v for k, v in (("domains", domains_of(run_id)), ("taps", taps_of(run_id))) if v})
    return left


@pytest.mark.parametrize("vswitch, network, placements", [
    ("ovs", "vxlan", ["same-host", "cross-host"]),
    ("linuxbridge", "flat", ["cross-host"]),
])
def test_guest_pairs_on_the_vswitch(state_dir, image, caps, vswitch, network, placements):
    if caps.why_not(VSwitchKind(vswitch), NetType(network)):
        pytest.skip(caps.why_not(VSwitchKind(vswitch), NetType(network)))
    tb = loads(make_testbed(vswitch, network, None, placements), source="<test>",
               online_cpus=sorted(os.sched_getaffinity(0)))
    t0 = time.monotonic()
    dep = deployment.build("libvirt", tb, image_dir=image)
    print(f"{vswitch}/{network}: {len(tb.vms)} guests up in {time.monotonic() - t0:.1f} s")
    try:
        again = deployment.attach(dep.run_id)
        assert again.backend == "libvirt" and len(domains_of(dep.run_id)) == len(tb.vms)
        conn = connect()
        try:     # pinning as the live domains report it
            for vm in tb.vms:
                d = conn.lookupByName(dom.Names(dep.run_id).domain(vm.name))
                assert [{c for c, on in enumerate(m) if on} for m in d.vcpuPinInfo(0)] == \
                    [{c} for c in vm.cpus]
        finally:
            conn.close()
        for pair in tb.pairs:
            a, b = pair.vms
            for src, dst in ((a, b), (b, a)):      # the guests' own stacks, across the vSwitch
                again.exec(src, ping.command(ping.PingParams(dep.ip(dst), count=1, reply_timeout_s=10)))
                out = again.exec(src, ping.command(ping.PingParams(dep.ip(dst), count=3, interval_s=0.2)))
                res = ping.parse(out.stdout)
                assert res["received"] == 3, (pair.placement, src, dst, out.stdout, out.stderr)
            hostname = again.exec(a, ["cat", "/proc/sys/kernel/osrelease"]).stdout
            assert "cloud-amd64" in hostname                        # a real guest kernel
        assert "tx-checksumming: off" in again.exec(tb.vms[0].name, ["ethtool", "-k", "eth0"]).stdout
    finally:
        errors = dep.down()
    assert not errors
    assert nothing_left(dep.run_id, state_dir) == {}


def test_rally_tasks_run_in_guests(rally, image, tmp_path, caps):
    """icmp-rtt and tcp-mss, unchanged, with backend and image as task arguments."""
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    records = tmp_path / "records.jsonl"
    args = {"vswitch": "ovs", "network": "vxlan", "backend": "libvirt", "image": str(image),
            "repetitions": 1, "deferred_count": 3, "flood_count": 30, "flood_interval_s": 0.01,
            "sweep_count": 5, "payloads": [64, 1400], "seconds": 2, "results": str(records),
            "min_gbps": 0.001}          # TCG guests on a loaded 2-CPU machine: Mbit/s, not Gbit/s
    for task in ("icmp-rtt", "tcp-mss"):
        out = rally("task", "start", "--env", "vnetbench", str(REPO / "rally-tasks" / f"{task}.yaml"),
                    "--task-args", json.dumps(args))
        uuid = out.stdout.split("rally task report ")[1].split()[0]
        sla = json.loads(rally("task", "sla-check", uuid, "--json", check=False).stdout)
        assert sla and all(c["status"] == "PASS" for c in sla), sla
    recs = [json.loads(line) for line in records.read_text().splitlines()]
    assert {r["test"] for r in recs} == {"icmp_rtt", "tcp_stream"}
    assert {r["labels"]["placement"] for r in recs} == {"same-host", "cross-host"}
    tcp = [r for r in recs if r["test"] == "tcp_stream"]
    assert tcp and all(v > 0 for r in tcp for v in r["samples"]["gbps"])
    rtt = [r for r in recs if r["test"] == "icmp_rtt"]
    assert all(r["metrics"]["loss_pct"]["mean"] == 0 for r in rtt)
    assert not list(rally.state.glob("*/journal.jsonl"))          # every testbed torn down


def test_sigkill_during_bring_up_then_cleanup(state_dir, image, tmp_path, caps):
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    decoy = "vnb-ffffff-same-a"          # our naming, not our run: must survive cleanup
    conn = connect()
    try:
        xml = (f"<domain type='qemu'><name>{decoy}</name><memory unit='MiB'>64</memory>"
               "<os><type arch='x86_64'>hvm</type></os></domain>")
        conn.defineXML(xml)
        f = tmp_path / "tb.yaml"
        f.write_text(make_testbed("ovs", "vxlan", None, ["cross-host"]))
        env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir)}
        p = subprocess.Popen([VNETBENCH, "testbed", "up", str(f), "--backend", "libvirt",
                              "--image", str(image), "-q"], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0 = time.monotonic()        # wait until guests exist, then a little longer at random
        while time.monotonic() - t0 < 120 and p.poll() is None:
            journals = list(state_dir.glob("*/journal.jsonl"))
            if journals and '"domain"' in journals[0].read_text():
                break
            time.sleep(0.1)
        time.sleep(random.uniform(0, 3))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        runs = [d.name for d in state_dir.iterdir() if d.is_dir()]
        assert runs, "the bring-up left no run to clean"
        done = subprocess.run([VNETBENCH, "cleanup"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        for rid in runs:
            assert nothing_left(rid, state_dir) == {}
        assert decoy in [d.name() for d in conn.listAllDomains()]
    finally:
        try:
            conn.lookupByName(decoy).undefine()
        finally:
            conn.close()
