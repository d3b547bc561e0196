"""history regressions: Otava's change points over each cell's series, with a minimum
change per metric, a minimum number of runs, directions, an acknowledgement file, and
table / JSON / JUnit output; exit 1 on an unacknowledged regression.

The synthetic series: one run a point, three repetitions a run, each repetition with
5 % noise (relative sd) around the run's true mean.
"""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET

import pytest

from vnetbench import cli
from vnetbench.history import regress, thresholds

from history_runs import postgres, series_runs, store  # noqa: F401  (fixtures)

STABLE = [100.0] * 30
DROP = [100.0] * 19 + [85.0] * 11          # runs 20..30 are 15 % lower


def noisy(means, seed, noise=0.05, reps=3):
    rng = random.Random(seed)
    return [sum(m * (1 + rng.gauss(0, noise)) for _ in range(reps)) / reps for m in means]


@pytest.mark.parametrize("seed", range(20))
def test_otava_on_stable_and_stepped_series(seed):
    rule = thresholds.load_rules().of("gbps")
    assert regress.detect(noisy(STABLE, seed), rule) == []
    (found,) = regress.detect(noisy(DROP, seed), rule)
    index, before, after, pct, p = found
    assert abs(index - 19) <= 1 and pct == pytest.approx(-15, abs=4) and p < 0.001


@pytest.mark.parametrize("seed", range(5))
def test_an_outlier_of_two_runs_is_no_step(seed):
    rule = thresholds.load_rules().of("gbps")
    blip = noisy(STABLE, seed)
    blip[12] *= 0.7
    blip[13] *= 0.7
    assert regress.detect(blip, rule) == []


def add_all(store, dirs):
    assert cli.main(["history", "add", *map(str, dirs), "--db", store]) == 0


def test_stable_series_no_regression(store, tmp_path, capsys):
    add_all(store, series_runs(tmp_path, STABLE))
    capsys.readouterr()
    assert cli.main(["history", "regressions", "--db", store]) == 0
    out = capsys.readouterr().out
    assert "1 series: 0 with a regression, 0 acknowledged, 1 ok" in out


def test_drop_found_at_run_20_then_acknowledged(store, tmp_path, capsys):
    add_all(store, series_runs(tmp_path, DROP))
    capsys.readouterr()
    junit = tmp_path / "out" / "history.xml"
    junit.parent.mkdir()           # an output's directory must exist (vnetbench.outfiles)
    assert cli.main(["history", "regressions", "--db", store, "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "1 with a regression" in out and "to acknowledge" in out
    assert cli.main(["history", "regressions", "--db", store, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (series,) = doc["results"]
    assert series["verdict"] == "regression" and series["runs"] == 30 and series["metric"] == "gbps"
    (change,) = series["changes"]
    assert abs(change["index"] + 1 - 20) <= 1 and change["kind"] == "regression"
    assert change["change_pct"] == pytest.approx(-15, abs=4)
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1" and suite.find("testcase/failure") is not None
    ack = tmp_path / "ack.yaml"
    ack.write_text(f"- {{cell: {series['cell'][:8]}, metric: gbps, run: {change['run'][:12]}, "
                   "reason: 'kernel 6.12 moved the TCP stack; accepted'}\n")
    assert cli.main(["history", "regressions", "--db", store, "--ack", str(ack), "--junit", str(junit)]) == 0
    out = capsys.readouterr().out
    assert "regression (acknowledged)" in out and "0 with a regression, 1 acknowledged" in out
    assert ET.parse(junit).getroot().get("failures") == "0"
    # the drop is a regression only because throughput is better higher: a latency rising is one too
    assert cli.main(["history", "regressions", "--db", store, "--since", "2030-01-01"]) == 0
    assert "no series" in capsys.readouterr().out


def test_latency_rise_is_a_regression_fall_an_improvement(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    add_all(db, series_runs(tmp_path / "up", [1.0] * 19 + [1.3] * 11, metric="rtt_mean_ms", test="icmp_rtt"))
    add_all(db, series_runs(tmp_path / "down", [2.0] * 19 + [1.5] * 11, metric="rtt_p99_ms", test="icmp_rtt", seed=3))
    capsys.readouterr()
    assert cli.main(["history", "regressions", "--db", db, "--format", "json"]) == 1
    kinds = {s["metric"]: [c["kind"] for c in s["changes"]] for s in json.loads(capsys.readouterr().out)["results"]}
    assert kinds == {"rtt_mean_ms": ["regression"], "rtt_p99_ms": ["improvement"]}
    assert cli.main(["history", "regressions", "--db", db, "--metric", "rtt_p99_ms"]) == 0


def test_last_runs_only(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    add_all(db, series_runs(tmp_path, DROP))
    capsys.readouterr()
    assert cli.main(["history", "regressions", "--db", db, "--last", "15", "--format", "json"]) == 1
    (change,) = json.loads(capsys.readouterr().out)["results"][0]["changes"]
    assert abs(change["index"] + 1 - 20) <= 1          # its position in the whole series
    assert cli.main(["history", "regressions", "--db", db, "--last", "8"]) == 0   # the newest 8: all after it


def test_three_runs_not_enough(store, tmp_path, capsys):
    add_all(store, series_runs(tmp_path, [100.0, 100.0, 50.0]))
    capsys.readouterr()
    junit = tmp_path / "j.xml"
    assert cli.main(["history", "regressions", "--db", store, "--junit", str(junit)]) == 0
    out = capsys.readouterr().out
    assert "not enough runs: " in out and "3 of the 6 needed" in out
    assert ET.parse(junit).getroot().get("skipped") == "1"


def test_thresholds_file_changes_the_minimum(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    add_all(db, series_runs(tmp_path, DROP))
    rules = tmp_path / "t.yaml"
    rules.write_text("defaults: {better: either, min_change_pct: 5, min_runs: 6, min_segment: 3, max_pvalue: 0.001}\n"
                     "metrics:\n  - {match: gbps, better: higher, min_change_pct: 30}\n")
    capsys.readouterr()
    assert cli.main(["history", "regressions", "--db", db, "--thresholds", str(rules)]) == 0
    rules.write_text("defaults: {better: either, min_change_pct: 5, min_runs: 40, min_segment: 3, max_pvalue: 0.001}\n")
    assert cli.main(["history", "regressions", "--db", db, "--thresholds", str(rules)]) == 0
    assert "30 of the 40 needed" in capsys.readouterr().out


@pytest.mark.parametrize("name, text, words", [
    ("t.yaml", "defaults: {better: up, min_change_pct: 5, min_runs: 6, min_segment: 3, max_pvalue: 0.001}\n",
     "defaults.better: 'up' is not allowed; use higher, lower or either"),
    ("t.yaml", "defaults: {better: lower, min_change_pct: 5, min_runs: 1, min_segment: 3, max_pvalue: 0.001}\n",
     "defaults.min_runs: 1 is not a whole number from 3 to 10000"),
    ("t.yaml", "defaults: {better: lower, min_change_pct: 5, min_runs: 6}\n", "defaults.min_segment: missing"),
    ("t.yaml", "metrics: []\n", "no 'defaults' mapping"),
    ("t.yaml", "defaults: [\n", "--thresholds"),
    ("a.yaml", "- {cell: '*', metric: gbps, run: ab}\n", "[0].reason: missing or empty"),
    ("a.yaml", "- {cell: '*', metric: gbps, run: ab, reason: x}\n", "[0].run: 'ab' is shorter than 4 characters"),
    ("a.yaml", "cell: x\n", "(top level): not a list"),
])
def test_bad_thresholds_and_ack_files_one_line(tmp_path, capsys, name, text, words):
    path = tmp_path / name
    path.write_text(text)
    flag = "--thresholds" if name == "t.yaml" else "--ack"
    assert cli.main(["history", "regressions", "--db", str(tmp_path / "h.sqlite"), flag, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and str(path) in err, err


@pytest.mark.parametrize("argv, words", [
    (["--since", "yesterday"], "--since 'yesterday': not a date; give YYYY-MM-DD"),
    (["--where", "nope=1"], "--where 'nope=1'"),
    (["--junit", "/proc/nope/j.xml"], "--junit '/proc/nope/j.xml': directory '/proc/nope' does not exist"),
    (["--last", "2"], "--last: '2': give a whole number of runs >= 6"),
    (["--jobs", "0"], "--jobs: '0': give a whole number from 1 to 64"),
])
def test_bad_regressions_flags_one_line(tmp_path, capsys, argv, words):
    assert cli.main(["history", "regressions", "--db", str(tmp_path / "h.sqlite"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_worker_processes_find_what_one_process_finds():
    rule = thresholds.load_rules().of("gbps")
    jobs = [(noisy(DROP if i % 3 == 0 else STABLE, i), rule, None) for i in range(40)]
    assert regress._analyses(jobs, 2) == regress._analyses(jobs, 1)
    assert sum(1 for points, _ in regress._analyses(jobs, 2) if points) >= 13


@pytest.mark.parametrize("seed", range(6))
def test_otava_incremental_finds_what_the_whole_series_gives(seed):
    """Otava's incremental mode (the weak points of the first runs, then only the windows
    the new runs touch) judges a long series as analysing it whole does: stable, or a
    15 % step early, late or among the new runs."""
    rng = random.Random(seed)
    rule = thresholds.load_rules().of("gbps")
    for n, step_at, new in ((300, None, 1), (300, 40, 1), (300, 250, 10), (400, 396, 3), (1000, 700, 1)):
        means = [100.0 if step_at is None or i < step_at else 85.0 for i in range(n)]
        values = noisy(means, rng.randrange(10**6))
        _, weak = regress.analyse(values[:n - new], rule)
        whole, _ = regress.analyse(values, rule)
        incremental, _ = regress.analyse(values, rule, (n - new, weak))
        assert incremental == whole, (n, step_at, new)
        assert len(whole) == (step_at is not None and step_at <= n - 3), (n, step_at, whole)


def test_parallel_regressions_give_the_serial_verdicts(tmp_path):
    """find() over a stored history with two worker processes: the same series, verdicts,
    change points and order as in one process (40 series: enough for the pool)."""
    from dataclasses import asdict
    from history_runs import record, write_run
    from vnetbench.history import db
    rng = random.Random(49)
    dirs = []
    for i in range(30):
        recs = [record(values=[(85.0 if (p % 3 == 0 and i >= 19) else 100.0) * (1 + rng.gauss(0, 0.05))
                               for _ in range(3)], started=1.7e9 + 3600 * i, run_id=f"r{i}", point=str(p))
                for p in range(40)]
        dirs.append(write_run(tmp_path / f"run{i:03d}", recs))
    path = str(tmp_path / "h.sqlite")
    add_all(path, dirs)
    rules = thresholds.load_rules()
    with db.open_db(path).connect() as conn:
        serial = [asdict(s) for s in regress.find(conn, rules, jobs=1)]
        parallel = [asdict(s) for s in regress.find(conn, rules, jobs=2)]
    assert len(serial) == 40 and parallel == serial
    assert sum(1 for s in serial if s["verdict"] == "regression") >= 10


def _analysis(store, *argv):
    from vnetbench.history import db
    assert cli.main(["history", "regressions", "--db", store, "--format", "json", *argv]) in (0, 1)
    with db.open_db(store).connect() as conn:
        stored = {(r.cell, r.metric): r.runs for r in conn.execute(db.weak_points.select())}
    return stored


def test_regressions_store_weak_points_and_go_on_from_them(store, tmp_path, capsys):
    """The first regressions analyses every series whole and stores Otava's weak points;
    after one more run the series is analysed incrementally from them, with the verdict
    and change point --full gives; a run that lands among the earlier ones (an older
    measurement imported late) changes the series' first runs, and it is analysed whole."""
    means = [100.0] * 40 + [85.0] * 10
    dirs = series_runs(tmp_path, means)
    add_all(store, dirs[:45])
    capsys.readouterr()
    assert set(_analysis(store).values()) == {45}
    assert json.loads(capsys.readouterr().out)["results"][0]["analysis"] == "whole"

    add_all(store, dirs[45:])
    capsys.readouterr()
    assert set(_analysis(store).values()) == {50}
    incremental = json.loads(capsys.readouterr().out)["results"][0]
    assert incremental["analysis"] == "incremental"
    _analysis(store, "--full")
    full = json.loads(capsys.readouterr().out)["results"][0]
    assert full["analysis"] == "whole"
    assert {**incremental, "analysis": None} == {**full, "analysis": None}
    assert [c["index"] for c in full["changes"]] == [40] and full["verdict"] == "regression"

    from history_runs import record, write_run
    late = write_run(tmp_path / "late", [record(values=[100.0, 101.0, 99.0], started=1.7e9 + 3600 * 10.5,
                                                run_id="late")])
    add_all(store, [late])
    capsys.readouterr()
    assert set(_analysis(store).values()) == {51}
    assert json.loads(capsys.readouterr().out)["results"][0]["analysis"] == "whole"


def test_a_changed_p_value_analyses_whole(store, tmp_path, capsys):
    add_all(store, series_runs(tmp_path, [100.0] * 30))
    _analysis(store)
    rules = tmp_path / "t.yaml"
    rules.write_text("defaults: {better: either, min_change_pct: 10, min_runs: 6, min_segment: 3, max_pvalue: 0.01}\n")
    capsys.readouterr()
    _analysis(store, "--thresholds", str(rules))
    assert json.loads(capsys.readouterr().out)["results"][0]["analysis"] == "whole"
