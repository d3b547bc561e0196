"""port_ready (issue 48) on the embedded testbed: a cheap step of new ports on ovn and ovs
records every stage of every port with ordered percentiles; with ovn-controller stopped on
one host mid-step, that host's later ports are never ready, by name, and the SLA fails --
the readiness is measured, not assumed; a SIGKILL mid-step leaves nothing after cleanup."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyroute2 import netns

from leaks import processes_mentioning
from vnetbench.battery import portready
from vnetbench.testbed.loader import loads

REPO = Path(__file__).resolve().parents[2]
TESTBED = """
vswitch: {kind}
network: {{type: {net}}}
vms:
  - {{name: a, host: h1, vnets: [vnet1]}}
  - {{name: b, host: h2, vnets: [vnet1]}}
"""

# the peer of h1's ports on h3, of h2's on h1
THREE_HOSTS = """
vswitch: ovn
network: {type: geneve}
hosts: [{name: h1, cpus: [0]}, {name: h2, cpus: [1]}, {name: h3, cpus: [0, 1]}]
vms:
  - {name: a, host: h1, vnets: [vnet1]}
  - {name: c, host: h3, vnets: [vnet1]}
  - {name: b, host: h2, vnets: [vnet1]}
"""


def _testbed(kind, net):
    return loads(TESTBED.format(kind=kind, net=net), source=f"<port-ready {kind}>", online_cpus=[0, 1])


def _port_namespaces(dep):
    return [n for n in netns.listnetns() if n.startswith(f"vnb-{dep.run_id}-p-")]


@pytest.mark.whole_machine          # every port ready within the deadline: a time verdict
@pytest.mark.parametrize("kind, net", [("ovn", "geneve"), ("ovs", "vxlan")])
def test_a_cheap_step_records_every_stage_in_order(netns_up, kind, net):
    dep = netns_up(_testbed(kind, net))
    results = portready.run(dep, ports=12, steps=2, concurrency=4, deadline_ms=15000)
    assert [r.extra["existing_ports"] for r in results] == [2, 14]
    for r in results:
        m = {k: v[0] for k, v in r.samples.items()}
        assert m["ports"] == 12 and m["not_ready"] == 0, r.extra["never_ready"]
        assert r.extra["never_ready"] == []
        for t in r.extra["timelines"]:     # the stages may overlap: ovn-controller can mark a
            # port installed before the plug's ovs-vsctl returns (it waits for ovs-vswitchd)
            assert all(0 < t[s] <= 15000 for s in portready.STAGES), t
        for stage in ("requested", "programmed", "first_packet"):
            qs = [m[f"{stage}_{q}_ms"] for q, _ in portready.QUANTILES]
            assert qs == sorted(qs)
        assert "cpu_vswitch_pct" in m and r.extra["signal"]
    if kind == "ovn":   # ovn-controller's own time of ovn-installed
        assert all(t["programmed_by"] == "signal" for r in results for t in r.extra["timelines"])
    assert dep.run.meta()["ports"] == {} and _port_namespaces(dep) == []


@pytest.mark.whole_machine          # h1's ports ready within the deadline: a time verdict
def test_ovn_controller_stopped_on_one_host_leaves_its_new_ports_never_ready(netns_up):
    from vnetbench.rally_plugins import charts, sla
    from vnetbench.rally_plugins.scenarios_portready import PORT_KEYS
    # h3 holds the peer of h1's ports: a reply to a new port crosses the peer's host, whose
    # ovn-controller must know the port too (a peer on h2 would leave h1's ports unanswered)
    dep = netns_up(loads(THREE_HOSTS, source="<port-ready ovn, three hosts>", online_cpus=[0, 1]))
    assert [p[2] for p in portready.placement(dep.testbed, ["h1", "h2"])] == ["c", "a"]
    stopped = {}

    def stop_after_two():        # mid-step: once two ports were requested
        end = time.monotonic() + 60
        while dep.run.meta().get("ports_next", 0) < 2:
            if time.monotonic() > end:
                return
            time.sleep(0.01)
        pid = dep.vswitch_pids("h2")["ovn-controller"]
        os.kill(pid, signal.SIGTERM)
        stopped["after"] = dep.run.meta()["ports_next"]
    killer = threading.Thread(target=stop_after_two, daemon=True)
    killer.start()
    [r] = portready.run(dep, ports=10, steps=1, concurrency=2, deadline_ms=4000, hosts=["h1", "h2"])
    killer.join(timeout=5)
    by_host = {t["name"]: t["host"] for t in r.extra["timelines"]}
    late_on_h2 = {n for n, h in by_host.items() if h == "h2" and int(n[1:]) >= stopped["after"] + 1}
    never = {n.split("@")[0] for n in r.extra["never_ready"]}
    assert late_on_h2 and late_on_h2 <= never
    assert all(by_host[n] == "h2" for n in never)                 # h1's all ready
    assert r.samples["not_ready"] == [len(never)]
    check = sla.VnetbenchThresholds({"max_not_ready": 0})
    check.add_iteration({"output": {"additive": [charts.metrics_table([r], PORT_KEYS)]}})
    assert not check.success and "not_ready" in check.details()


def test_cleanup_after_sigkill_mid_step_leaves_nothing(caps, state_dir):
    from vnetbench.testbed.netns import builder
    tb = _testbed("ovs", "vxlan")
    if caps.why_not(tb.vswitch.kind, tb.network.type):
        pytest.skip(caps.why_not(tb.vswitch.kind, tb.network.type))
    dep = builder.up(tb, caps=caps)         # cleanup removes it: not the fixture's to tear down
    try:
        _sigkill_mid_step_then_cleanup(dep, state_dir)
    finally:
        if dep.run.dir.exists():
            dep.down()


def _sigkill_mid_step_then_cleanup(dep, state_dir):
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    code = ("import sys\nfrom vnetbench.testbed import deployment\nfrom vnetbench.battery import portready\n"
            f"portready.run(deployment.attach({dep.run_id!r}), ports=40, steps=1, concurrency=3)\n")
    step = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while dep.run.meta().get("ports_next", 0) < 5 and time.monotonic() < deadline and step.poll() is None:
        time.sleep(0.02)
    step.send_signal(signal.SIGKILL)
    step.wait()
    assert dep.run.meta().get("ports"), "no port was added before the kill"
    done = subprocess.run([sys.executable, "-m", "vnetbench", "cleanup", "--run", dep.run_id], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [n for n in netns.listnetns() if n.startswith(f"vnb-{dep.run_id}-")] == []
    assert processes_mentioning(str(dep.run.dir)) == [] and not dep.run.dir.exists()
