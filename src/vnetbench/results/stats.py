"""Summaries of repeated measurements: mean, spread and a 95% confidence interval.

Repetitions are few (3-10), so the interval uses Student's t, not the normal law, and
none is given below ``MIN_CI_N`` values: at one degree of freedom t = 12.7 and the
"interval" is wider than any measurement (vnetbench.results.spread shows the range).
"""

from __future__ import annotations

import functools
import math
import statistics

# two-sided 95% critical values of Student's t, by degrees of freedom
# (none at df = 1: see MIN_CI_N)
_T95 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131,
        16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042,
        40: 2.021, 60: 2.000, 120: 1.980}
MIN_CI_N = 3           # the fewest values a confidence interval is given for


@functools.lru_cache(maxsize=None)       # a report asks once per cell: 64,000 times
def t95(df: int) -> float:
    if df < MIN_CI_N - 1:
        raise ValueError(f"a confidence interval needs at least {MIN_CI_N} samples")
    known = [d for d in _T95 if d <= df]
    return _T95[max(known)] if df <= 120 else 1.960


def summarize(samples) -> dict:
    """n, mean, sd, min, max, median and the 95% CI half-width (None below MIN_CI_N)."""
    xs = [float(x) for x in samples if x is not None]
    if not xs:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None, "median": None,
                "ci95": None}
    n = len(xs)
    mean = math.fsum(xs) / n
    # two passes in floats (statistics.stdev's exact fractions cost 50x more, and the
    # report asks for thousands of cells)
    sd = math.sqrt(math.fsum((x - mean) * (x - mean) for x in xs) / (n - 1)) if n > 1 else None
    return {"n": n, "mean": mean, "sd": sd, "min": min(xs), "max": max(xs),
            "median": statistics.median(xs),
            "ci95": t95(n - 1) * sd / math.sqrt(n) if n >= MIN_CI_N else None}


def percentiles(samples, points=(50, 90, 99, 99.9)) -> dict:
    """Nearest-rank percentiles of a sample distribution (e.g. RTTs), keyed 'p50'..."""
    xs = sorted(float(x) for x in samples)
    out = {}
    for p in points:
        key = f"p{p:g}".replace(".", "")
        out[key] = xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else None
    return out
