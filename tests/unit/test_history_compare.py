"""history compare: per cell and metric both means, the % difference, Welch's t-test with
Hedges' g, "cannot tell" below three repetitions (never a verdict from n = 1), and no
verdict across a provenance difference -- which it lists instead."""

from __future__ import annotations

import json
import re

import pytest

from vnetbench import cli
from vnetbench.history import compare

from history_runs import PROVENANCE, build_history, postgres, record, store, write_run  # noqa: F401  (fixtures)


def test_judge_small_samples():
    worse = compare.judge([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2], "higher")
    assert worse["verdict"] == "worse" and worse["p"] < 0.001 and worse["effect_size"] < -5
    assert worse["diff_pct"] == pytest.approx(-19.90, abs=0.01)
    assert compare.judge([10.0, 10.2, 9.9], [10.1, 9.8, 10.0], "higher")["verdict"] == "no significant difference"
    assert compare.judge([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], "lower")["verdict"] == "worse"
    assert compare.judge([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], "either")["verdict"] == "higher"
    one = compare.judge([10.0], [5.0], "higher")
    assert one["verdict"].startswith("cannot tell (n=1") and one["p"] is None and one["diff_pct"] == -50
    assert compare.judge([10.0, 9.0], [5.0, 5.1, 5.2], "higher")["verdict"].startswith("cannot tell (n=2")
    assert compare.judge([3.0] * 3, [3.0] * 3, "higher")["verdict"] == "no difference"


def test_compare_baseline_with_latest(store, tmp_path, capsys):
    base = write_run(tmp_path / "base", [record(values=(10.0, 10.2, 9.9), started=1.7e9),
                                         record("icmp_rtt", "rtt_mean_ms", (0.10,), started=1.7e9)])
    new = write_run(tmp_path / "new", [record(values=(8.0, 8.1, 7.9), started=1.8e9, run_id="r1"),
                                       record("icmp_rtt", "rtt_mean_ms", (0.2,), started=1.8e9, run_id="r1")])
    assert cli.main(["history", "add", str(base), "--tag", "baseline", "--db", store]) == 0
    assert cli.main(["history", "add", str(new), "--db", store]) == 0
    capsys.readouterr()
    assert cli.main(["history", "compare", "baseline", "latest", "--db", store]) == 0
    out = capsys.readouterr().out
    assert "gbps" in out and "-20.3%" in out and "worse" in out and "cannot tell (n=1" in out
    assert cli.main(["history", "compare", "baseline", "--db", store, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (gbps,) = [c for c in doc["cells"] if c["metric"] == "gbps"]
    assert gbps["a"]["mean"] == pytest.approx(10.0333, abs=1e-3) and gbps["verdict"] == "worse"
    assert gbps["effect"] == "hedges_g" and gbps["stat_test"] == "welch_t" and gbps["test"] == "tcp_stream"
    assert doc["software_metadata_diff"] == {}


def test_provenance_difference_listed_not_judged(store, tmp_path, capsys):
    other = dict(PROVENANCE, kernel="6.12.0")
    a = write_run(tmp_path / "a", [record(started=1.7e9)])
    b = write_run(tmp_path / "b", [record(values=(5.0, 5.1, 5.2), started=1.8e9, provenance=other)])
    for run in (a, b):
        assert cli.main(["history", "add", str(run), "--db", store]) == 0
    capsys.readouterr()
    assert cli.main(["history", "compare", "latest~", "latest", "--db", store]) == 2     # no such ref
    capsys.readouterr()
    assert cli.main(["history", "compare", "a", "b", "--db", store, "--format", "json"]) == 2  # names are not refs
    capsys.readouterr()
    from vnetbench.history import db, query
    with db.open_db(store).connect() as conn:
        ids = [r["id"] for r in query.runs_where(conn, {})]
    assert cli.main(["history", "compare", ids[1][:8], ids[0][:8], "--db", store, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cells"] == [] and doc["software_metadata_diff"] == {"kernel": {"a": "6.1.0-28-amd64", "b": "6.12.0"}}
    assert doc["provenance_differs"][0]["differs"] == {"kernel": {"a": "6.1.0-28-amd64", "b": "6.12.0"}}
    assert cli.main(["history", "compare", ids[1][:8], ids[0][:8], "--db", store, "--ignore", "kernel"]) == 0
    out = capsys.readouterr().out
    assert "kernel: 6.1.0-28-amd64 -> 6.12.0" not in out and "worse" in out


@pytest.mark.parametrize("argv, words", [
    (["--alpha", "2"], "--alpha: '2': give a probability between 0 and 1"),
    (["--format", "xml"], "--format: invalid choice: 'xml'"),
    (["--thresholds", "NOFILE"], "--thresholds NOFILE: cannot read file"),
])
def test_compare_flags_refused(tmp_path, capsys, argv, words):
    assert cli.main(["history", "compare", "x", "y", "--db", str(tmp_path / "h.sqlite"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_html_report_draws_the_series_with_its_change_points(store, tmp_path, capsys):
    """--html: the page holds the comparison's table and, per judged cell, the series over
    the whole history with Otava's change point at run 20 and runs A and B marked; a
    self-contained page (no script, nothing fetched), written through vnetbench.outfiles."""
    build_history(tmp_path, store)
    capsys.readouterr()
    assert cli.main(["history", "list", "--db", store, "--limit", "30", "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    first = runs[-1]["id"]
    page = tmp_path / "compare.html"
    assert cli.main(["history", "compare", first[:12], "latest", "--db", store, "--html", str(page)]) == 0
    text = capsys.readouterr().out
    assert "-1" in text and "worse" in text               # the dropped cell, run 1 against run 30
    html = page.read_text()
    assert html.count("<svg") == 2 and "<script" not in html and not re.search(r"(src|href)=.https?:", html)
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html)
    (dropped,) = [c for c in captions if "regression at run" in c]
    at = int(re.search(r"regression at run (\d+) \(-1\d\.\d%\)", dropped)[1])
    assert abs(at - 20) <= 1 and "over 30 runs" in dropped
    (stable,) = [c for c in captions if c is not dropped]
    assert "change points (Apache Otava, 10 % minimum change): none" in stable
    assert html.index("worse") < html.index("<svg")        # the table, then the charts (significant first)


def test_html_report_refused_before_reading(store, tmp_path, capsys):
    out = tmp_path / "adir"
    out.mkdir()
    assert cli.main(["history", "compare", "a", "b", "--db", store, "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--html" in err and list(out.iterdir()) == []
    assert cli.main(["history", "compare", "a", "b", "--db", store, "--html", str(tmp_path / "no" / "x.html")]) == 2
    assert "--html" in capsys.readouterr().err


def test_html_chart_of_labels_with_dollars(tmp_path, capsys):
    """A label or metric with "$...$" is text on the chart, never matplotlib's math (a
    malformed formula would stop the page)."""
    target = str(tmp_path / "h.sqlite")
    for i in range(8):
        rec = record(metric="x$^{$y", values=(1.0 + (i > 3), 1.01, 0.99), started=1.7e9 + i, run_id=f"r{i}",
                     point="$\\frac{$")
        assert cli.main(["history", "add", str(write_run(tmp_path / f"r{i}", [rec])), "--db", target]) == 0
    capsys.readouterr()
    page = tmp_path / "p.html"
    assert cli.main(["history", "compare", "latest", "latest", "--db", target, "--html", str(page)]) == 0
    assert page.read_text().count("<svg") == 1


def test_repetitions_equal_but_for_rounding_have_no_spread(recwarn):
    """53.8 and 53.800000000000004 are one value: no t-test over rounding, no warning."""
    from vnetbench.history import compare
    a = [53.8, 53.8, 53.800000000000004]
    assert compare.judge(a, list(a), "lower")["verdict"] == "no difference"
    assert compare.judge(a, [54.1, 54.1, 54.1], "lower")["verdict"] == "cannot tell (no spread in either run)"
    assert compare.judge(a, [54.0, 54.05, 54.1], "lower")["verdict"] == "worse"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
