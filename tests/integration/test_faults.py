"""The fault API on real testbeds: live and cold migration (downtime from UDP probes),
vSwitch restart, controller instances taking over, management-network partition;
every fault leaves a timestamped record."""

import json
import os
import subprocess
import sys
import time

import pytest

from vnetbench.faults import Faults
from vnetbench.results.store import ResultStore
from vnetbench.testbed.loader import loads
from vnetbench.traffic import ping

KINDS = ["linuxbridge", "ovs", "ovs-openflow", "ovn", "vrouter"]
NTYPE = {"vrouter": "gre"}          # MPLS over GRE; the others on vxlan


def _ping(dep, src, dst, count=3, interval=0.1):
    argv = ping.command(ping.PingParams(dest=dep.ip(dst), count=count, interval_s=interval))
    return ping.parse(dep.exec(src, argv, timeout=count * interval + 20).stdout)["received"]


def _answered(dep, src, dst, count, interval) -> set[int]:
    """The sequence numbers of the echoes SRC sent to DST that were answered."""
    argv = ping.command(ping.PingParams(dest=dep.ip(dst), count=count, interval_s=interval))
    return set(ping.replies(dep.exec(src, argv, timeout=count * interval + 20).stdout))


def _testbed(vswitch, ntype="vxlan"):
    return loads(f"vswitch: {vswitch}\nnetwork: {{type: {ntype}}}\n", source="<test_faults>",
                 online_cpus=[0, 1])


@pytest.fixture
def testbeds(netns_up):
    return lambda *args: netns_up(_testbed(*args))


@pytest.mark.parametrize("kind", KINDS)
def test_migration_and_vswitch_restart(testbeds, kind, tmp_path):
    dep = testbeds(kind, NTYPE.get(kind, "vxlan"))
    results = tmp_path / "faults.jsonl"
    f = Faults(dep, results)
    live = f.migrate("cross-b", "h1", live=True, peer="same-a")
    assert dep.testbed.vm("cross-b").host == "h1"
    assert live["sent"] >= 500 and live["interval_ms"] == 5.0
    assert 0 < live["downtime_ms"] < 3000, live       # the port was away: probes were lost
    assert _ping(dep, "cross-a", "cross-b") == 3 and _ping(dep, "cross-b", "same-a") == 3
    cold = f.migrate("cross-b", "h2", live=False)
    assert cold["move_s"] > 0
    assert _ping(dep, "cross-a", "cross-b") == 3 and _ping(dep, "cross-b", "cross-a") == 3
    f.vswitch_restart("h2")
    assert _ping(dep, "cross-a", "cross-b") == 3
    recs = list(ResultStore(results))
    assert [r.labels["fault"] for r in recs] == ["migrate-live", "migrate-cold", "vswitch-restart"]
    assert all(r.test == "fault" and 0 < r.started <= r.finished for r in recs)
    assert recs[0].samples["downtime_ms"] == [live["downtime_ms"]]


def test_partition_cuts_only_the_control_plane(testbeds):
    dep = testbeds("{kind: ovs-openflow, openflow: {inactivity_probe_ms: 1000}}")
    f = Faults(dep)
    assert _ping(dep, "cross-a", "cross-b") == 3
    f.partition()
    # installed flows carry on: every echo from the second on is answered. The first, sent
    # ~10 ms after the cut, was lost in 10 of 635 runs (the cut as a link down or as a
    # bridge port disabled, with or without a settle before it; captured lost at h1's
    # egress, h2's egress and h1's ingress). Without the cut, 1 run in 95 punted that packet
    # to the controller (a reply missing h2's installed rule). Not root-caused:
    # bench/bench_partition.py reproduces it; the claim leaves that one echo out.
    answered = _answered(dep, "cross-a", "cross-b", 10, 0.2)
    assert answered >= set(range(2, 11)), sorted(answered)
    assert _ping(dep, "same-a", "same-b") == 0                  # a new flow needs the controller
    f.heal()
    deadline = time.monotonic() + 15
    while _ping(dep, "same-a", "same-b", 2, 0.2) == 0:
        assert time.monotonic() < deadline, "no new flows 15 s after the heal"
    assert [r.labels["fault"] for r in f.log.records] == ["partition", "heal"]


def test_second_controller_instance_takes_over(testbeds):
    dep = testbeds("{kind: ovs-openflow, openflow: {controllers: 2}}")
    assert _ping(dep, "cross-a", "cross-b") == 3
    Faults(dep).controller_kill("osken-0")
    deadline = time.monotonic() + 10
    while _ping(dep, "same-a", "same-b", 2, 0.2) == 0:        # a new flow: osken-1 is master
        assert time.monotonic() < deadline, "osken-1 did not take over within 10 s"


def test_cli_migrate_live_prints_the_downtime(testbeds, tmp_path):
    dep = testbeds("ovs-openflow")
    results = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "vnetbench", "fault", "migrate", "cross-b", "h1",
                           "--json", "--results", str(results)], capture_output=True, text=True,
                          timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[0])
    assert out["downtime_ms"] > 0 and results.exists()
    bad = subprocess.run([sys.executable, "-m", "vnetbench", "fault", "migrate", "cross-b", "h9"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no host named 'h9'" in bad.stderr


EGRESS = """
vswitch: ovs
network: {type: vxlan}
vnets: [{name: red, cidr: 198.19.1.0/24}]
vms:
  - {name: limited, host: h1, vnets: [{name: red, qos: {max_kbps: 10000, direction: egress}}]}
  - {name: receiver, host: h2, vnets: [red]}
"""


@pytest.mark.whole_machine     # the restored rate within 10 % of the limit
def test_ovs_egress_meter_comes_back_only_through_the_agent(netns_up):
    """ovs: an ovs-vswitchd restart loses the egress meter; the host's agent notices the
    missing canary flow and re-provisions it (a log line each time). With the agent
    stopped, the same restart leaves the VM unlimited: the functional row measures it."""
    from vnetbench.functional import measure, verdict
    from vnetbench.functional.verdict import Status
    from vnetbench.kinds.ovs import netns as ovs
    from vnetbench.linux import proc
    dep = netns_up(loads(EGRESS, source="<egress restart>", online_cpus=[0, 1]))
    f, agent = Faults(dep), dep.run.dir / "h1" / ovs.AGENT

    def after_restart():
        f.vswitch_restart("h1")
        m = {"limit_mbps": 10.0, "interval_s": 0.2, "steady_s": 3, "restart_ms": 0,
             **measure.receiver_rate(dep, "receiver", "limited", 7, udp_bps=20_000_000,
                                     interval_s=0.2)}
        return verdict.rate_restored(m)
    v = after_restart()
    assert v.status is Status.PASS and 0 < v.value < 5, v
    assert '"reprovisioned"' in agent.with_suffix(".log").read_text()
    pid, mark = int(agent.with_suffix(".pid").read_text()), f"--pidfile={agent}.pid"
    assert proc.stop(pid, lambda p: mark in proc.argv(p), grace=1.0)
    v = after_restart()
    assert v.status is Status.FAIL and v.value > 15, v
