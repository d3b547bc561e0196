"""Result records: summaries over repetitions, percentiles, the JSON-lines store."""

import math

import pytest

from vnetbench.results.record import Result
from vnetbench.results.store import ResultStore
from vnetbench.results.stats import percentiles, summarize, t95


def test_summary_and_ci():
    s = summarize([10.0, 12.0, 14.0])
    assert s["n"] == 3 and s["mean"] == 12.0 and s["sd"] == 2.0
    assert math.isclose(s["ci95"], 4.303 * 2.0 / math.sqrt(3))
    assert summarize([5.0])["ci95"] is None
    assert summarize([5.0, 6.0])["ci95"] is None       # never a t-interval at one degree of freedom
    assert summarize([])["mean"] is None


def test_t_table_is_monotonic_and_bounded():
    values = [t95(df) for df in range(2, 200)]
    assert values == sorted(values, reverse=True) and values[-1] == pytest.approx(1.96, abs=0.03)


def test_percentiles_nearest_rank():
    xs = list(range(1, 101))
    assert percentiles(xs) == {"p50": 50, "p90": 90, "p99": 99, "p999": 100}
    assert percentiles([])["p50"] is None


def test_store_roundtrip(tmp_path):
    store = ResultStore(tmp_path / "r" / "results.jsonl")
    r = Result(test="tcp_stream", labels={"vswitch": "ovs", "network": "vxlan", "mss": 1410},
               samples={"gbps": [1.0, 1.2, 1.1]}, provenance={"kernel": "x"})
    store.append(r)
    store.append(r)
    back = list(store)
    assert len(back) == 2 and back[0] == r
    assert back[0].metrics["gbps"]["mean"] == pytest.approx(1.1)
