"""Smoke test of the all-in-one OpenStack (tools/aio): Heat (api + engine) makes and
deletes a member's stack. Guests on the cloud: the openstack backend's tests (a member's
pinned pair through an SSH gateway, test_openstack_member; an admin's pinned pair with
its pinning read back from Nova and from libvirt's domain XML, test_openstack_cloud;
security groups enforced by Neutron's openvswitch firewall, test_security_groups_cloud).
And its ownership: SIGKILL of `aio up --computes 2`, then `vnetbench cleanup`, leaves
nothing (an AIO of the test's own, before the session's comes up: aio_alone)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import aio_alone
from aio_nodes import layout_of, leftovers
from vnetbench.aio.procs import Journal, alive

DEMO = "vnetbench-aio-demo"
REPO = Path(__file__).resolve().parents[3]
AIO = [sys.executable, "-m", "vnetbench.aio"]
VNETBENCH = [sys.executable, "-m", "vnetbench"]
BUSY = re.compile(r"is in use; another AIO|inside the AIO subnet")


@pytest.mark.own_aio
def test_sigkill_of_up_with_two_computes_then_cleanup_leaves_nothing(request, tmp_path):
    """`aio up --computes 2` (Epoxy, ML2/OVS: node 2's OVS agent and nova-compute from the
    root) registers the AIO in the state root before its first
    resource; a `vnetbench cleanup` while it runs leaves it alone (in use). SIGKILL of
    up's whole process group once node 2's namespace and daemons run (its daemons, in
    sessions of their own, outlive it), then `vnetbench cleanup` with the same state
    root: no namespace, link, process, domain or dir of the AIO is left, nor its
    registration; decoys named like ours with another run id (a namespace, a root link,
    another state root's registration) are untouched."""
    aio_alone.alone(request.config)
    image = request.getfixturevalue("aio_image")      # after the checks: a build takes minutes
    root = tmp_path / "state"
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(root)}
    state = Path(tempfile.mkdtemp(prefix="vnbaio-", dir="/var/tmp")).resolve()
    decoys = _Decoys(tmp_path, secrets.token_hex(3))
    started: list[subprocess.Popen] = []
    ok = False
    try:
        decoys.make()
        up = _up_until_node_2_runs(state, image, env, tmp_path / "up.log", started)
        lay = layout_of(state / "clouds.yaml")          # its meta.json: cleanup removes it
        assert lay.run_id != decoys.run_id
        assert [p.name for p in root.iterdir()] == [lay.run_id], "not registered under its run id"
        reg = json.loads((root / lay.run_id / "meta.json").read_text())
        assert (reg["kind"], reg["state"]) == ("aio", str(state))
        # journaled before the AIO's meta.json, which up writes before its first resource
        assert (root / lay.run_id / "journal.jsonl").stat().st_mtime_ns <= \
            (state / "meta.json").stat().st_mtime_ns

        busy = subprocess.run([*VNETBENCH, "cleanup"], env=env, capture_output=True, text=True,
                              timeout=120, cwd=REPO)
        assert busy.returncode == 0 and "in use by another process" in busy.stdout, \
            busy.stdout + busy.stderr
        assert up.poll() is None and _node_2_runs(state), "a cleanup touched an AIO being brought up"

        os.killpg(up.pid, signal.SIGKILL)
        up.wait()
        assert leftovers(lay), "the SIGKILL left nothing for cleanup to remove"
        done = subprocess.run([*VNETBENCH, "cleanup"], env=env, capture_output=True, text=True,
                              timeout=600, cwd=REPO)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"run {lay.run_id}: removed (the AIO in {state})" in done.stdout, done.stdout
        assert leftovers(lay) == []
        deadline = time.monotonic() + 10            # the next AIO's `up` refuses while it is
        while aio_alone.DATAPATH.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not aio_alone.DATAPATH.exists(), "the AIO's netdev datapath is left"
        assert list(root.iterdir()) == [], "the registration is left"
        assert decoys.touched() == []
        ok = True
    finally:
        if not ok:
            _never_left_up(started, state, env)
        decoys.remove()
        if ok:              # else keep DIR/logs for the failure's story
            shutil.rmtree(state, ignore_errors=True)


# node 2's daemons, in the order up starts them; the last one journaled is the kill point
NODE_2 = ("c2-node", "c2-ovsdb-server", "c2-ovs-vswitchd", "c2-tapkeeper", "c2-virtlogd",
          "c2-libvirtd", "c2-neutron-openvswitch-agent", "c2-nova-compute")


def _node_2_runs(state: Path) -> bool:
    """Node 2's namespace exists and every daemon of it has been started and runs."""
    entries = Journal(state / "journal.jsonl").entries()
    procs = {e["name"]: e for e in entries if e.get("kind") == "process"}
    netns = [e["name"] for e in entries if e.get("kind") == "netns" and e.get("node") == "c2"]
    return (bool(netns) and Path("/run/netns", netns[0]).exists()
            and all(n in procs and alive(procs[n]) for n in NODE_2))


def _up_until_node_2_runs(state: Path, image: Path, env: dict, log: Path,
                          started: list) -> subprocess.Popen:
    """`aio up --computes 2` in a process group of its own (each one started is put in
    STARTED at once), running, once node 2 runs; on the next slot of ports and subnet
    when something holds these (as aio_cloud)."""
    for slot in range(8):
        argv = [*AIO, "up", "--state", str(state), "--image", str(image), "--computes", "2",
                "--release", "epoxy", "--ml2", "ovs",
                "--port-base", str(19000 + 100 * slot), "--cidr", f"198.19.{250 - slot}.0/24"]
        with open(log, "w") as out:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=REPO, env=env, start_new_session=True)
        started.append(p)
        deadline = time.monotonic() + 1500       # the Epoxy root built first on a new machine
        while p.poll() is None and time.monotonic() < deadline:
            if _node_2_runs(state):
                return p
            time.sleep(0.5)
        if p.poll() is None:
            pytest.fail(f"node 2 of the AIO not running after 1500 s (log: {log})")
        said = log.read_text(errors="replace")
        if p.returncode != 2 or not BUSY.search(said):
            pytest.fail(f"aio up ended (exit {p.returncode}) before node 2 ran:\n{said[-3000:]}")
    pytest.fail(f"no free slot of ports and subnet for the AIO:\n{said[-1000:]}")


def _never_left_up(started: list, state: Path, env: dict) -> None:
    """After a failure on the way: the groups of the `up`s still running killed, then
    `cleanup` and `aio down` (both idempotent), so that the session's AIO can come up
    after this test."""
    for p in started:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if any(Path(env["VNETBENCH_STATE_DIR"]).glob("*/journal.jsonl")):
        subprocess.run([*VNETBENCH, "cleanup"], env=env, capture_output=True, timeout=600, cwd=REPO)
    subprocess.run([*AIO, "down", "--state", str(state)], env=env, capture_output=True,
                   timeout=600, cwd=REPO)


class _Decoys:
    """Named as an AIO of run RUN_ID would name them, made by the test, removed by their
    names: a node namespace, a root-namespace link (a bridge: this kernel has no dummy
    links) and a registration in another state root (of an AIO dir that claims that run)."""

    def __init__(self, tmp: Path, run_id: str):
        self.run_id = run_id
        self.netns, self.link = f"vnbaio{run_id}-c2", f"vnb{run_id}-m2"
        self.aio = tmp / "decoy-aio"
        self.registration = tmp / "other-state" / run_id

    def make(self) -> None:
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        subprocess.run(["ip", "link", "add", self.link, "type", "bridge"], check=True)
        self.aio.mkdir()
        (self.aio / "meta.json").write_text(json.dumps({"run_id": self.run_id}))
        (self.aio / "journal.jsonl").write_text(json.dumps({"kind": "aio", "run_id": self.run_id}) + "\n")
        self.registration.mkdir(parents=True)
        entry = {"kind": "aio", "state": str(self.aio)}
        (self.registration / "meta.json").write_text(json.dumps({**entry, "name": f"aio-{self.run_id}"}))
        (self.registration / "journal.jsonl").write_text(json.dumps(entry) + "\n")

    def touched(self) -> list[str]:
        gone = [f"netns {self.netns}"] if not Path("/run/netns", self.netns).exists() else []
        gone += [f"link {self.link}"] if not Path("/sys/class/net", self.link).exists() else []
        gone += [f"file {f}" for f in (self.aio / "meta.json", self.aio / "journal.jsonl",
                                       self.registration / "journal.jsonl") if not f.exists()]
        return gone

    def remove(self) -> None:
        if Path("/run/netns", self.netns).exists():
            subprocess.run(["ip", "netns", "delete", self.netns], check=False)
        if Path("/sys/class/net", self.link).exists():
            subprocess.run(["ip", "link", "delete", self.link], check=False)


def _connect(cloud: str, clouds_yaml: Path):
    import openstack
    from openstack.config import loader
    config = loader.OpenStackConfig(config_files=[str(clouds_yaml)])
    return openstack.connection.Connection(config=config.get_one(cloud))


@pytest.fixture
def demo(aio_cloud):
    c = _connect(DEMO, aio_cloud)
    yield c
    c.close()


HOT = """heat_template_version: 2021-04-16
resources:
  net: {type: OS::Neutron::Net, properties: {name: aio-smoke-tenant}}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 198.18.77.0/24, enable_dhcp: false}
  word: {type: OS::Heat::RandomString, properties: {length: 8}}
outputs:
  word: {value: {get_attr: [word, value]}}
"""


def test_heat_stack_of_a_project_member(aio_cloud, demo, tmp_path):
    """Heat (api + engine) creates and deletes a stack for a non-admin member: a tenant
    network of the cloud's default type (vxlan) with a subnet, and a random string."""
    template = tmp_path / "smoke.yaml"
    template.write_text(HOT)
    stack = demo.create_stack(f"aio-smoke-{tmp_path.name[-12:]}", template_file=str(template),
                              wait=True, timeout=300)
    try:
        assert stack.status == "CREATE_COMPLETE", stack.status_reason
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs}
        assert len(outputs["word"]) == 8
        net = demo.network.find_network("aio-smoke-tenant", ignore_missing=False)
        assert net.project_id == demo.current_project_id
    finally:
        assert demo.delete_stack(stack.id, wait=True)
    assert demo.network.find_network("aio-smoke-tenant", ignore_missing=True) is None
