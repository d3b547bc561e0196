"""The openstack backend against a real all-in-one OpenStack (tools/aio, fixture
aio_cloud, two compute nodes): Heat makes the stack from heat-templates/ (the shared flat
network, a pinned flavor, the seed's cross-host pair: one guest per node, each node's one
dedicated CPU), Nova boots two pinned guests from the project's image, the backend
verifies placement and pinning through the API and each node's libvirtd has them pinned
to its own CPU, icmp-rtt and tcp-mss run in them through Rally with only task arguments
changed, the host CPU of both nodes beside each window, and the stack is deleted; a
SIGKILL during stack creation, then cleanup, deletes that stack and spares a decoy stack.
On a one-node AIO (VNETBENCH_AIO_COMPUTES=1) the pair is same-host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aio_nodes import kind_of, layout_of, root_of
from vnetbench.rally_plugins.context import testbed_yaml as make_testbed

REPO = Path(__file__).resolve().parents[3]
VNETBENCH = str(Path(sys.executable).parent / "vnetbench")
CLOUD, NETWORK, IMAGE = "vnetbench-aio", "vnetbench-flat", "vnetbench-guest"
DECOY_TEMPLATE = "heat_template_version: 2021-04-16\nresources: {}\n"


@pytest.fixture
def cloud_env(aio_cloud, tmp_path):
    """Environment of the vnetbench/rally subprocesses: the aio's clouds.yaml and a
    private state dir."""
    return {**os.environ, "OS_CLIENT_CONFIG_FILE": str(aio_cloud),
            "VNETBENCH_STATE_DIR": str(tmp_path / "state")}


def _stacks(conn) -> dict:
    """The project's stacks (a deleted one may still be listed a moment, as deleted)."""
    return {s.name: s for s in conn.orchestration.stacks() if s.status != "DELETE_COMPLETE"}


@pytest.fixture(scope="module")
def placement(aio_cloud) -> str:
    """The module pair's placement: across the nodes (one dedicated CPU each: a pinned
    pair fits on no single node), same-host on a one-node AIO."""
    return "cross-host" if layout_of(aio_cloud).computes >= 2 else "same-host"


def _testbed(tmp_path, placement, kind) -> Path:
    f = tmp_path / "tb.yaml"
    f.write_text(make_testbed(kind, "flat", None, [placement]))
    return f


def _up_argv(tb: Path) -> list[str]:
    return [VNETBENCH, "testbed", "up", str(tb), "--backend", "openstack", "--cloud", CLOUD,
            "--existing-network", NETWORK, "--image", IMAGE]


@pytest.fixture(scope="module")
def pinned_pair(aio_cloud, aio_prometheus, placement, tmp_path_factory):
    """One stack for the module's measurements (TCG guests boot slowly: boot once): the
    'testbed up' status, and the environment naming its state dir. Torn down at the end
    with 'testbed down', which must delete the stack."""
    from vnetbench.testbed.openstack import cloud
    tmp = tmp_path_factory.mktemp("pinned-pair")
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(aio_cloud),
           "VNETBENCH_STATE_DIR": str(tmp / "state")}
    done = subprocess.run([*_up_argv(_testbed(tmp, placement, kind_of(aio_cloud))), "--prometheus", aio_prometheus, "--json"],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    st = json.loads(done.stdout)
    yield st, env
    down = subprocess.run([VNETBENCH, "testbed", "down", "--run", st["run_id"]], env=env,
                          capture_output=True, text=True, timeout=900)
    assert down.returncode == 0, down.stderr
    conn = cloud.connect(CLOUD, str(aio_cloud))
    try:
        assert st["stack"] not in _stacks(conn)
    finally:
        conn.close()


def test_pinned_pair_verified(pinned_pair, placement, aio_cloud, conn):
    st, env = pinned_pair
    rid = st["run_id"]
    pre = placement.split("-")[0]                    # the pair's VMs: same-a/b, cross-a/b
    assert st["stack"] == f"vnb-{rid}" and f"vnb-{rid}" in _stacks(conn)
    # placement by compute host name (admin), pinning from the topology API: verified
    assert st["placement"]["placement_by"] == "OS-EXT-SRV-ATTR:host"
    hosts = st["placement"]["hosts"]
    lay = layout_of(aio_cloud)
    nodes = {n.host: n for n in lay.nodes}
    assert {hosts[f"{pre}-a"], hosts[f"{pre}-b"]} <= set(nodes)
    assert (hosts[f"{pre}-a"] == hosts[f"{pre}-b"]) == (placement == "same-host"), hosts
    assert set(st["pinning"]) == {f"{pre}-a", f"{pre}-b"} and st["warnings"] == []
    cpus = [c for vm in st["pinning"].values() for c in vm.values()]
    assert len(cpus) == len(set(cpus))               # dedicated: no host CPU shared
    server = conn.compute.get_server(st["vms"][0]["server"])
    assert server.flavor["extra_specs"]["hw:cpu_policy"] == "dedicated"
    # and as each node's own libvirtd has them: every vCPU pinned, to distinct host CPUs,
    # each inside its node's cpu_dedicated_set
    pins = []
    for vm in st["vms"]:
        node = nodes[hosts[vm["name"]]]
        xml = subprocess.run(["virsh", "-c", node.libvirt_uri, "dumpxml",
                              conn.compute.get_server(vm["server"]).instance_name],
                             capture_output=True, text=True, check=True).stdout
        mine = [line.split("cpuset='")[1].split("'")[0] for line in xml.splitlines() if "<vcpupin " in line]
        assert mine and set(mine) <= set(node.cpus.split(",")), (vm["name"], node.host, node.cpus, mine)
        pins += mine
    assert len(pins) == 2 and len(set(pins)) == 2, pins
    # the command channel: ping from one guest to the other over the flat network
    b_ip = st["vms"][1]["nics"][0]["ip"]
    ping = subprocess.run([VNETBENCH, "testbed", "exec", "--run", rid, f"{pre}-a", "--",
                           "ping", "-c", "3", "-W", "5", b_ip], env=env,
                          capture_output=True, text=True, timeout=120)
    assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr


def test_rally_tasks_run_on_the_cloud(pinned_pair, placement, conn, tmp_path, aio_cloud):
    """icmp-rtt and tcp-mss, unchanged, with the cloud's running pinned pair as task
    arguments (run: its id; the contexts borrow it and leave it up, as compare --run
    does), few points each, across the nodes. The TCP windows' host CPU comes from the
    collectors on the compute nodes through Prometheus (aio_prometheus): a measured
    number per window, for each node the pair is on."""
    st, env = pinned_pair
    home = tmp_path / "rally"
    home.mkdir()
    conf = home / "rally.conf"
    conf.write_text(f"[database]\nconnection = sqlite:///{home / 'rally.sqlite'}\n")
    exe = str(Path(sys.executable).parent / "rally")

    def rally(*args, check=True):
        done = subprocess.run([exe, "--config-file", str(conf), *args], cwd=home, env=env,
                              capture_output=True, text=True, timeout=900)
        assert not check or done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done
    rally("db", "create")
    rally("env", "create", "--name", "vnetbench", "--no-use")
    records = tmp_path / "records.jsonl"
    args = {"vswitch": kind_of(aio_cloud), "network": "flat", "backend": "openstack", "run": st["run_id"],
            "placements": [placement], "repetitions": 1, "deferred_count": 3,
            "flood_count": 30, "flood_interval_s": 0.01, "sweep_count": 5, "payloads": [64, 1400],
            "seconds": 3, "results": str(records),
            "min_gbps": 0.001}          # TCG guests on a loaded 2-CPU machine
    before = set(_stacks(conn))
    for task in ("icmp-rtt", "tcp-mss"):
        out = rally("task", "start", "--env", "vnetbench", str(REPO / "rally-tasks" / f"{task}.yaml"),
                    "--task-args", json.dumps(args))
        uuid = out.stdout.split("rally task report ")[1].split()[0]
        sla = json.loads(rally("task", "sla-check", uuid, "--json", check=False).stdout)
        assert sla and all(c["status"] == "PASS" for c in sla), sla
    recs = [json.loads(line) for line in records.read_text().splitlines()]
    assert {r["test"] for r in recs} == {"icmp_rtt", "tcp_stream"}
    assert {r["labels"]["placement"] for r in recs} == {placement}
    assert {r["provenance"]["run_id"] for r in recs} == {st["run_id"]}
    tcp = [r for r in recs if r["test"] == "tcp_stream"]
    assert tcp and all(v > 0 for r in tcp for v in r["samples"]["gbps"])
    # host CPU per TCP window, from Prometheus: the netdev datapath forwards every packet
    # in ovs-vswitchd's own threads, so each compute node of the pair shows CPU > 0
    hosts = set(st["placement"]["hosts"].values())
    for r in tcp:
        assert r["provenance"]["cpu"]["method"] == "prometheus", r["provenance"]["cpu"]
        windows = [rep["cpu"] for rep in r["extra"]["repetitions"]]
        assert all(w["method"] == "prometheus" and set(w["hosts"]) == hosts for w in windows), windows
        assert all(v > 0 for w in windows for v in w["hosts"].values()), windows
        assert all(isinstance(v, float) and v > 0 for v in r["samples"]["cpu_pct"]), r["samples"]
    rtt = [r for r in recs if r["test"] == "icmp_rtt"]
    assert rtt and all(r["metrics"]["loss_pct"]["mean"] == 0 for r in rtt)
    assert set(_stacks(conn)) == before             # borrowed: no stack made, none deleted
    print("rally on the cloud: RTT ms", [round(r["metrics"]["rtt_mean_ms"]["mean"], 2) for r in rtt
                                         if "rtt_mean_ms" in r["metrics"]],
          "TCP Mbit/s", [round(1e3 * r["metrics"]["gbps"]["mean"], 1) for r in tcp],
          "host CPU %", [round(v, 1) for r in tcp for v in r["samples"]["cpu_pct"]],
          "per node", [{h: round(v, 1) for h, v in rep["cpu"]["hosts"].items()}
                       for r in tcp for rep in r["extra"]["repetitions"]])


def test_the_scale_family_on_the_cloud_pinned_pair(pinned_pair, monkeypatch):
    """The scale family (issue 24) through the cloud's guests: the module's pinned pair
    released by its gate over SSH, the guest's clock mapped, the compute node's data-plane
    CPU of each node from the AIO's Prometheus. One step of one pair: both of this
    machine's CPUs are the pair's (two pairs at once: test_openstack_scale.py, on an AIO
    with shared CPUs)."""
    from vnetbench.scale import run as scale_run
    from vnetbench.testbed import deployment
    st, env = pinned_pair
    monkeypatch.setenv("VNETBENCH_STATE_DIR", env["VNETBENCH_STATE_DIR"])
    dep = deployment.attach(st["run_id"])
    (r,) = scale_run.run(dep, list(dep.testbed.pairs), progression=[1], tests=("tcp",), seconds=2)
    (rep,) = r.extra["repetitions"]
    assert r.labels["pairs"] == 1 and not rep["failed"] and r.extra["dropped"] == {}, rep
    assert rep["pairs"][0]["ok"] and rep["pairs"][0]["gbps"] > 0, rep["pairs"]
    assert r.samples["aggregate_gbps"][0] == pytest.approx(rep["pairs"][0]["gbps"])
    assert rep["pairs"][0]["echoes"] > 0                   # latency under load beside
    assert set(rep["hosts"]) == set(st["placement"]["hosts"].values()), rep["hosts"]
    assert all(h["dataplane_pct"] is not None for h in rep["hosts"].values()), rep["hosts"]
    print(f"scale on the cloud, 1 pair ({r.labels.get('placement', '')}): "
          f"{r.samples['aggregate_gbps'][0] * 1000:.1f} Mbit/s, data plane per compute node "
          + ", ".join(f"{n} {h['dataplane_pct']:.1f} %" for n, h in rep["hosts"].items()))


LIMIT_MBPS = 10


def test_neutron_qos_ingress_bandwidth_limit_on_a_real_port(pinned_pair, placement, conn, aio_cloud,
                                                             monkeypatch):
    """A Neutron QoS policy (bandwidth_limit 10 Mbit/s, direction ingress) on one guest's
    port: the ML2/OVS agent's QoS extension puts an OVS QoS (linux-htb) on the port, and
    the receiving guest measures 10 Mbit/s +-10 % after the first seconds (iperf3, the
    matrix's rate_compliance verdict); its peer's port, without the policy, is not held
    to it; after the policy is taken off, the port is free again. Egress (from the VM)
    is not tried: the agent realises it with tc police, which this kernel lacks
    (tools/aio/README.md). ML2/OVN: Neutron writes an NB QoS row (to-lport, its rate and
    burst) and ovn-controller meters the port's traffic in OVS (a meter of the userspace
    datapath): the same rate is measured."""
    from vnetbench.functional import measure, verdict
    from vnetbench.testbed import deployment
    st, env = pinned_pair
    monkeypatch.setenv("VNETBENCH_STATE_DIR", env["VNETBENCH_STATE_DIR"])
    dep = deployment.attach(st["run_id"])
    pre = placement.split("-")[0]
    a, b = f"{pre}-a", f"{pre}-b"
    server_b = next(vm["server"] for vm in st["vms"] if vm["name"] == b)
    port = next(iter(conn.network.ports(device_id=server_b)))
    free = measure.receiver_rate(dep, b, a, seconds=4)["mbps"]
    assert free > 1.5 * LIMIT_MBPS, f"{free:.1f} Mbit/s without a limit: too slow to show one"
    policy = conn.network.create_qos_policy(name=f"vnb-{st['run_id']}-ingress")
    try:
        conn.network.create_qos_bandwidth_limit_rule(policy, max_kbps=LIMIT_MBPS * 1000,
                                                     # Neutron's advice: 80 % of the rate (a
                                                     # policer -- OVN's meter -- with a 10 % bucket
                                                     # passed 5.6 of 10 Mbit/s from a bursty TCG
                                                     # sender)
                                                     max_burst_kbps=LIMIT_MBPS * 800,
                                                     direction="ingress")
        conn.network.update_port(port, qos_policy_id=policy.id)
        lay = layout_of(aio_cloud)
        node = next(n for n in lay.nodes if n.host == st["placement"]["hosts"][b])
        qos = _ovn_qos_of(lay, aio_cloud, port.id) if lay.ml2 == "ovn" else _ovs_qos_of(node, aio_cloud, port.id)
        m = measure.receiver_rate(dep, b, a, seconds=8)
        v = verdict.rate_compliance({**m, "limit_mbps": LIMIT_MBPS})
        other = measure.receiver_rate(dep, a, b, seconds=4)["mbps"]     # the peer's port
    finally:
        conn.network.update_port(port, qos_policy_id=None)
        conn.network.delete_qos_policy(policy, ignore_missing=True)
    after = measure.receiver_rate(dep, b, a, seconds=4)["mbps"]
    print(f"QoS ingress {LIMIT_MBPS} Mbit/s on a real port ({qos}): free {free:.1f}, limited "
          f"{v.value:.2f} ({v.detail}); peer {other:.1f}; policy removed {after:.1f} Mbit/s")
    assert v.status is verdict.Status.PASS, v.detail
    assert other > (1 + verdict.TOLERANCE) * LIMIT_MBPS and after > (1 + verdict.TOLERANCE) * LIMIT_MBPS


def _ovn_qos_of(lay, aio_cloud, port_id: str, timeout_s: float = 60) -> str:
    """The NB QoS row Neutron's OVN driver wrote for the port (match on its outport),
    waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = subprocess.run(root_of(aio_cloud)([
            "ovn-nbctl", f"--db={lay.ovn_db('nb')}", "--bare", "--columns=direction,match,bandwidth",
            "list", "QoS"]), capture_output=True, text=True, timeout=60).stdout.strip().split("\n\n")
        mine = [r.replace("\n", " ") for r in rows if port_id in r]
        if mine:
            return "OVN QoS " + "; ".join(mine)
        assert time.monotonic() < deadline, f"no NB QoS row for port {port_id} within {timeout_s:.0f} s"
        time.sleep(1)


def _ovs_qos_of(node, aio_cloud, port_id: str, timeout_s: float = 60) -> str:
    """The OVS QoS the agent of NODE (the port's compute node) put on the port's interface
    (tap<port id[:11]>), waited for."""
    db = node.ovsdb
    tap = f"tap{port_id[:11]}"
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(["ovs-vsctl", f"--db={db}", "--bare", "--columns=qos", "list", "port", tap],
                             capture_output=True, text=True).stdout.strip()
        if out:
            return subprocess.run(["ovs-vsctl", f"--db={db}", "--bare", "--columns=type,other_config",
                                   "list", "qos", out], capture_output=True, text=True).stdout.replace("\n", " ")
        if time.monotonic() > deadline:
            log = aio_cloud.parent / "logs" / f"{'' if node.primary else node.name + '-'}neutron-openvswitch-agent.log"
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else ["no agent log"]
            raise AssertionError(f"no OVS QoS on {tap} within {timeout_s:.0f} s; agent log:\n"
                                 + "\n".join(tail))
        time.sleep(1)


def test_sigkill_during_stack_creation_then_cleanup(cloud_env, placement, conn, tmp_path, aio_cloud):
    decoy = "vnb-ffffff"             # our naming and tags, not a run of this state dir
    template = tmp_path / "decoy.yaml"
    template.write_text(DECOY_TEMPLATE)
    conn.create_stack(decoy, tags="vnetbench,run-ffffff", template_file=str(template), wait=True)
    try:
        state = Path(cloud_env["VNETBENCH_STATE_DIR"])
        p = subprocess.Popen(_up_argv(_testbed(tmp_path, placement, kind_of(aio_cloud))) + ["-q"], env=cloud_env,
                             start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        name, t0 = None, time.monotonic()
        while time.monotonic() - t0 < 300 and p.poll() is None:
            journals = list(state.glob("*/journal.jsonl"))
            if journals and '"stack"' in journals[0].read_text():
                name = f"vnb-{journals[0].parent.name}"
                if name in _stacks(conn):           # Heat has it: creation under way
                    break
            time.sleep(0.2)
        assert p.poll() is None, "the bring-up ended before its stack was being created"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        assert _stacks(conn)[name].status == "CREATE_IN_PROGRESS"
        done = subprocess.run([VNETBENCH, "cleanup", "--backend", "openstack"], env=cloud_env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        stacks = _stacks(conn)
        assert name not in stacks and decoy in stacks
        assert not [d for d in state.iterdir() if d.is_dir()]
    finally:
        conn.delete_stack(decoy, wait=True)

