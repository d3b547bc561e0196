"""Property tests: hostile records and run directories given to ``report``, ``capacity``
and ``reproduce 003 --from`` end in exit 0, or exit 2 with exactly one line on stderr
naming the file, within a time bound, and leave no output behind on failure (issue 51).
Records come from the published record schema and tests/data, mutated (hostile_records);
runs are merged (the same run twice, copies under other names) as users merge them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hostile_records import extreme_numbers, matrix_file, records_file
from test_hostile_input import SETTINGS, assert_one_line_outcome, run

RUNS = st.lists(st.tuples(records_file(), matrix_file()), min_size=1, max_size=3)


def make_runs(tmp: Path, runs, twice: bool) -> list[str]:
    """One directory per (records, matrix); ``twice``: the first given again and copied."""
    dirs = []
    for i, (records, matrix) in enumerate(runs):
        d = tmp / f"run{i}"
        d.mkdir()
        (d / "records.jsonl").write_bytes(records)
        if matrix is not None:
            (d / "matrix.json").write_bytes(matrix)
        dirs.append(str(d))
    if twice:
        shutil.copytree(dirs[0], tmp / "copy")
        dirs += [dirs[0], str(tmp / "copy")]
    return dirs


def assert_outcome(result, tmp: Path):
    code, out, err, seconds = result
    assert_one_line_outcome(code, out, err, seconds)
    if code == 2:
        assert str(tmp) in err, err       # names the file (or the run directory) at fault


@settings(max_examples=20, **SETTINGS)
@given(RUNS, st.booleans(), st.sampled_from(["md,csv", "md", "csv", "md,csv", "html"]))
def test_report_over_hostile_runs_is_a_report_or_one_line(runs, twice, formats):
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        dirs = make_runs(tmp, runs, twice)
        out = tmp / "out"
        result = run(["report", *dirs, "--out", str(out), "--format", formats])
        assert_outcome(result, tmp)
        if result[0] == 2:
            assert not out.exists()
        else:
            assert sorted(p.name for p in out.iterdir()) == sorted(
                {"md": "report.md", "csv": "report.csv", "html": "report.html"}[f] for f in formats.split(","))


@settings(max_examples=30, **SETTINGS)
@given(RUNS, st.booleans())
def test_capacity_over_hostile_and_merged_runs_is_a_profile_or_one_line(runs, twice):
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        dirs = make_runs(tmp, runs, twice)
        out = tmp / "profile.yaml"
        result = run(["capacity", *dirs, "--out", str(out)])
        assert_outcome(result, tmp)
        assert out.exists() == (result[0] == 0)
        if result[0] == 0 and len(dirs) > 1:
            assert f"{len(dirs)} runs (" in result[1] and "pooled" in result[1]


@settings(max_examples=30, **SETTINGS)
@given(records_file(), st.booleans())
def test_reproduce_from_hostile_records_judges_or_says_one_line(records, as_file):
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (d,) = make_runs(tmp, [(records, None)], False)
        source = str(Path(d) / "records.jsonl") if as_file else d
        result = run(["reproduce", "003", "--from", source])
        assert_outcome(result, tmp)
        left = sorted(p.name for p in Path(d).iterdir() if p.name.startswith("reproduce-"))
        assert left == ([] if result[0] == 2 else ["reproduce-003.json", "reproduce-003.md", "reproduce-003.txt"])


@settings(max_examples=25, **SETTINGS)
@given(extreme_numbers(), st.booleans())
def test_capacity_and_report_over_extreme_numbers(records, twice):
    """Loads of 0 or a denormal, CPU of ±1e18, rates that tie across runs: a profile (or
    a report) with finite figures, or one line -- never a division by zero or an overflow."""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        dirs = make_runs(tmp, [(records, None)], twice)
        out = tmp / "profile.yaml"
        result = run(["capacity", *dirs, "--out", str(out)])
        assert_outcome(result, tmp)
        assert out.exists() == (result[0] == 0)
        assert_outcome(run(["report", *dirs, "--out", str(tmp / "o"), "--format", "md,csv"]), tmp)
