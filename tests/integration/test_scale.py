"""Many pairs at once on netns (issue 24): linuxbridge/vxlan and ovs/vxlan, 2 hosts, 4
single_room pairs, steps 1, 2, 4. Every step has every pair's result, the aggregate is
the sum of the pairs, the start spread is measured and small, each host's CPU is there
and never above the CPUs it has; a pair whose server dies mid-step is that step's failed
pair, by name, never a silently smaller sum."""

import time

import pytest
import yaml

from vnetbench.scale import plan, run as scale_run
from vnetbench.testbed.loader import loads

SECONDS = 2


def _up(netns_up, kind):
    acc = plan.accommodation(["pair", "single_room", {"density": 4}, {"compute_nodes": 2}])
    doc = plan.testbed(acc, kind, "vxlan", [0, 1], name=f"scale-{kind}")
    return netns_up(loads(yaml.safe_dump(doc), source="<scale>", online_cpus=[0, 1]))


@pytest.mark.whole_machine     # every pair started within 50 ms of the first
@pytest.mark.parametrize("kind", ["linuxbridge", "ovs"])
def test_every_step_runs_every_pair_together(netns_up, kind):
    dep = _up(netns_up, kind)
    pairs = sorted(dep.testbed.pairs, key=lambda p: int(p.name[1:]))
    assert [p.placement for p in pairs] == ["cross-host"] * 4
    records = scale_run.run(dep, pairs, progression="geometric", tests=("tcp",), seconds=SECONDS)
    assert [r.labels["pairs"] for r in records] == [1, 2, 4]
    for r in records:
        (rep,) = r.extra["repetitions"]
        n = r.labels["pairs"]
        assert [p["pair"] for p in rep["pairs"]] == [f"p{i + 1}" for i in range(n)]
        assert all(p["ok"] and p["gbps"] > 0 for p in rep["pairs"]), rep["pairs"]
        assert r.samples["aggregate_gbps"][0] == pytest.approx(sum(p["gbps"] for p in rep["pairs"]))
        assert r.samples["pairs_failed"] == [0]
        assert 0 <= r.samples["start_spread_ms"][0] <= 50, r.samples["start_spread_ms"]
        assert all(p["echoes"] > 0 for p in rep["pairs"])          # latency under load beside
        assert set(rep["hosts"]) == {"h1", "h2"}
        for h, v in rep["hosts"].items():
            assert v["dataplane_pct"] is not None and 0 <= v["dataplane_pct"] <= 100.0 * v["cpus"] + 5, (h, v)
    assert set(records[0].extra["saturation"]) == {"h1", "h2"}


def test_a_pair_whose_server_dies_mid_step_is_that_steps_failed_pair(netns_up):
    dep = _up(netns_up, "linuxbridge")
    pairs = sorted(dep.testbed.pairs, key=lambda p: int(p.name[1:]))
    victim = pairs[1]

    def kill_its_server(servers):          # the step's own process, by its handle
        time.sleep(1.0)
        servers[victim.name].kill()
    (r,) = scale_run.run(dep, pairs[:2], progression=[2], tests=("tcp",), seconds=4,
                         during=kill_its_server)
    rep = r.extra["repetitions"][0]
    assert r.samples["pairs_failed"] == [1] and r.samples["pairs_ran"] == [1]
    assert [f["pair"] for f in rep["failed"]] == [victim.name], rep["failed"]
    ok = [p for p in rep["pairs"] if p["ok"]]
    assert r.samples["aggregate_gbps"][0] == pytest.approx(ok[0]["gbps"])


def test_scale_task_runs_through_rally(rally, tmp_path):
    """rally-tasks/scale.yaml as shipped: the context computes the testbed from the
    accommodation, the scenario records one step per pair count, the SLA (no failed pair)
    passes and the report carries the scale charts."""
    import json
    from pathlib import Path
    records = tmp_path / "records.jsonl"
    args = {"vswitch": "linuxbridge", "network": "vxlan", "density": 2, "progression": [1, 2],
            "seconds": 1, "results": str(records)}
    task = Path(__file__).resolve().parents[2] / "rally-tasks" / "scale.yaml"
    out = rally("task", "start", "--env", "vnetbench", str(task), "--task-args", json.dumps(args))
    uuid = out.stdout.split("rally task report ")[1].split()[0]
    sla = json.loads(rally("task", "sla-check", uuid, "--json", check=False).stdout)
    assert sla and all(c["status"] == "PASS" for c in sla), sla
    recs = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["test"], r["labels"]["pairs"]) for r in recs] == [("scale", 1), ("scale", 2)]
    assert all(r["samples"]["pairs_failed"] == [0] for r in recs)
    assert recs[1]["labels"]["params"]["accommodation"] == ["pair", "single_room"]
    report = tmp_path / "report.html"
    rally("task", "report", uuid, "--out", str(report))
    assert "each host's data-plane CPU vs pairs at once" in report.read_text()


@pytest.mark.whole_machine     # 50 new connections/s per pair within 10 %
def test_new_connections_per_second_step_by_step(netns_up):
    """The conn test: each pair's flowgen offers 50 new connections/s; every pair sets them
    all up in time (linuxbridge has no agent in the way), so each step's aggregate is the
    sum of its pairs and about 50/s per pair."""
    dep = _up(netns_up, "linuxbridge")
    pairs = sorted(dep.testbed.pairs, key=lambda p: int(p.name[1:]))
    records = scale_run.run(dep, pairs, progression=[1, 2], tests=("conn",), seconds=SECONDS,
                            conn_rate=50, latency=False)
    assert [r.labels["pairs"] for r in records] == [1, 2]
    for r in records:
        (rep,) = r.extra["repetitions"]
        assert r.labels["params"]["unit"] == "cps" and r.samples["pairs_failed"] == [0], rep["failed"]
        assert all(p["cps"] == pytest.approx(50, rel=0.1) and p["loss_pct"] == 0 for p in rep["pairs"]), rep["pairs"]
        assert r.samples["aggregate_cps"][0] == pytest.approx(sum(p["cps"] for p in rep["pairs"]))
