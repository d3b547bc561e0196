"""VM migration on the openstack backend (issue 25): the fault API asks Nova to move a
testbed VM's server to the compute node of the other testbed host's servers, with fake
openstacksdk objects (tests/unit/test_openstack_backend.py's style): the Nova calls made
(live with block migration auto and the target host; cold: migrate, confirm), the
target resolved from the testbed host, the refusals (member, same node, unknown host,
a host with no server left) before anything changes, the run's state after the move.
The live downtime's probe path runs the real probe tools (vnetbench-flowgen, as in the
guests) on this machine. The real thing: vnetbench functional on a two-node AIO
(docs/functional.md)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.faults import Faults
from vnetbench.faults import migrate as fmigrate
from vnetbench.functional.plugin import one_vnet
from vnetbench.results.store import ResultStore
from vnetbench.state import Run
from vnetbench.testbed.codec import to_dict
from vnetbench.testbed.loader import loads
from vnetbench.testbed.openstack import builder, cloud, nova_migration as migrate
from vnetbench.testbed.openstack.cloud import CloudError
from vnetbench.testbed.openstack.deployment import OpenstackDeployment

import test_probe_native

tool = test_probe_native.tool       # the Go probe tool's fixture (skipped where it is not built)

RID = "0a1b2c"
SERVERS = {"red-1": "s1", "red-2": "s2", "red-3": "s3"}       # red-1, red-3 on h1; red-2 on h2


class FakeNova:
    """openstacksdk's compute proxy as far as a migration goes: servers that move a poll
    or two after they are asked to, the project's server groups, every call recorded."""

    def __init__(self, hosts: dict[str, str], groups=()):
        self.servers = {sid: SimpleNamespace(id=sid, compute_host=h, status="ACTIVE", task_state=None,
                                             power_state=1, fault=None) for sid, h in hosts.items()}
        self.groups = list(groups)
        self.calls, self.gets = [], 0
        self.steps: dict[str, list[dict]] = {}     # server -> its next states, one per poll

    def get_server(self, sid):
        self.gets += 1
        s = self.servers[sid]
        if self.steps.get(sid):
            vars(s).update(self.steps[sid].pop(0))
        return SimpleNamespace(**vars(s))

    def live_migrate_server(self, server, host, block_migration):
        self.calls.append(("live", server, host, block_migration))
        self.servers[server].task_state = "migrating"          # Nova's API sets it at once
        self.steps[server] = [{}, {"compute_host": host, "task_state": None}]

    def migrate_server(self, server, host):
        self.calls.append(("migrate", server, host))
        self.servers[server].task_state = "resize_prep"
        self.steps[server] = [{"power_state": 4, "task_state": "resize_migrating"},
                              {"compute_host": host, "status": "VERIFY_RESIZE", "task_state": None,
                               "power_state": 1}]

    def confirm_server_resize(self, server):
        self.calls.append(("confirm", server))
        self.steps[server] = [{}, {"status": "ACTIVE"}]

    def server_groups(self):
        return list(self.groups)

    def delete_server_group(self, group, ignore_missing):
        self.calls.append(("delete group", group.name))
        self.groups.remove(group)


def _group(name, members, policy="affinity"):
    return SimpleNamespace(id=f"id-{name}", name=name, policy=policy, member_ids=list(members))


def _testbed():
    return loads(one_vnet(3).format(kind="ovs", ntype="vxlan"), source="<migration ovs-vxlan>")


@pytest.fixture
def cloud_of(tmp_path, monkeypatch):
    """CLOUD_OF(hosts, admin=True) -> (deployment, fake Nova): an 'up' run of the functional
    suite's migration testbed on a fake cloud whose servers run on HOSTS."""
    monkeypatch.setattr(migrate, "POLL_S", 0.0)
    masters = []

    def master(ssh, deadline, conn, got):        # the guest's sshd answers: a stand-in master
        masters.append(subprocess.Popen(["sleep", "60"]))
        return masters[-1]
    monkeypatch.setattr(builder, "_open", master)

    def make(hosts=("cmp1", "cmp2", "cmp1"), admin=True, groups=None):
        tb = _testbed()
        nodes = dict(zip(SERVERS, hosts))
        run = Run(RID, tmp_path)
        run.create(status="up", name=tb.name, backend="openstack", testbed=to_dict(tb), cloud="c",
                   admin=admin, options={"ready_timeout_s": 5}, servers=SERVERS,
                   placement={"placement_by": "OS-EXT-SRV-ATTR:host", "hosts": nodes,
                              "testbed_hosts": {"h1": sorted({nodes["red-1"], nodes["red-3"]}),
                                                "h2": [nodes["red-2"]]}})
        run.unlock()
        nova = FakeNova({SERVERS[vm]: h for vm, h in nodes.items()}, groups if groups is not None else [
            _group(f"vnb-{RID}-host-0", ["s1", "s3"]), _group(f"vnb-{RID}-host-1", ["s2"]),
            _group("vnb-ffeedd-host-0", ["s3"])])         # another run's: never touched
        if admin:
            monkeypatch.setattr(cloud, "connect", lambda name, path=None: SimpleNamespace(
                compute=nova, close=lambda: None))
        else:
            monkeypatch.setattr(cloud, "connect", lambda *a, **k: pytest.fail("a member's run connected"))
        return OpenstackDeployment(run, tb), nova
    yield make
    for p in masters:
        p.kill()
        p.wait()


def test_live_migration_goes_to_the_node_of_the_target_hosts_servers(cloud_of):
    dep, nova = cloud_of()
    assert dep.migration_target("red-3", "h2") == "cmp2"          # red-2's node
    assert nova.calls == []                                      # asked, nothing done
    out = dep.migrate_vm("red-3", "h2", live=True)
    assert nova.calls == [("delete group", f"vnb-{RID}-host-0"), ("live", "s3", "cmp2", "auto")]
    assert out["to_node"] == "cmp2" and out["from_node"] == "cmp1" and out["move_s"] >= 0
    assert out["released_groups"] == [f"vnb-{RID}-host-0"] and "outage_s" not in out
    assert [g.name for g in nova.groups] == [f"vnb-{RID}-host-1", "vnb-ffeedd-host-0"]
    # the run's state says where it runs now: later rows, status and down see it
    again = OpenstackDeployment.of(dep.run)
    assert dep.testbed.vm("red-3").host == again.testbed.vm("red-3").host == "h2"
    place = dep.run.meta()["placement"]
    assert place["hosts"] == {"red-1": "cmp1", "red-2": "cmp2", "red-3": "cmp2"}
    assert place["testbed_hosts"] == {"h1": ["cmp1"], "h2": ["cmp2"]}
    assert {v["name"]: v["host"] for v in again.status()["vms"]}["red-3"] == "cmp2"
    # and the next move is planned from there: red-2 to h1 is red-1's node
    assert dep.migration_target("red-2", "h1") == "cmp1"


def test_cold_migration_migrates_confirms_and_waits_for_the_guest_to_answer(cloud_of):
    dep, nova = cloud_of()
    out = dep.migrate_vm("red-3", "h2", live=False)
    assert nova.calls == [("delete group", f"vnb-{RID}-host-0"), ("migrate", "s3", "cmp2"),
                          ("confirm", "s3")]
    assert nova.servers["s3"].status == "ACTIVE" and nova.servers["s3"].compute_host == "cmp2"
    assert 0 <= out["outage_s"] and 0 <= out["move_s"] and dep.testbed.vm("red-3").host == "h2"
    masters = [e for e in dep.run.entries() if e["kind"] == "process" and e.get("vm") == "red-3"]
    assert len(masters) == 1 and masters[0]["argv"] == ["ssh", "master"]   # the run owns it


def test_the_fault_api_records_a_clouds_cold_move_with_its_outage(cloud_of, tmp_path):
    dep, nova = cloud_of()
    results = tmp_path / "faults.jsonl"
    out = Faults(dep, results).migrate("red-3", "h2", live=False)
    (rec,) = list(ResultStore(results))
    assert rec.labels["fault"] == "migrate-cold" and rec.labels["target"] == "red-3"
    assert rec.labels["params"] == {"from": "h1", "to": "h2", "from_node": "cmp1", "to_node": "cmp2"}
    assert rec.samples["outage_s"] == [out["outage_s"]] and rec.samples["move_s"] == [out["move_s"]]


def test_a_members_run_is_refused_before_any_call(cloud_of):
    dep, nova = cloud_of(admin=False)
    for call in (lambda: dep.migration_target("red-3", "h2"), lambda: dep.migrate_vm("red-3", "h2", True),
                 lambda: Faults(dep).migrate("red-3", "h2", live=False)):
        with pytest.raises(UnsupportedError, match=r"^openstack: no VM migration of red-3: cloud 'c' "
                                                   r"was used without the admin role"):
            call()
    assert nova.calls == [] and nova.gets == 0 and dep.testbed.vm("red-3").host == "h1"


def test_testbed_hosts_on_one_node_are_refused_before_any_change(cloud_of):
    dep, nova = cloud_of(hosts=("cmp1", "cmp1", "cmp1"))
    with pytest.raises(UnsupportedError, match="red-3 already runs on compute node cmp1, where h2's "
                                               "servers are .the testbed's hosts share one node"):
        Faults(dep).migrate("red-3", "h2", live=True, peer="red-1")
    assert nova.calls == [] and len(nova.groups) == 3 and dep.testbed.vm("red-3").host == "h1"


def test_unknown_names_and_the_own_host_are_one_line_each(cloud_of):
    dep, nova = cloud_of()
    f = Faults(dep)
    with pytest.raises(VnetbenchError, match=f"^migrate: run {RID} has no host named 'h9'; use one of: h1, h2$"):
        f.migrate("red-3", "h9")
    with pytest.raises(VnetbenchError, match=f"^migrate: run {RID} has no VM named 'red-9'; use one of: "):
        f.migrate("red-9", "h2")
    with pytest.raises(VnetbenchError, match="^migrate: VM red-3 is already on host h1$"):
        f.migrate("red-3", "h1", live=False)
    assert nova.calls == []


def test_a_host_with_no_server_left_has_no_node_to_go_to(cloud_of):
    dep, nova = cloud_of()
    dep.migrate_vm("red-2", "h1", live=True)                      # h2's only VM leaves
    with pytest.raises(UnsupportedError, match="testbed host h2 has no server left, so no compute "
                                               "node stands for it"):
        dep.migrate_vm("red-1", "h2", live=False)
    assert nova.calls[-1] == ("live", "s2", "cmp1", "auto")


def test_a_move_nova_fails_is_an_error_and_the_state_stays(cloud_of):
    dep, nova = cloud_of()
    nova.live_migrate_server = lambda server, host, block_migration: nova.steps.update(
        {server: [{"status": "ERROR", "fault": {"message": "Unsafe migration: shared storage"}}]})
    with pytest.raises(CloudError, match="live migration of server s3 .red-3. to cmp2: ERROR: Unsafe"):
        dep.migrate_vm("red-3", "h2", live=True)
    assert dep.testbed.vm("red-3").host == "h1" == OpenstackDeployment.of(dep.run).testbed.vm("red-3").host
    assert dep.run.meta()["released_groups"] == [f"vnb-{RID}-host-0"]      # gone all the same


def test_a_move_nova_rolls_back_is_an_error_and_the_state_stays(cloud_of):
    dep, nova = cloud_of(groups=[])
    nova.migrate_server = lambda server, host: nova.steps.update({server: [{}, {}]})   # NoValidHost
    with pytest.raises(CloudError, match="Nova left it ACTIVE on cmp1 .the move failed and was rolled back"):
        dep.migrate_vm("red-3", "h2", live=False)
    assert dep.testbed.vm("red-3").host == "h1"
    assert dep.run.meta()["placement"]["hosts"]["red-3"] == "cmp1"


def test_only_the_runs_own_affinity_groups_with_the_server_are_released():
    nova = FakeNova({}, [_group(f"vnb-{RID}-host-0", ["s3", "s1"]), _group(f"vnb-{RID}-0", ["s3"], "anti-affinity"),
                         _group("vnb-ffeedd-host-0", ["s3"]), _group(f"vnb-{RID}-host-1", ["s2"]),
                         SimpleNamespace(id="old", name=f"vnb-{RID}-x", policy=None, policies=["affinity"],
                                         member_ids=["s3"])])       # before microversion 2.64
    move = migrate.Move("red-3", "s3", "cmp1", "cmp2")
    assert migrate.release(SimpleNamespace(compute=nova), move, RID) == [f"vnb-{RID}-host-0", f"vnb-{RID}-x"]


# -- the live downtime in guests: the real probe tools, here ---------------------------------

class GuestsHere:
    """A deployment whose 'guests' are this machine (the Go probe tool by name on PATH, as
    in the image) and whose move takes MOVE_S: what faults.migrate sees of a cloud."""
    backend = "openstack"

    def __init__(self, tool: str, move_s: float = 0.1):
        self.testbed, self.run_id, self.move_s, self.moves = _testbed(), RID, move_s, []
        self.env = {**os.environ, "PATH": f"{Path(tool).parent}:{os.environ['PATH']}"}

    def ip(self, vm, vnet=None):
        return "127.0.0.1"

    def exec(self, vm, argv, timeout=60):
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env)

    def popen(self, vm, argv, **kwargs):
        return subprocess.Popen(argv, env=self.env, **kwargs)

    def migration_target(self, vm, to_host):
        return "cmp2"

    def migrate_vm(self, vm, to_host, live):
        self.moves.append((vm, to_host, live))
        time.sleep(self.move_s)
        return {"move_s": self.move_s, "to_node": "cmp2"}


def test_live_downtime_in_guests_from_the_peers_probes_into_the_migrating_guest(tool, guest_files):
    dep = GuestsHere(tool)
    out = fmigrate.live(dep, "red-3", "h2", peer="red-1", before_s=0.2, after_s=0.3, move_s=1.0)
    assert dep.moves == [("red-3", "h2", True)]
    assert {"downtime_ms", "lost", "sent", "loss_pct", "outages", "move_s"} <= set(out)
    assert out["sent"] == 300 and out["interval_ms"] == 5.0         # 1.5 s at 5 ms
    assert out["lost"] == 0 and out["downtime_ms"] == 0 and out["peer"] == "red-1"
    assert out["to_node"] == "cmp2"


@pytest.fixture
def guest_files():
    """The receiver's result files in the 'guest' (/tmp here): none is left behind."""
    before = set(Path("/tmp").glob("vnb-migrate-*.json"))
    yield
    assert set(Path("/tmp").glob("vnb-migrate-*.json")) <= before


def test_a_move_longer_than_the_probe_stream_is_not_a_downtime(tool, guest_files):
    dep = GuestsHere(tool, move_s=0.8)
    with pytest.raises(VnetbenchError, match=r"took \d+\.\d s: the 0.8 s probe stream from red-1 ended "
                                             "less than 0.3 s after it, so its downtime is not measured"):
        fmigrate.live(dep, "red-3", "h2", peer="red-1", before_s=0.2, after_s=0.3, move_s=0.3)
