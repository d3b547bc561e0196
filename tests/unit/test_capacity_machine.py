"""The machine a capacity profile describes: each cell states the one its records were
measured on, records of one cell from two machines are refused, ``plan`` states the
machines (text and JSON), and the comparison with another machine names each differing
fact. Figures from tests/data/capacity (recorded on an AMD EPYC, kernel 6.18.44-fc-v669)
and this project's CI machine (an Intel Xeon, kernel 6.18.44-fc-v1300, issue 46)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from vnetbench.capacity import machine, planner, profile
from vnetbench.results.load import load

DATA = Path(__file__).resolve().parents[1] / "data"
SCALE = [r for run in load([DATA / "capacity" / "records.jsonl"]) for r in run.records]

RECORDED = {"cpu_model": "AMD EPYC", "kernel": "6.18.44-fc-v669", "arch": "x86_64", "backend": "netns",
            "datapath": "netdev", "ports": "afxdp"}
XEON = {**RECORDED, "cpu_model": "Intel(R) Xeon(R) Processor", "kernel": "6.18.44-fc-v1300"}


def cell(doc, kind):
    return next(c for c in doc["cells"] if c["vswitch"] == kind and c["roles"])


def test_every_cell_states_the_machine_its_records_were_measured_on():
    doc = profile.build(SCALE)
    assert cell(doc, "ovs")["machine"] == RECORDED
    assert cell(doc, "linuxbridge")["machine"] == {**RECORDED, "datapath": None, "ports": None}
    assert list(cell(doc, "ovs")["machine"]) == list(machine.FACTS)      # stated in one order
    assert {json.dumps(m, sort_keys=True) for m in doc["provenance"]["machines"]} == {
        json.dumps(c["machine"], sort_keys=True) for c in doc["cells"]}


def test_one_cells_records_from_two_machines_are_refused_naming_both():
    other = copy.deepcopy([r for r in SCALE if r.labels["vswitch"] == "ovs"][:2])
    for r in other:
        r.provenance["cpu_model"] = "Intel(R) Xeon(R) Processor"
    with pytest.raises(machine.MixedMachines) as exc:
        profile.build(SCALE + other)
    text = str(exc.value)
    assert "cell ovs/vxlan" in text and "AMD EPYC" in text and "Intel(R) Xeon(R) Processor" in text
    assert "one profile per machine" in text and exc.value.exit_code == 2


def test_the_same_machine_differs_in_nothing():
    assert machine.differences(RECORDED, dict(RECORDED)) == {}


def test_each_differing_fact_is_a_field_with_both_values():
    assert machine.differences(RECORDED, XEON) == {
        "cpu_model": {"profile": "AMD EPYC", "here": "Intel(R) Xeon(R) Processor"},
        "kernel": {"profile": "6.18.44-fc-v669", "here": "6.18.44-fc-v1300"}}
    assert machine.describe_differences(machine.differences(RECORDED, {**RECORDED, "ports": "afpacket"})) \
        == "ports afxdp, here afpacket"


def test_a_profile_that_does_not_state_its_machine_is_no_match():
    """A hand-written profile (real hardware) or one built before cells said their machine:
    unknown is not 'the same'."""
    assert set(machine.differences(None, XEON)) == {"cpu_model", "kernel", "arch", "backend", "datapath",
                                                    "ports"}
    assert set(machine.differences({"cpu_model": XEON["cpu_model"]}, XEON)) == {
        "kernel", "arch", "backend", "datapath", "ports"}


def test_describe_reads_as_one_line():
    assert machine.describe(RECORDED) == ("AMD EPYC, kernel 6.18.44-fc-v669, x86_64, netns, datapath netdev, "
                                          "ports afxdp")
    assert machine.describe({**RECORDED, "datapath": None, "ports": None}) == \
        "AMD EPYC, kernel 6.18.44-fc-v669, x86_64, netns"
    assert machine.describe(None) == "an unstated machine"


def _plan(doc):
    from vnetbench.capacity.files import Flow, HostSpec, Hosts, VmSpec, Workload
    w = Workload("t", tuple(VmSpec(n, 2, 2048) for n in ("a", "b")), (Flow("a", "b", 0.1, 0.1),))
    return planner.plan(w, Hosts("vxlan", tuple(HostSpec(f"h{i}", 4, 16384, "ovs") for i in (1, 2))), doc)


@pytest.mark.parametrize("fmt", planner.FORMATS)
def test_plan_states_the_machine_of_the_cells_it_used(fmt):
    text = planner.render(_plan(profile.build(SCALE)), fmt)
    line = ("profile ovs/vxlan measured on AMD EPYC, kernel 6.18.44-fc-v669, x86_64, netns, datapath netdev, "
            "ports afxdp")
    if fmt == "json":
        assert json.loads(text)["profile"]["machines"] == [{"vswitch": "ovs", "network": "vxlan",
                                                            "machine": RECORDED}]
    else:
        assert line in text
        assert "linuxbridge" not in text          # a cell the plan did not use is not its machine


def test_plan_says_when_the_profile_does_not_state_its_machine():
    doc = profile.build(SCALE)
    for c in doc["cells"]:
        del c["machine"]
    text = planner.render(_plan(doc), "table")
    assert "profile ovs/vxlan measured on an unstated machine (the profile does not say" in text


def test_the_machine_reads_back_through_the_published_schema_and_nothing_else_fits(tmp_path):
    import yaml

    from vnetbench.capacity import files
    from vnetbench.errors import TestbedFileError
    doc = profile.build(SCALE)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert files.load_profile(path)["cells"][0]["machine"] == doc["cells"][0]["machine"]
    doc["cells"][0]["machine"]["gpu"] = "none"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TestbedFileError, match="gpu"):
        files.load_profile(path)


def test_the_published_schema_copy_is_identical():
    root = Path(__file__).resolve().parents[2]
    assert (root / "schemas" / "capacity-profile.schema.json").read_text() == \
        (root / "src" / "vnetbench" / "schemas" / "capacity-profile.schema.json").read_text()
