"""``vnetbench plan --verify`` end to end (issue 28): a profile built from this machine's
recorded scale results (tests/data/capacity), a 2-host workload on which the two
placements differ (the network-agnostic packing puts both senders on h1, past its
measured ovs/vxlan capacity; the network-aware one puts each pair on one host), both
built on the embedded testbed and run at the planned rates.

Asserted: every host's measured vSwitch load is within the stated tolerance of the
prediction; the network-aware placement's busiest data plane is measurably lighter than
the agnostic packing's (the point of planning with the profile); the CPU prediction is
reported per host with its error, and must be the right order of magnitude (a broken
model -- a unit slip, a wrong role -- is off by far more)."""

import json
from pathlib import Path

import pytest
import yaml

from vnetbench import cli

# each emulated host's data-plane CPU share against the profile's prediction: the other
# test lane waits while it measures (turns.py), and the verification itself reports the
# CPU time other work took on the hosts' CPUs during each step
pytestmark = pytest.mark.whole_machine

DATA = Path(__file__).resolve().parents[1] / "data" / "capacity"
WORKLOAD = {"name": "web-db", "vms": [{"name": n, "vcpus": 2, "memory_mb": m} for n, m in
                                      (("web1", 2048), ("web2", 2048), ("db1", 4096), ("db2", 4096))],
            "flows": [{"from": "web1", "to": "db1", "gbps": 0.5}, {"from": "web2", "to": "db2", "gbps": 0.5}]}
HOSTS = {"vswitch": "ovs", "network": "vxlan", "hosts": [{"name": "h", "count": 2, "cores": 4, "memory_mb": 16384}]}


def test_plan_verify_measures_both_placements(tmp_path, capsys, record_property):
    profile = tmp_path / "profile.yaml"
    assert cli.main(["capacity", str(DATA), "--out", str(profile)]) == 0
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(WORKLOAD))
    (tmp_path / "h.yaml").write_text(yaml.safe_dump(HOSTS))
    capsys.readouterr()
    code = cli.main(["plan", str(tmp_path / "w.yaml"), str(tmp_path / "h.yaml"), "--capacity", str(profile),
                     "--verify", "--seconds", "3", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    ag, aw = out["placements"]["agnostic"], out["placements"]["aware"]
    assert ag["overloaded"] == ["h1"] and aw["overloaded"] == []
    assert ag["where"] != aw["where"]
    report = []
    for name, p in (("agnostic", ag), ("aware", aw)):
        v = p["verify"]
        assert v["failed"] == [] and {r["host"] for r in v["hosts"]} == {"h1", "h2"}
        for r in v["hosts"]:
            report.append(f"{name} {r['host']}: {r['measured_gbps']:.3f} Gbit/s (predicted "
                          f"{r['predicted_gbps']:.3f}), data-plane CPU {r['measured_cpu_pct']:.1f}% "
                          f"(predicted {r['predicted_cpu_pct']:.1f}%, error {r['cpu_error_pct']:+.0f}%)")
            assert r["gbps_within"], report[-1]
            assert r["cpu_error_pct"] == pytest.approx(100 * (r["measured_cpu_pct"] - r["predicted_cpu_pct"])
                                                       / r["predicted_cpu_pct"], abs=0.051)
            assert abs(r["cpu_error_pct"]) < 100, report[-1]
    record_property("plan_verify", "; ".join(report))
    print("\n".join(report))
    busiest = {name: max(r["measured_cpu_pct"] for r in p["verify"]["hosts"]) for name, p in (("ag", ag), ("aw", aw))}
    assert busiest["aw"] < busiest["ag"] - 10, (busiest, report)
