"""The battery's searches: NDR and PDR in one search with FD.io CSIT's MLRsearch (PyPI
``MLRsearch``), and RFC 2544's plain binary search (``search``) for what is not a load
(the back-to-back test's burst length).

RFC 2544's binary search finds one loss target per search; CSIT's multiple-loss-ratio
search measures each trial once and lets it narrow the bounds of *every* goal (NDR at
0 loss, PDR at ``pdr_loss_pct``), starts from the forwarding rate of the first trial
at the top load instead of bisecting blindly, and bisects in logarithmic load. This
module only adapts it: our trial (a callable ``rate -> (packets, lost_packets)``) is
the measurer, and the goals' final relevant bounds become the ``Search`` brackets the
records and spreads already use (results/spread.py: the bracket is the spread).

Goal settings, chosen to keep RFC 2544's meaning of one trial per verdict:
``exceed_ratio`` 0 and ``duration_sum`` = one trial (a load is a lower bound after one
passing trial, an upper bound after one failing one); two preceding targets of twice
and four times the width at the same trial duration (CSIT's default count; measured
with a fake device: fewer trials than none; shorter preceding trials are not used since
iperf3 takes whole seconds and the quick profile's trials are 1-2 s already);
``relative_width`` = ``resolution_pct`` (MLRsearch's width is relative to the upper
bound, not a fraction of the ceiling), ``fail_fast`` off (a min load that loses is
reported as no rate, not raised). Loss ratio = lost / sent packets as the receiver
counts them, as before: a sender that cannot reach the rate is not counted as loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from MLRsearch import AbstractMeasurer, Config, MeasurementResult, MultipleLossRatioSearch
from MLRsearch import SearchGoal


@dataclass(frozen=True)
class Search:
    rate: float | None       # highest rate found with loss <= target (None: not even lo)
    upper: float | None      # lowest failing rate above it (None: hi passed)
    trials: tuple            # ((rate, loss_pct), ...) measured by this search, in order
    converged: bool          # the bracket [rate or lo, upper] is within the resolution


class _Budget(Exception):
    """The trial budget ran out: the bounds found so far are the answer."""


class _Measurer(AbstractMeasurer):
    def __init__(self, trial, max_trials):
        self.trial, self.max_trials, self.trials = trial, max_trials, []

    def measure(self, intended_duration, intended_load):
        if len(self.trials) >= self.max_trials:
            raise _Budget
        packets, lost = self.trial(intended_load)
        self.trials.append((intended_load, 100.0 * lost / packets if packets else 100.0))
        return MeasurementResult(intended_duration=intended_duration,
                                 intended_load=intended_load,
                                 offered_count=packets, loss_count=lost)


def goals(trial_s: float, resolution_pct: float, pdr_loss_pct: float) -> tuple:
    """(NDR goal, PDR goal) with one trial of ``trial_s`` per verdict."""
    common = dict(exceed_ratio=0.0, relative_width=resolution_pct / 100,
                  initial_trial_duration=float(trial_s), final_trial_duration=float(trial_s),
                  duration_sum=float(trial_s), preceding_targets=2, fail_fast=False)
    return (SearchGoal(loss_ratio=0.0, **common),
            SearchGoal(loss_ratio=pdr_loss_pct / 100, **common))


def ndr_pdr(trial, lo: float, hi: float, trial_s: float, resolution_pct: float,
            max_trials: int, pdr_loss_pct: float = 0.5,
            max_seconds: float = 3600.0) -> tuple[Search, Search, tuple]:
    """-> (NDR, PDR, trials) searched together in [lo, hi] frames/s.

    ``trial(rate) -> (packets, lost_packets)``; at most ``max_trials`` trials in all
    (then the bounds found so far are returned, ``converged`` False); ``max_seconds``
    is MLRsearch's own limit on the search's wall time."""
    if not 0 < lo < hi:
        raise ValueError(f"need 0 < lo < hi, got lo={lo} hi={hi}")
    if not 0 < resolution_pct < 100:
        raise ValueError(f"resolution_pct must be in (0, 100), not {resolution_pct}")
    if max_trials < 1:
        raise ValueError(f"max_trials must be >= 1, not {max_trials}")
    ndr_goal, pdr_goal = goals(trial_s, resolution_pct, pdr_loss_pct)
    if pdr_loss_pct <= 0:
        pdr_goal = ndr_goal
    config = Config()
    config.goals = (ndr_goal,) if pdr_goal == ndr_goal else (ndr_goal, pdr_goal)
    # each bound must stay on its side of the other (defaults: min 9001, max 1e9 tps), so
    # a top below the default minimum (a slow path: a TCG guest's few thousand frames/s)
    # moves the minimum first
    if hi > config.min_load:
        config.max_load, config.min_load = hi, lo
    else:
        config.min_load, config.max_load = lo, hi
    config.search_duration_max = max_seconds
    config.warmup_duration = None
    search = MultipleLossRatioSearch(config=config)
    measurer = _Measurer(trial, max_trials)
    done = True
    try:
        search.search(measurer=measurer, debug=lambda _msg: None)
    except _Budget:
        done = False
    trials = tuple(measurer.trials)
    out = []
    for goal in (ndr_goal, pdr_goal):
        bounds = search.database.get_relevant_bounds(
            target=search.scaling.goal_to_final_target[goal])
        rate = float(bounds.clo) if bounds.clo else None
        upper = float(bounds.chi) if bounds.chi else None
        out.append(Search(rate, upper, trials, done and _narrow(rate, upper, lo, hi, goal)))
    return out[0], out[1], trials


def _narrow(rate, upper, lo, hi, goal) -> bool:
    """The bracket is final: within the goal's width, or pinned at a search limit."""
    if upper is None:
        return rate is not None and rate >= hi * (1 - 1e-9)
    if rate is None:
        return upper <= lo * (1 + 1e-9)
    return (upper - rate) <= goal.relative_width * upper * (1 + 1e-6)


# -- the RFC 2544 binary search (pure), for what MLRsearch does not search ----------------------------------------------------------

def search(trial, lo: float, hi: float, resolution: float, max_trials: int,
           target_loss: float = 0.0, known=None) -> Search:
    """Highest rate in [lo, hi] whose ``trial(rate) -> loss %`` is <= ``target_loss``.

    RFC 2544 binary search (the back-to-back burst search; NDR and PDR use
    ``mlr.ndr_pdr``): try ``hi`` first; if it loses, bisect between the best
    passing and the lowest failing rate until they are ``resolution`` apart or
    ``max_trials`` trials were run (never more). ``known`` (rate -> loss %) are earlier
    trials that narrow the bracket for free, e.g. the NDR trials when searching the PDR.
    If nothing passes, ``lo`` itself is tried last (budget permitting); a failing
    ``lo`` gives ``rate=None``. Assumes loss grows with rate; a non-monotonic answer
    just narrows toward the lowest failing rate above the best passing one.
    """
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < lo <= hi, got lo={lo} hi={hi}")
    if resolution <= 0:
        raise ValueError(f"resolution must be > 0, not {resolution}")
    if max_trials < 1:
        raise ValueError(f"max_trials must be >= 1, not {max_trials}")
    seen = dict(known or {})
    trials = []

    def ok(loss):
        return loss is not None and loss <= target_loss

    def measure(rate):
        if rate not in seen:
            seen[rate] = trial(rate)
            trials.append((rate, seen[rate]))
        return seen[rate]

    inside = {r: loss for r, loss in seen.items() if lo <= r <= hi}
    best = max((r for r, loss in inside.items() if ok(loss)), default=None)
    top = min((r for r, loss in inside.items() if not ok(loss) and (best is None or r > best)),
              default=None)
    if top is None:
        if best != hi and not ok(measure(hi)):
            top = hi
        else:
            return Search(hi, None, tuple(trials), True)
    floor = lo if best is None else best
    while len(trials) < max_trials and top - floor > resolution:
        mid = (floor + top) / 2
        if ok(measure(mid)):
            best = floor = mid
        else:
            top = mid
    if best is None and lo not in seen and len(trials) < max_trials:
        if ok(measure(lo)):
            best = lo
    lo_failed = lo in seen and not ok(seen[lo])
    converged = top - floor <= resolution and (best is not None or lo_failed)
    return Search(best, top, tuple(trials), converged)
