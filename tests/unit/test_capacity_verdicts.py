"""``plan --verify``'s judgement, pure: the other work on a host's CPUs over the step (its
busy CPU less the data plane and the workload's own processes), the per-host verdict
(not comparable on another machine, not judged when other work took the CPUs, else
within or off), and how the text output says each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vnetbench.capacity import commands, verify

PROFILE = {"cpu_model": "AMD EPYC", "kernel": "6.18.44-fc-v669", "arch": "x86_64", "backend": "netns",
           "datapath": "netdev", "ports": "afxdp"}
XEON = {**PROFILE, "cpu_model": "Intel(R) Xeon(R) Processor", "kernel": "6.18.44-fc-v1300"}

#: one step of the web-db workload's agnostic packing (two 0.5 Gbit/s pairs h1 -> h2), as
#: scale.run records it: each pair's hosts and its iperf3 ends' own CPU
PAIRS = [{"pair": "f1", "ok": True, "gbps": 0.4995, "hosts": ["h1", "h2"], "guest_cpu_pct": [6.1, 4.0]},
         {"pair": "f2", "ok": True, "gbps": 0.4997, "hosts": ["h1", "h2"], "guest_cpu_pct": [5.9, 4.2]}]
PREDICTED = [{"host": "h1", "delivered_gbps": 0.936, "cpu_pct": 62.2, "overloaded_pct": 6.8},
             {"host": "h2", "delivered_gbps": 0.936, "cpu_pct": 57.1, "overloaded_pct": 0.0}]


def measured(busy=(80.0, 70.0), dataplane=(63.5, 58.0)):
    hosts = {h: {"gbps": {"tx" if h == "h1" else "rx": 0.9992}, "cpu_pct": d, "busy_pct": b, "cpus": 1,
                 "guest_pct": verify.guest_cpu(h, PAIRS)} for h, b, d in zip(("h1", "h2"), busy, dataplane)}
    return {"hosts": hosts, "failed": []}


def test_the_workloads_own_cpu_is_each_iperf3_end_on_its_host():
    assert verify.guest_cpu("h1", PAIRS) == pytest.approx(12.0)
    assert verify.guest_cpu("h2", PAIRS) == pytest.approx(8.2)
    assert verify.guest_cpu("h3", PAIRS) == 0.0
    assert verify.guest_cpu("h1", [{**PAIRS[0], "guest_cpu_pct": [None, 4.0]}]) is None


def test_other_work_is_busy_less_data_plane_less_the_workload():
    o = verify.other_work(busy_pct=80.0, dataplane_pct=63.5, guest_pct=12.0, cpus=1)
    assert o == {"other_work_pct": 4.5, "busy": False, "busy_pct": 80.0, "guest_pct": 12.0}


def test_a_neighbour_on_the_hosts_cpu_is_flagged_past_the_threshold():
    """Issue 46's failing run: the agnostic h1's data plane read 39.7% (63.5% alone) while
    the guests lane's TCG guests took the rest of its CPU."""
    o = verify.other_work(busy_pct=99.0, dataplane_pct=39.7, guest_pct=11.0, cpus=1)
    assert o["other_work_pct"] == 48.3 and o["busy"] is True
    edge = verify.OTHER_WORK_MAX_PCT
    assert verify.other_work(50.0 + edge, 40.0, 10.0, 1)["busy"] is False      # at it: not past it
    assert verify.other_work(50.1 + edge, 40.0, 10.0, 1)["busy"] is True


def test_other_work_is_a_share_of_the_hosts_cpus_and_never_negative():
    assert verify.other_work(150.0, 90.0, 20.0, 2)["other_work_pct"] == 20.0
    # a guest's rusage holding softirq the data plane counts too: a low estimate, clamped
    assert verify.other_work(60.0, 50.0, 14.0, 1)["other_work_pct"] == 0.0


def test_other_work_unmeasured_says_which_figure_is_missing():
    o = verify.other_work(None, 40.0, None, 1)
    assert o["other_work_pct"] is None and o["busy"] is None
    assert o["why"] == "not measured (no busy, guests' CPU figure)"


def test_the_machine_total_is_its_busy_cpus_less_the_testbeds_own():
    window = {"machine": {"busy_pct": 190.0, "cpus": 2},
              "hosts": {"h1": {"dataplane": 63.5}, "h2": {"dataplane": 58.0}}}
    got = verify.machine_cpu(window, measured()["hosts"])
    # (63.5 + 58 + 12 + 8.2) / 2 of its own, (190 - 141.7) / 2 the rest
    assert got == {"cpus": 2, "busy_pct": 95.0, "testbed_pct": 70.8, "other_work_pct": 24.2}
    assert verify.machine_cpu({}, measured()["hosts"])["other_work_pct"] is None


def test_on_the_profiles_machine_and_idle_cpus_the_prediction_is_judged():
    rows = verify.compare(PREDICTED, measured(), {}, PROFILE, PROFILE)
    assert [r["verdict"] for r in rows] == ["within", "within"]
    assert rows[0]["other_work"]["other_work_pct"] == 4.5
    off = verify.compare(PREDICTED, measured(busy=(40.0, 70.0), dataplane=(25.0, 58.0)), {}, PROFILE, PROFILE)
    assert off[0]["verdict"] == "off" and off[0]["cpu_within"] is False


def test_on_another_machine_nothing_is_judged_and_both_machines_are_named():
    from vnetbench.capacity import machine
    rows = verify.compare(PREDICTED, measured(), machine.differences(PROFILE, XEON), PROFILE, XEON)
    for r in rows:
        assert r["verdict"] == "not comparable" and r["gbps_within"] is None and r["cpu_within"] is None
        assert r["why"] == ("not comparable: profile measured on AMD EPYC, kernel 6.18.44-fc-v669, x86_64, "
                            "netns, datapath netdev, ports afxdp, verified on Intel(R) Xeon(R) Processor, "
                            "kernel 6.18.44-fc-v1300, x86_64, netns, datapath netdev, ports afxdp")
        assert r["cpu_error_pct"] is not None          # the errors stay reported
    assert rows[0]["cpu_error_pct"] == round(100 * (63.5 - 62.2) / 62.2, 1)


def test_a_busy_host_is_not_judged_even_when_its_figures_look_right():
    rows = verify.compare(PREDICTED, measured(busy=(99.0, 70.0), dataplane=(60.0, 58.0)), {}, PROFILE, PROFILE)
    assert rows[0]["verdict"] == "busy" and rows[0]["cpu_within"] is None
    assert rows[0]["why"].startswith("not judged: other work took 27% of the host's CPUs (more than 10%)")
    assert rows[1]["verdict"] == "within"


def _out(rows, diffs, here):
    v = {"hosts": rows, "failed": [],
         "machine": {"profile": PROFILE, "here": here, "comparable": not diffs, "differences": diffs},
         "machine_cpu": {"cpus": 2, "busy_pct": 95.0, "testbed_pct": 71.6, "other_work_pct": 23.4}}
    return {"placements": {"agnostic": {"verify": v}}}


def test_the_text_says_not_comparable_with_each_differing_fact():
    from vnetbench.capacity import machine
    diffs = machine.differences(PROFILE, XEON)
    text = commands.verify_text(_out(verify.compare(PREDICTED, measured(), diffs, PROFILE, XEON), diffs, XEON))
    assert ("NOT COMPARABLE: profile measured on AMD EPYC, kernel 6.18.44-fc-v669, x86_64, netns, datapath "
            "netdev, ports afxdp; verified on Intel(R) Xeon(R) Processor") in text
    assert "(differs: CPU AMD EPYC, here Intel(R) Xeon(R) Processor; kernel 6.18.44-fc-v669, here " \
           "6.18.44-fc-v1300)" in text
    rows = [line for line in text.splitlines() if line.startswith(("h1 ", "h2 "))]
    assert len(rows) == 2 and all(line.endswith("not comparable") for line in rows)
    assert "machine over the step: 95% of its 2 CPU(s) busy, the testbed's own 71.6%, other work 23.4%" in text


def test_the_text_flags_a_busy_host_and_names_its_other_work():
    rows = verify.compare(PREDICTED, measured(busy=(99.0, 70.0), dataplane=(60.0, 58.0)), {}, PROFILE, PROFILE)
    text = commands.verify_text(_out(rows, {}, PROFILE))
    assert "same machine as the profile: AMD EPYC" in text
    assert "h1: other work on these CPUs: 27% (more than 10%): its figures are not the vSwitch's" in text
    h1 = next(line for line in text.splitlines() if line.startswith("h1 "))
    assert "27% BUSY" in h1 and h1.endswith("not judged (busy)")
    h2 = next(line for line in text.splitlines() if line.startswith("h2 "))
    assert h2.endswith("yes")


RECORDED = Path(__file__).resolve().parents[1] / "data" / "capacity" / "plan-verify-busy.json"


def test_a_recorded_verification_on_another_busy_machine_judges_nothing_and_says_why():
    """A real run (tests/data/capacity/README.md): the profile's AMD EPYC against this
    project's Intel Xeon, both CPUs busy with other test lanes."""
    out = json.loads(RECORDED.read_text())
    for name in ("agnostic", "aware"):
        v = out["placements"][name]["verify"]
        assert set(v["machine"]["differences"]) == {"cpu_model", "kernel"}
        assert {r["verdict"] for r in v["hosts"]} == {"not comparable"}
        assert all(r["other_work"]["busy"] for r in v["hosts"])
        assert v["machine_cpu"]["other_work_pct"] > 50
        # re-judged from its own figures, the same verdicts
        m = {"hosts": {r["host"]: {"gbps": {"tx": r["measured_gbps"]}, "cpu_pct": r["measured_cpu_pct"], "cpus": 1,
                                   "busy_pct": r["other_work"]["busy_pct"], "guest_pct": r["other_work"]["guest_pct"]}
                       for r in v["hosts"]}}
        again = verify.compare(out["placements"][name]["hosts"], m, v["machine"]["differences"],
                               v["machine"]["profile"], v["machine"]["here"])
        assert [(r["verdict"], r["why"]) for r in again] == [(r["verdict"], r["why"]) for r in v["hosts"]]
        same = verify.compare(out["placements"][name]["hosts"], m, {}, v["machine"]["here"], v["machine"]["here"])
        assert {r["verdict"] for r in same} == {"busy"}        # on its own machine: still not judged
    text = commands.verify_text(out)
    assert text.count("NOT COMPARABLE: profile measured on AMD EPYC") == 2
    assert "h1: other work on these CPUs: 58.5% (more than 10%): its figures are not the vSwitch's" in text
    assert "machine over the step: 100% of its 2 CPU(s) busy, the testbed's own 40.5%, other work 59.5%" in text
