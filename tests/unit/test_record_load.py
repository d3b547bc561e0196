"""The one records loader (vnetbench.results.load): what it refuses and how (one line:
file, line, field, fix), versions, text, bounds; merged runs in report and capacity; the
compiled schema check agrees with jsonschema. No root needed."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile_records import mutated_record
from vnetbench import cli
from vnetbench.errors import VnetbenchError
from vnetbench.functional import matrix_file
from vnetbench.report import charts, table
from vnetbench.results import load
from vnetbench.results.record import SCHEMA_VERSION

DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]
GOOD = {"test": "tcp_stream", "labels": {"vswitch": "ovs", "network": "vxlan", "placement": "same-host",
                                         "params": {"used": 1410}},
        "samples": {"gbps": [1.0, 1.1, 1.2]}, "started": 1.0, "finished": 2.0, "schema": 1}


def refused(tmp_path, *lines) -> str:
    path = tmp_path / "records.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    with pytest.raises(VnetbenchError) as exc:
        load.read(path)
    text = str(exc.value)
    assert "\n" not in text and text.isprintable() and len(text) <= 500, text
    return text


def with_(**changes):
    d = json.loads(json.dumps(GOOD))
    for dotted, value in changes.items():
        node, *path = dotted.split("__")
        target = d
        for part in [node, *path][:-1]:
            target = target[part]
        target[[node, *path][-1]] = value
    return d


@pytest.mark.parametrize("line, field, problem", [
    (with_(samples__gbps=[1.0, "fast"]), "samples.gbps[1]", "'fast' is not a number within ±1e+18 or null"),
    (with_(labels__params=[1, 2]), "labels.params", "[1, 2] is not an object"),
    (with_(samples=[]), "samples", "[] is not an object"),
    ('{"test": "a", "labels": {"vswitch": "ovs", "network": "x"}, "samples": {"g": [NaN]}}',
     "samples.g[0]", "nan is not a finite number"),
    ('{"test": "a", "labels": {"vswitch": "ovs", "network": "x"}, "samples": {"g": [Infinity]}}',
     "samples.g[0]", "inf is not a finite number"),
    ('{"test": "a", "labels": {"vswitch": "ovs", "network": "x"}, "samples": {"g": [1e400]}}',
     "samples.g[0]", "inf is not a finite number"),
    (with_(samples__gbps=[10**30]), "samples.gbps[0]", "1000000000000000000000000000000 is not a finite number"),
    (with_(samples__gbps=[1e308, 1e308]), "samples.gbps[0]", "is not a finite number within ±1e+18"),
    (with_(started="yesterday"), "started", "'yesterday' is not a Unix time"),
    (with_(labels__vswitch="ovs\n"), "labels.vswitch", "contains the control character U+000A"),
    (with_(labels__point="\x1b[31mred"), "labels.point", "contains the control character U+001B"),
    (with_(labels__network="x" * 2_000_000), "labels.network", "is 2000000 characters long"),
    (with_(test="t" * 65), "test", "is 65 characters long"),
    (with_(labels__params__used="1410"), "labels.params.used", "'1410' is not an integer or null"),
    ('{"test": "a", "test": "b", "labels": {"vswitch": "ovs", "network": "x"}, "samples": {}}',
     "test", "the key appears twice"),
])
def test_a_bad_record_is_one_line_with_file_line_field_and_fix(tmp_path, line, field, problem):
    text = refused(tmp_path, GOOD, line)
    assert text.startswith(f"{tmp_path / 'records.jsonl'}:2: {field}: "), text
    assert problem in text and "; " in text.partition(problem)[2], text


def test_a_2_mb_label_is_refused_at_once(tmp_path):
    t0 = time.monotonic()
    refused(tmp_path, with_(labels__vswitch="ovs" * 700_000))
    assert time.monotonic() - t0 < 3


def test_versions(tmp_path):
    no_field = {k: v for k, v in GOOD.items() if k != "schema"}
    assert load.read(_write(tmp_path, no_field))[0].test == "tcp_stream"       # before the field: 1
    text = refused(tmp_path, with_(schema=SCHEMA_VERSION + 1))
    assert f"schema: record schema version {SCHEMA_VERSION + 1} is newer than this vnetbench reads" in text
    assert "provenance.vnetbench" in text
    assert "schema: '1' is not a record schema version" in refused(tmp_path, with_(schema="1"))


def _write(tmp_path, *records) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_free_text_is_escaped_never_printed_raw(tmp_path, capsys):
    """Labels with control characters are refused (above); free text is escaped at load."""
    na = {"test": "rfc2544", "labels": {"vswitch": "linuxbridge", "network": "vlan"}, "samples": {},
          "extra": {"not_applicable": "no 802.1q\x1b[2J\nrm -rf"}, "provenance": {"kernel": "6.1\x1b]0;x\x07"}}
    (rec,) = load.read(_write(tmp_path, na))
    assert rec.extra["not_applicable"] == "no 802.1q\\x1b[2J\\nrm -rf" and "\x1b" not in rec.provenance["kernel"]
    assert cli.main(["report", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "o"), "--format", "md"]) == 0
    md = (tmp_path / "o" / "report.md").read_text()
    assert "\x1b" not in md and "no 802.1q\\x1b[2J\\nrm -rf" in md


def test_the_published_schema_is_the_packaged_one():
    assert json.loads((ROOT / "schemas/record.schema.json").read_text()) == load.schema(), \
        "schemas/record.schema.json is stale: run make schema"
    assert load.schema()["properties"]["schema"]["maximum"] == SCHEMA_VERSION == load.schema()["x-record-version"]


def test_every_record_the_suite_keeps_for_tests_conforms():
    for path in (DATA / "report/records.jsonl", DATA / "capacity/records.jsonl", DATA / "spread/records.jsonl"):
        assert load.read(path)


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(mutated_record())
def test_the_compiled_check_agrees_with_jsonschema(rec):
    """The fast verdict (results.conform) and jsonschema's agree on hostile records."""
    try:
        doc = load.parse_json(json.dumps(rec))
    except (load.Problem, ValueError, RecursionError):
        return
    verdict = jsonschema.Draft202012Validator(load.schema()).is_valid(doc)
    assert load._conforms()(doc) == verdict


def _runs(tmp_path, *names) -> list[str]:
    out = []
    for i, name in enumerate(names):
        d = tmp_path / name
        d.mkdir()
        lines = (DATA / "capacity/records.jsonl").read_text() + (DATA / "report/records.jsonl").read_text()
        if i:      # the second run measured the same cells again, other values
            lines = lines.replace('"started": 17', '"started": 16').replace('"gbps": [', '"gbps": [0.5, ')
        (d / "records.jsonl").write_text(lines)
        out.append(str(d))
    return out


def test_capacity_over_two_runs_of_the_same_cells_pools_them_and_says_so(tmp_path, capsys):
    a, b = _runs(tmp_path, "a", "b")
    assert cli.main(["capacity", a, b, "--out", str(tmp_path / "p.yaml")]) == 0
    out = capsys.readouterr().out
    assert "2 runs (a, b): records of one cell from every run are pooled" in out
    doc = yaml.safe_load((tmp_path / "p.yaml").read_text())
    assert doc["provenance"]["combined"].startswith("records of one cell from every run are pooled")


def test_report_over_two_runs_of_the_same_cells_gives_each_a_column_and_says_so(tmp_path):
    a, b = _runs(tmp_path, "a", "b")
    assert cli.main(["report", a, b, "--out", str(tmp_path / "o"), "--format", "md"]) == 0
    md = (tmp_path / "o" / "report.md").read_text()
    assert "2 runs (a, b): each run's configurations are columns of their own" in md
    assert "ovs/vxlan (a)" in md and "ovs/vxlan (b)" in md


def _configs(tmp_path, n: int) -> Path:
    return _write(tmp_path, *[with_(labels__vswitch=f"k{i}") for i in range(n)])


def test_report_bounds_refuse_with_the_limit_named(tmp_path):
    path = _configs(tmp_path, table.MAX_COLUMNS + 1)
    with pytest.raises(VnetbenchError, match=f"{path}: more than {table.MAX_COLUMNS} configurations"):
        table.build(load.load([path]))
    rows = _write(tmp_path, *[with_(labels__point=f"p{i}") for i in range(table.MAX_ROWS + 1)])
    with pytest.raises(VnetbenchError, match=f"more than {table.MAX_ROWS} rows"):
        table.build(load.load([rows]))


def test_charts_are_left_out_beyond_their_bound_and_the_page_says_why(tmp_path):
    model = table.build(load.load([_configs(tmp_path, charts.MAX_SERIES + 1)]))
    assert charts.charts(model) == [] and "charts left out: 17 configurations" in charts.left_out(model)


@pytest.mark.parametrize("content, problem", [
    (b"", "is empty"), (b"garbage", "not JSON"), (b"\xff\xfe", "not UTF-8"), (b"[" * 100_000, "not usable JSON"),
    (b'{"cells": 3}', "cells: 3 is not a list"), (b'[]', "(top level): [] is not an object"),
    (b'{"cells": [{"vswitch": "ovs"}]}', "cells[0]: 'network' is a required property"),
])
def test_a_bad_matrix_json_is_one_line_naming_the_file(tmp_path, capsys, content, problem):
    shutil.copy(DATA / "report/records.jsonl", tmp_path / "records.jsonl")
    (tmp_path / "functional").mkdir()
    (tmp_path / "functional" / "matrix.json").write_bytes(content)
    with pytest.raises(VnetbenchError, match="functional/matrix.json: ") as exc:
        matrix_file.read(tmp_path / "functional" / "matrix.json")
    assert problem in str(exc.value)
    assert cli.main(["report", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matrix.json" in err and not (tmp_path / "o").exists()


def test_the_schema_refuses_in_names_what_the_suite_calls_control_characters():
    import re

    from vnetbench import inputs
    pattern = re.compile(load.schema()["$defs"]["control"]["pattern"])
    assert [c for c in range(0x10000) if bool(pattern.search(chr(c))) != bool(inputs.CONTROL.search(chr(c)))] == []


def test_line_numbers_count_newlines_only(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(with_(extra={"why": "a\u2028b"}), ensure_ascii=False)
                    + "\n" + json.dumps(with_(samples__gbps="x")) + "\n")
    with pytest.raises(VnetbenchError, match=r"r.jsonl:3: samples.gbps: 'x' is not a list"):
        load.read(path)


def _walked(line):
    """parse_json's verdict with the walk always taken: the data or (field, problem)."""
    try:
        doc = json.loads(line, object_pairs_hook=load._no_duplicates)
        load._walk(doc, "", 0, [load.MAX_VALUES])
        return doc
    except load.Problem as bad:
        return (bad.field, bad.problem)
    except (ValueError, RecursionError):
        return "refused"


def _parsed(line):
    try:
        return load.parse_json(line)
    except load.Problem as bad:
        return (bad.field, bad.problem) if "JSON line" not in bad.problem else "refused"


@settings(max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(mutated_record(), st.one_of(st.floats(), st.integers(-10**25, 10**25), st.text(max_size=4)),
       st.booleans())
def test_the_walk_skipped_only_where_it_finds_nothing(rec, value, ascii_only):
    """parse_json skips the walk, and record() the escaping, only where they would change
    nothing: the same data or the same refusal as with both always taken."""
    rec = dict(rec) if isinstance(rec, dict) else {"x": rec}
    rec["odd"] = [1.5, value]
    try:
        line = json.dumps(rec, ensure_ascii=ascii_only)
    except RecursionError:      # nested thousands deep: no line to read
        return
    want, got = _walked(line), _parsed(line)
    if isinstance(want, dict):
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        if load._plain(line):
            assert load._escaped(got) == got
    else:
        assert got == want
