"""The spread each metric is quoted with (vnetbench.results.spread), on recorded samples:
n = 1, 2, 3, 30 repetitions, an RTT record of 100 echoes, an RFC 2544 search; the
stability flag; and the report built from tests/data never shows a df = 1 t-interval."""

import csv
import io
import json
import math
import re
import statistics
from dataclasses import replace
from html import escape
from pathlib import Path

import pytest

from vnetbench.report import charts, html, table, text
from vnetbench.results import load
from vnetbench.results import spread
from vnetbench.results.record import Result, from_dict
from vnetbench.results.stats import percentiles, t95

DATA = Path(__file__).resolve().parents[1] / "data"
REPORT = DATA / "report" / "records.jsonl"      # quick profile: 2 repetitions, RFC 2544 1
SPREAD = DATA / "spread" / "records.jsonl"      # 3 and 30 repetitions, 100 echoes, a search


def records(path, test, **labels):
    out = [r for r in load.read(path) if r.test == test and
           all(r.labels.get(k) == v for k, v in labels.items())]
    assert out, f"no {test} {labels} record in {path}"
    return out


def test_one_repetition_has_no_spread():
    r = records(REPORT, "rfc2544_latency", vswitch="ovs", network="vxlan")[0]
    s = spread.of(r, "cpu_pct")
    assert (s.kind, s.n, s.lo, s.hi, s.ci95) == ("none", 1, None, None, None)
    assert s.text() == spread.num(r.samples["cpu_pct"][0]) and not s.unstable


def test_two_repetitions_show_the_range_never_a_t_interval():
    r = records(REPORT, "tcp_stream", vswitch="linuxbridge", placement="same-host")[1]
    xs = r.samples["gbps"]
    s = spread.of(r, "gbps")
    assert (s.kind, s.n, s.lo, s.hi, s.ci95) == ("range", 2, min(xs), max(xs), None)
    assert s.text() == f"{spread.num(statistics.fmean(xs))} [{spread.num(min(xs))}–{spread.num(max(xs))}]"
    assert r.metrics["gbps"]["ci95"] is None           # the stored summary agrees
    with pytest.raises(ValueError):
        t95(1)


def test_three_repetitions_give_a_student_t_ci():
    r = records(SPREAD, "tcp_stream")[0]
    xs = r.samples["gbps"]
    s = spread.of(r, "gbps")
    half = 4.303 * statistics.stdev(xs) / math.sqrt(3)
    assert (s.kind, s.n) == ("ci", 3) and s.ci95 == pytest.approx(half)
    assert (s.lo, s.hi) == (pytest.approx(s.mean - half), pytest.approx(s.mean + half))
    assert s.text().endswith(f"±{spread.num(half, 2)} ci")


def test_thirty_repetitions_ci_narrows():
    r = records(SPREAD, "udp_stream")[0]
    xs = r.samples["gbps"]
    s = spread.of(r, "gbps")
    assert (s.kind, s.n) == ("ci", 30)
    assert s.ci95 == pytest.approx(t95(29) * statistics.stdev(xs) / math.sqrt(30))
    assert 2.04 < t95(29) < 2.07 and s.ci95 < (max(xs) - min(xs)) / 2


def test_rtt_is_mean_sd_over_all_echoes():
    r = records(SPREAD, "icmp_rtt")[0]
    echoes = [x for rep in r.extra["repetitions"] for x in rep["rtt_samples_ms"]]
    assert len(echoes) == 100 and len(r.samples["rtt_mean_ms"]) == 4
    s = spread.of(r, "rtt_mean_ms")
    assert (s.kind, s.n, s.repetitions) == ("sd", 100, 4)
    assert s.mean == pytest.approx(statistics.fmean(echoes))
    assert s.sd == pytest.approx(statistics.stdev(echoes))
    assert (s.lo, s.hi) == (pytest.approx(s.mean - s.sd), pytest.approx(s.mean + s.sd))
    assert (s.p50, s.p99) == (percentiles(echoes)["p50"], percentiles(echoes)["p99"])
    reps = r.samples["rtt_mean_ms"]                    # 4 repetitions: their CI is given too
    assert s.ci95 == pytest.approx(t95(3) * statistics.stdev(reps) / 2)
    assert s.text() == f"{spread.num(s.mean)} ±{spread.num(s.sd, 2)} sd"


def test_rtt_without_echoes_is_pooled_exactly_from_the_repetitions():
    r = records(SPREAD, "icmp_rtt")[0]
    with_echoes = spread.of(r, "rtt_mean_ms")
    trimmed = replace(r, extra={})
    pooled = spread.of(trimmed, "rtt_mean_ms")
    assert (pooled.kind, pooled.n, pooled.repetitions) == ("sd", 100, 4)
    assert pooled.mean == pytest.approx(with_echoes.mean, rel=1e-3)      # ping's 3 decimals
    assert pooled.sd == pytest.approx(with_echoes.sd, rel=1e-2)
    old = records(REPORT, "icmp_rtt", vswitch="ovs", network="vxlan", placement="cross-host")[1]
    s = spread.of(old, "rtt_mean_ms")                  # the quick profile's 2 x 200 echoes
    assert (s.kind, s.n, s.repetitions, s.ci95) == ("sd", 400, 2, None)
    assert min(old.samples["rtt_sd_ms"]) < s.sd < max(old.samples["rtt_sd_ms"]) * 1.2


def test_rfc2544_spread_is_the_search_bracket():
    r = records(SPREAD, "rfc2544_throughput")[0]
    ndr, upper = r.samples["ndr_fps"][0], r.samples["ndr_upper_fps"][0]
    s = spread.of(r, "ndr_fps")
    assert (s.kind, s.mean, s.lo, s.hi) == ("search", ndr, ndr, upper)
    top_passed = spread.of(replace(r, samples={**r.samples, "ndr_upper_fps": [None]}), "ndr_fps")
    assert top_passed.text() == f"≥{spread.num(ndr)}" and top_passed.judged is None
    bracket = spread.of(replace(r, samples={**r.samples, "ndr_upper_fps": [ndr * 1.02]}), "ndr_fps")
    assert bracket.text() == f"{spread.num(ndr)} [{spread.num(ndr)}–{spread.num(ndr * 1.02)}]"
    old = records(REPORT, "rfc2544_throughput")[0]     # recorded before the bracket was kept
    assert spread.of(old, "ndr_fps").kind == "none"


@pytest.mark.parametrize("metric,values,unstable", [
    ("gbps", [10.0, 10.5, 9.5], False),                # CI 1.2 = 12 % of the mean
    ("gbps", [10.0, 11.0, 30.0], True),                # CI 29 > 25 %
    ("gbps", [10.0, 12.0], False),                     # range 2 = 18 %
    ("gbps", [10.0, 14.0], True),                      # range 4 = 33 %
    ("gbps", [10.0], False),                           # one repetition: cannot judge
    ("loss_pct", [0.0, 0.4], False),                   # below the 1-point floor
    ("loss_pct", [0.0, 5.0], True),
    ("loss_pct", [0.0, 0.0], False),
])
def test_stability_flag(metric, values, unstable):
    r = Result("udp_stream", {"vswitch": "ovs", "network": "flat"}, {metric: values})
    assert spread.of(r, metric).unstable is unstable


def test_rtt_stability_is_judged_on_repetition_means_not_on_jitter():
    r = records(SPREAD, "icmp_rtt")[0]
    jittery = replace(r, extra={}, samples={**r.samples, "rtt_mean_ms": [0.5, 0.5, 0.5, 0.5],
                                            "rtt_sd_ms": [0.4] * 4})
    s = spread.of(jittery, "rtt_mean_ms")
    assert s.sd > 0.25 * s.mean and not s.unstable
    flapping = replace(jittery, samples={**jittery.samples, "rtt_mean_ms": [0.5, 0.5, 0.5, 1.5]})
    assert spread.of(flapping, "rtt_mean_ms").unstable


def test_report_from_tests_data_has_no_df1_interval():
    runs = load.load([REPORT, SPREAD])
    t = table.build(runs)
    cells = [(row, c, t.cell(row, c)) for row in t.rows for c in t.columns if t.cell(row, c).record]
    assert len(cells) > 100
    for row, c, cell in cells:
        for metric in (row.metric, "cpu_pct"):
            s = cell.spread(metric)
            if s is None or s.mean is None:
                continue
            assert s.kind != "ci" or s.n >= 3, (row, c.label, metric)
            if s.kind in ("ci", "range", "none"):
                assert s.n == len([x for x in cell.record.samples[metric] if x is not None])
            if s.n == 2 and s.kind == "range":
                assert f"[{spread.num(s.lo)}–{spread.num(s.hi)}]" in cell.text(row.metric) or \
                    metric == "cpu_pct"
    md = text.markdown(t)
    assert "23.9 ±50" not in md and "23.9 [20–27.8] ! @1460" in md     # the example
    for line in csv.DictReader(io.StringIO(text.csv_text(t))):
        if line["n"] and int(line["n"]) < 3 and line["spread"] != "sd":
            assert line["ci95"] == "", line


def test_unstable_cells_are_marked_and_counted_in_every_format():
    runs = load.load([REPORT])
    t = table.build(runs)
    bad = [s for s in t.spreads() if s.unstable]
    assert 0 < len(bad) < len(t.spreads())
    line = t.stability()
    assert line.startswith(f"stability: {len(bad)} of {len(t.spreads())} cells unstable")
    assert "more repetitions" in line and "longer trials" in line and "--profile full" in line
    plain, md = text.plain(t), text.markdown(t)
    page = html.page(runs, t, charts.charts(t))
    assert line in plain and f"- {line}" in md and escape(line) in page
    assert sum(" ! " in cell or cell.endswith(" !") for cell in plain.split(" | ")) == len(bad)
    assert page.count("<td class='v unstable'") == len(bad)
    assert all(n in plain for n in spread.NOTES)


def test_csv_carries_the_spread():
    t = table.build(load.load([SPREAD]))
    lines = {x["test"]: x for x in csv.DictReader(io.StringIO(text.csv_text(t)))}
    rtt = lines["icmp_rtt"]
    assert rtt["spread"] == "sd" and rtt["n"] == "100" and rtt["repetitions"] == "4"
    assert float(rtt["p50"]) > 0 and float(rtt["p99"]) >= float(rtt["p50"])
    assert lines["udp_stream"]["spread"] == "ci" and lines["udp_stream"]["n"] == "30"
    assert lines["rfc2544_throughput"]["spread"] == "search"


def test_charts_draw_the_spreads_as_error_bars():
    t = table.build(load.load([REPORT, SPREAD]))
    made = {c.id: c for c in charts.charts(t)}
    for fid, c in made.items():
        assert "error bars:" in c.caption, fid
        assert re.search(rf'<g id="{fid}-err-', c.svg), f"{fid}: no error bars"
    assert "1,000" in made["fig-flow"].svg and "10,000" in made["fig-flow"].svg


def test_count_axes_have_integer_ticks():
    from matplotlib.figure import Figure
    for xs, logx in (([1, 5], False), ([10, 100, 1000, 10000], True)):
        ax = Figure().add_subplot()
        ax.plot(xs, [1] * len(xs))
        charts._integer_x(ax, xs, logx)
        ticks = [x for x in ax.get_xticks() if min(xs) <= x <= max(xs)]
        assert ticks and all(float(x).is_integer() for x in ticks)
        labels = [ax.xaxis.get_major_formatter()(x) for x in ticks]
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", s) for s in labels), labels


def test_stored_records_keep_what_the_spread_needs():
    """Records as stored (JSON lines) come back with the samples and echoes used above."""
    first = json.loads(SPREAD.read_text().splitlines()[0])
    r = from_dict(first)
    assert r.test == "icmp_rtt" and spread.of(r, "rtt_mean_ms").n == 100


def test_numbers_are_quoted_without_exponents():
    assert [spread.num(x) for x in (61167.4, 999.7, 27.44, 0.0327, 0)] == \
        ["61,167", "1,000", "27.4", "0.0327", "0"]
    assert spread.num(3.6e-05, 2) == "0.000036" and spread.num(None) == "-"
