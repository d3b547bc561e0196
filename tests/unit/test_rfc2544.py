"""RFC 2544's pure parts: the bounded binary search (against fake trials), frame-size
planning from the tenant MTU, the rate -> iperf3 -b mapping, burst argv and gaps."""

import pytest

from vnetbench.battery import rfc2544
from vnetbench.battery import trial as udptrial
from vnetbench.battery.mlr import search


class Fake:
    """A device that loses nothing up to ``capacity`` and the excess above it."""

    def __init__(self, capacity, noise_at=()):
        self.capacity, self.calls, self.noise_at = capacity, [], set(noise_at)

    def __call__(self, rate):
        self.calls.append(rate)
        if rate in self.noise_at:
            return 0.01
        return 0.0 if rate <= self.capacity else 100.0 * (rate - self.capacity) / rate


# -- search ----------------------------------------------------------------------------

@pytest.mark.parametrize("capacity", [1.0, 137.0, 500.0, 731.5, 999.0])
def test_search_finds_the_zero_loss_rate_within_the_resolution(capacity):
    trial = Fake(capacity)
    s = search(trial, lo=1, hi=1000, resolution=5, max_trials=20)
    assert s.converged and s.rate is not None
    assert s.rate <= capacity < s.upper and s.upper - s.rate <= 5
    assert [r for r, _ in s.trials] == trial.calls          # every trial is logged, in order
    assert trial.calls[0] == 1000                          # RFC: the maximum rate first


def test_search_returns_hi_when_it_passes_after_one_trial():
    trial = Fake(2000)
    s = search(trial, 1, 1000, 5, 20)
    assert (s.rate, s.upper, s.converged, trial.calls) == (1000, None, True, [1000])


def test_search_never_runs_more_than_max_trials():
    for budget in (1, 2, 3, 7):
        trial = Fake(123.4)
        s = search(trial, 1, 100_000, 0.001, budget)
        assert len(trial.calls) == len(s.trials) == budget
        assert not s.converged
        assert s.rate is None or s.rate <= 123.4      # what it returns always passed


def test_search_reports_none_when_even_lo_loses():
    trial = Fake(0.5)
    s = search(trial, 10, 1000, 20, 50)
    assert s.rate is None and s.converged           # bracket closed and lo itself failed
    assert trial.calls[-1] == 10 and s.upper <= 10 + 20


def test_search_with_a_loss_target_finds_the_partial_drop_rate():
    trial = Fake(400)                               # loss 0.5 % at 400 / 0.995 = 402.01
    pdr = search(trial, 1, 1000, 0.5, 40, target_loss=0.5)
    ndr = search(Fake(400), 1, 1000, 0.5, 40)
    assert 401.5 <= pdr.rate <= 402.02 < pdr.upper
    assert pdr.rate > ndr.rate


def test_known_trials_narrow_the_bracket_for_free():
    ndr = search(Fake(400), 1, 1000, 1, 40)
    trial = Fake(400)
    pdr = search(trial, 1, 1000, 1, 40, target_loss=0.5, known=dict(ndr.trials))
    assert all(r not in dict(ndr.trials) for r in trial.calls)     # nothing re-measured
    assert len(trial.calls) < len(ndr.trials)
    assert 401 <= pdr.rate <= 402.02


def test_known_passing_hi_costs_no_trial():
    trial = Fake(400)
    s = search(trial, 1, 1000, 1, 10, target_loss=100.0, known={1000: 60.0})
    assert s.rate == 1000 and trial.calls == []


def test_a_lossy_outlier_just_narrows_the_search():
    trial = Fake(800, noise_at={500.5})             # one unlucky trial below capacity
    s = search(trial, 1, 1000, 1, 30)
    assert s.rate < 500.5 and s.converged           # honest: below the failing rate


@pytest.mark.parametrize("kw", [dict(lo=0), dict(lo=10, hi=5), dict(resolution=0),
                                dict(max_trials=0)])
def test_search_rejects_bad_arguments(kw):
    args = {**dict(lo=1, hi=100, resolution=1, max_trials=5), **kw}
    with pytest.raises(ValueError):
        search(Fake(50), **args)


# -- frames and rates ------------------------------------------------------------------

def test_inner_frame_sizes_follow_the_tenant_mtu():
    assert rfc2544.payload_of(64) == 18 and rfc2544.payload_of(1518) == 1472
    assert rfc2544.max_frame(1500) == 1518 and rfc2544.max_frame(1450) == 1468
    assert rfc2544.plan_frames(1500) == ([64, 128, 256, 512, 1024, 1280, 1518], [])
    assert rfc2544.plan_frames(1450) == ([64, 128, 256, 512, 1024, 1280], [1518])   # VXLAN
    use, skipped = rfc2544.plan_frames(8950)                                        # jumbo
    assert use[-1] == 8968 and skipped == []
    assert rfc2544.plan_frames(8950, jumbo=False)[0][-1] == 1518
    assert rfc2544.plan_frames(8950, sizes=(64, 9018)) == ([64], [9018])            # explicit


def test_frames_below_iperf3s_smallest_datagram_are_refused():
    assert rfc2544.plan_frames(1500, sizes=(62,))[0] == [62]
    with pytest.raises(ValueError, match="16 B"):
        rfc2544.plan_frames(1500, sizes=(60, 64))


def test_rate_maps_to_iperf3_payload_bits():
    # iperf 3.12: -l 18 -b 800000 sends 5,554 datagrams/s = 800000 / (18 * 8)
    assert rfc2544.bitrate_bps(800_000 / 144, 64) == 800_000
    assert rfc2544.bitrate_bps(1000, 1518) == 1000 * 1472 * 8
    assert rfc2544.bitrate_bps(0.0001, 64) == 1                 # never 0 (= unpaced)
    assert rfc2544.frame_gbps(1_000_000, 64) == pytest.approx(0.512)


def test_burst_argv_and_gap():
    argv = ["iperf3", "-c", "x", "-u", "-b", "1440000", "-l", "18", "-J"]
    assert udptrial.with_burst(argv, 100)[5] == "1440000/100" and argv[5] == "1440000"
    for bad in (0, 1001):
        with pytest.raises(ValueError):
            udptrial.with_burst(argv, bad)
    assert rfc2544.burst_gap_s(100, 40_000, 0.1, 25) == 0.1          # 1,000 fps mean: fine
    assert rfc2544.burst_gap_s(1000, 10_000, 0.1, 25) == pytest.approx(0.4)   # stretched


def test_config_refuses_nonsense():
    with pytest.raises(ValueError):
        rfc2544.Config(trial_s=0)
    with pytest.raises(ValueError):
        rfc2544.Config(trial_s=1.5)                # iperf3 -t takes whole seconds
    with pytest.raises(ValueError):
        rfc2544.Config(resolution_pct=0)
    with pytest.raises(ValueError):
        rfc2544.Config(loss_steps=(0, 50))


def test_collect_keeps_one_value_per_repetition():
    vals = iter([1.0, 2.0, None])
    samples, extras = rfc2544.collect(3, lambda: ({"a": next(vals), "cpu_pct": 5.0}, {"cpu": {}}))
    assert samples == {"a": [1.0, 2.0, None], "cpu_pct": [5.0] * 3} and len(extras) == 3


def test_latency_at_points_are_set_rates_then_shares_of_the_ceiling():
    cfg = rfc2544.Config(latency_rates=(1, 1000), latency_loads=(50, 150))
    pts = rfc2544.latency_points(cfg, 60000.0)
    assert [(round(r), rfc2544.point_name(w)) for r, w in pts] == [
        (1, "1 fps"), (1000, "1000 fps"), (30000, "50% of ceiling"), (90000, "150% of ceiling")]
    assert [rfc2544.point_name(w) for _, w in rfc2544.latency_points(cfg, None)] == ["1 fps", "1000 fps"]
    # the echoes alone make a rate up to one per latency_interval_s (0.01 s): 1 fps is
    # lone echoes a second apart, 1,000 fps a stream with the echoes in it
    assert rfc2544.echoes_alone(1, cfg) and rfc2544.echoes_alone(100, cfg)
    assert not rfc2544.echoes_alone(1000, cfg)


@pytest.mark.parametrize("kw", [{"latency_loads": (0,)}, {"latency_loads": (1001,)},
                                {"latency_rates": (0,)}, {"latency_rates": (-5,)}])
def test_latency_at_refuses_points_that_are_no_rate(kw):
    with pytest.raises(ValueError, match="latency_"):
        rfc2544.Config(**kw)
