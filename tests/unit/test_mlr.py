"""NDR and PDR from one MLRsearch (battery/mlr.py) against fake devices: the brackets
hold the true rates within the width, the budget holds, edge cases are reported as
the RFC 2544 search reported them, and it needs fewer trials than the two binary
searches it replaced (measured on the same fake devices)."""

import random
import statistics

import pytest

from vnetbench import cpu
from vnetbench.battery import mlr, rfc2544
from vnetbench.results import spread
from vnetbench.results.record import Result


class Device:
    """Loses nothing up to ``ndr``, 0.2 % up to ``pdr``, at least 1 % above ``pdr``."""

    def __init__(self, ndr, pdr, jitter=0.0, seed=0):
        self.ndr, self.pdr, self.calls = ndr, pdr, []
        self.rng, self.jitter = random.Random(seed), jitter

    def loss_pct(self, rate):
        j = 1 + self.rng.uniform(-self.jitter, self.jitter)
        if rate <= self.ndr * j:
            return 0.0
        if rate <= self.pdr * j:
            return 0.2
        return max(1.0, 100.0 * (rate - self.pdr * j) / rate)

    def __call__(self, rate):
        self.calls.append(rate)
        packets = max(1, round(rate * 2))
        return packets, round(packets * self.loss_pct(rate) / 100)


@pytest.mark.parametrize("ndr_cap,pdr_cap", [(30_000, 45_000), (90_000, 91_000),
                                             (5_000, 80_000), (97_000, 98_500)])
def test_one_search_brackets_both_rates(ndr_cap, pdr_cap):
    dev = Device(ndr_cap, pdr_cap)
    ndr, pdr, trials = mlr.ndr_pdr(dev, 2_000, 100_000, 2, 2.0, 40, pdr_loss_pct=0.5)
    assert len(trials) == len(dev.calls) and ndr.converged and pdr.converged
    for found, cap in ((ndr, ndr_cap), (pdr, pdr_cap)):
        assert found.rate <= cap < found.upper                # the bracket holds the truth
        assert found.upper - found.rate <= 0.02 * found.upper * 1.001
    rates = dict(trials)
    assert rates[ndr.rate] == 0.0 and rates[ndr.upper] > 0.0  # bounds are measured trials
    assert rates[pdr.rate] <= 0.5 < rates[pdr.upper]


def test_first_trial_is_the_top_and_a_lossless_device_needs_no_more():
    dev = Device(1e9, 1e9)
    ndr, pdr, trials = mlr.ndr_pdr(dev, 100, 50_000, 1, 2.0, 10)
    assert dev.calls == [50_000.0] and len(trials) == 1
    assert ndr.rate == pdr.rate == 50_000 and ndr.upper is None and ndr.converged


def test_a_loss_at_the_minimum_rate_gives_no_rate():
    dev = Device(10, 20)
    ndr, pdr, _ = mlr.ndr_pdr(dev, 1_000, 50_000, 1, 2.0, 20)
    assert ndr.rate is None and pdr.rate is None
    assert ndr.upper == pytest.approx(1_000) and ndr.converged


def test_the_trial_budget_is_never_exceeded():
    for budget in (1, 2, 3, 5):
        dev = Device(31_234, 40_000)
        ndr, pdr, trials = mlr.ndr_pdr(dev, 10, 1_000_000, 1, 0.1, budget)
        assert len(dev.calls) == len(trials) <= budget
        assert not ndr.converged
        if ndr.rate is not None:                              # a bound found is still true
            assert ndr.rate <= 31_234


def test_bad_arguments_are_refused():
    for kw in ({"lo": 0}, {"lo": 10, "hi": 5}, {"resolution_pct": 0},
               {"resolution_pct": 100}, {"max_trials": 0}):
        args = {"lo": 1, "hi": 100, "trial_s": 1, "resolution_pct": 2, "max_trials": 5, **kw}
        with pytest.raises(ValueError):
            mlr.ndr_pdr(Device(50, 60), **args)


def test_fewer_trials_than_the_two_binary_searches_it_replaced():
    """Same fake devices, same budget (10 + 10), same 2 % width: the old NDR binary
    search plus the PDR search primed with its trials, against one MLRsearch. The old
    search's width was 2 % of the top rate; MLRsearch's is 2 % of the upper bound, at
    least as narrow."""
    old, new = [], []
    for seed in range(60):
        rng = random.Random(seed)
        ndr_cap = rng.uniform(20_000, 300_000)
        top = ndr_cap * rng.uniform(1.05, 1.6)
        pdr_cap = ndr_cap * rng.uniform(1.0, 1.3)
        step = top * 0.02

        def loss(rate, dev=Device(ndr_cap, pdr_cap, 0.03, seed)):
            return dev.loss_pct(round(rate))
        n = mlr.search(loss, step, top, step, 10, 0.0)
        p = mlr.search(loss, step, top, step, 10, 0.5, known=dict(n.trials))
        old.append(len(n.trials) + len(p.trials))
        _, _, trials = mlr.ndr_pdr(Device(ndr_cap, pdr_cap, 0.03, seed), step, top, 2, 2.0, 20)
        new.append(len(trials))
    assert statistics.mean(new) < statistics.mean(old) - 0.5, (statistics.mean(new),
                                                               statistics.mean(old))


def test_throughput_record_keeps_its_brackets_for_the_spread():
    """_throughput with fake trials: the metrics the records, tables and spreads read."""
    dev = Device(40_000, 52_000)

    def trial(fps, **_):
        packets, lost = dev(fps)
        return {"bitrate_bps": fps * 144, "burst": None, "packets": packets,
                "lost_packets": lost, "loss_pct": 100.0 * lost / packets, "rx_fps": fps,
                "tx_fps": fps, "seconds": 2, "retried": False, "cpu": None,
                **{k: None for k in cpu.METRICS}, "cpu_pct": 10.0}

    def ceiling():
        return {**trial(60_000), "rx_fps": 60_000.0, "tx_fps": 70_000.0}
    metrics, extra = rfc2544._throughput(trial, ceiling, 64, rfc2544.Config())
    assert metrics["ndr_fps"] <= 40_000 < metrics["ndr_upper_fps"]
    assert metrics["pdr_fps"] <= 52_000 < metrics["pdr_upper_fps"]
    assert metrics["trials"] == len(extra["trials"]) == 1 + len(dev.calls) - 1
    assert metrics["cpu_pct"] == 10.0 and extra["ndr_converged"] and extra["pdr_converged"]
    rec = Result(test="rfc2544_throughput", labels={}, samples={k: [v] for k, v in metrics.items()})
    s = spread.of(rec, "ndr_fps")
    assert s.kind == "search" and (s.lo, s.hi) == (metrics["ndr_fps"], metrics["ndr_upper_fps"])


def test_a_top_below_mlrsearchs_default_minimum_load():
    """A slow path (a TCG guest: a few thousand frames/s) is searched, not refused."""
    dev = Device(2_000, 3_000)
    ndr, pdr, trials = mlr.ndr_pdr(dev, 50, 4_670, 1, 2.0, 40)
    assert ndr.rate <= 2_000 < ndr.upper and pdr.rate <= 3_000 < pdr.upper
