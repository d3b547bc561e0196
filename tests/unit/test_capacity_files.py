"""Property tests: any workload, hosts or capacity-profile file given to ``vnetbench plan``
ends in exit 0 (placed), 1 (no network-aware placement: said in the output) or 2 with one
line naming the file and the fix, within the same time and memory bounds as testbed
files (issue 28; the bounds and mutations of test_hostile_input)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hostile_docs import ALIAS_BOMBS, encoded, from_schema, mutated, to_yaml
from test_capacity_plan import PROFILE
from test_hostile_input import SETTINGS, assert_one_line_outcome, run
from vnetbench.capacity.files import schema

WORKLOAD = {"name": "w", "vms": [{"name": "a", "vcpus": 2, "memory_mb": 2048},
                                 {"name": "b", "vcpus": 2, "memory_mb": 2048}],
            "flows": [{"from": "a", "to": "b", "gbps": 0.5}]}
HOSTS = {"vswitch": "ovs", "network": "vxlan", "hosts": [{"name": "h", "count": 2, "cores": 4, "memory_mb": 8192}]}
WORKLOADS = from_schema(schema("workload"))
HOSTS_DOCS = from_schema(schema("hosts"))


def plan(workload: bytes, hosts: bytes, profile: bytes):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, data in (("workload.yaml", workload), ("hosts.yaml", hosts), ("profile.yaml", profile)):
            (Path(d) / name).write_bytes(data)
            paths.append(str(Path(d) / name))
        code, out, err, seconds = run(["plan", *paths[:2], "--capacity", paths[2], "--format", "json"])
        if code == 1:        # placed one way, not the other: a result, said in the output
            assert err == "" and json.loads(out)["placements"]["aware"]["infeasible"]
            return code, err
        assert_one_line_outcome(code, out, err, seconds)
        if code == 0:
            json.loads(out)
        return code, err


def text(doc) -> bytes:
    return yaml.safe_dump(doc).encode()


def test_the_valid_files_plan():
    assert plan(text(WORKLOAD), text(HOSTS), text(PROFILE)) == (0, "")


@settings(max_examples=120, **SETTINGS)
@given(mutated(st.one_of(WORKLOADS, st.just(WORKLOAD))), st.data())
def test_any_workload_file_plans_or_fails_in_one_line(case, data):
    kind, doc = case
    plan(data.draw(encoded(to_yaml(doc))), text(HOSTS), text(PROFILE))


@settings(max_examples=120, **SETTINGS)
@given(mutated(st.one_of(HOSTS_DOCS, st.just(HOSTS))), st.data())
def test_any_hosts_file_plans_or_fails_in_one_line(case, data):
    kind, doc = case
    plan(text(WORKLOAD), data.draw(encoded(to_yaml(doc))), text(PROFILE))


@settings(max_examples=120, **SETTINGS)
@given(mutated(st.just(PROFILE)), st.data())
def test_any_profile_file_plans_or_fails_in_one_line(case, data):
    kind, doc = case
    plan(text(WORKLOAD), text(HOSTS), data.draw(encoded(to_yaml(doc))))


@settings(max_examples=20, **SETTINGS)
@given(st.sampled_from(ALIAS_BOMBS), st.sampled_from([0, 1, 2]), st.data())
def test_alias_bombs_in_any_of_the_three(bomb, which, data):
    files = [text(WORKLOAD), text(HOSTS), text(PROFILE)]
    files[which] = data.draw(encoded(bomb))
    plan(*files)


@pytest.mark.parametrize("doc,where,fix", [
    ({**WORKLOAD, "flows": [{"from": "a", "to": "zz", "gbps": 1}]}, "flows[0].to", "declare it"),
    ({**WORKLOAD, "flows": [{"from": "a", "to": "a", "gbps": 1}]}, "flows[0]", "sends to itself"),
    ({**WORKLOAD, "flows": [{"from": "a", "to": "b", "gbps": 1, "peak_gbps": 0.5}]}, "flows[0].peak_gbps",
     "give a peak >= the average"),
    ({**WORKLOAD, "vms": WORKLOAD["vms"] * 2}, "vms[2].name", "give every VM its own name"),
    ({**WORKLOAD, "vms": [{"name": "a", "vcpus": 0, "memory_mb": 1}]}, "vms[0].vcpus", "use a value >= 1"),
])
def test_workload_errors_name_the_field_and_the_fix(doc, where, fix):
    code, err = plan(text(doc), text(HOSTS), text(PROFILE))
    assert code == 2 and "workload.yaml: " + where + ": " in err and fix in err, err


@pytest.mark.parametrize("doc,where,fix", [
    ({"hosts": HOSTS["hosts"], "vswitch": "ovs"}, "network", "give the tenant network type"),
    ({"network": "vxlan", "hosts": HOSTS["hosts"]}, "hosts[0].vswitch", "give 'vswitch'"),
    ({**HOSTS, "hosts": [{"name": "h1", "cores": 1, "memory_mb": 1}, {"name": "h", "count": 2, "cores": 1,
                                                                     "memory_mb": 1}]},
     "hosts[1]", "give every host its own name"),
    ({**HOSTS, "hosts": [{"name": "h", "count": 1000, "cores": 1, "memory_mb": 1},
                         {"name": "g", "count": 25, "cores": 1, "memory_mb": 1}]}, "hosts[1].count",
     "plan a smaller share"),
    ({**HOSTS, "hosts": [{"name": "h", "count": 1025, "cores": 1, "memory_mb": 1}]}, "hosts[0].count",
     "use a value <= 1024"),
])
def test_hosts_errors_name_the_field_and_the_fix(doc, where, fix):
    code, err = plan(text(WORKLOAD), text(doc), text(PROFILE))
    assert code == 2 and "hosts.yaml: " + where + ": " in err and fix in err, err


def test_a_profile_whose_loads_do_not_rise_is_refused():
    cell = json.loads(json.dumps(PROFILE["cells"][0]))
    cell["roles"]["tx"]["points"].reverse()
    code, err = plan(text(WORKLOAD), text(HOSTS), text({**PROFILE, "cells": [cell]}))
    assert code == 2 and "profile.yaml: cells[0].roles.tx.points: " in err and "rising" in err


@pytest.mark.parametrize("name", ["workload", "hosts", "capacity-profile"])
def test_the_published_schemas_are_the_packaged_ones(name):
    published = Path(__file__).resolve().parents[2] / "schemas" / f"{name}.schema.json"
    assert json.loads(published.read_text()) == schema(name), f"{published} is stale: run make schema"
