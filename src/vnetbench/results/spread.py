"""Which spread a number is quoted with: defined here once, for every table cell, chart
error bar, CSV line and Rally table (the report's reading notes print ``NOTES``).

* RTT (``icmp_rtt`` rtt_mean_ms, ``rfc2544_latency`` rtt_avg_ms): mean ± standard
  deviation over all echoes of all repetitions, the seed's ``0.408ms +/-0.035ms``; p50
  and p99 of the echoes beside it; the 95% CI of the repetition means only with >= 3
  repetitions. Records whose echoes were trimmed are pooled exactly from each
  repetition's mean, sd and echo count (their p50/p99 are then the repetitions' mean).
* RFC 2544 searches (NDR, PDR, back-to-back burst): the search's final bracket, from
  the highest passing to the lowest failing rate; ``>=`` when even the search's top
  rate passed (no failing rate: the true value may be higher).
* Everything else (throughput, loss, CPU%, ...): the mean over repetitions with a 95%
  Student-t CI when n >= 3, the min-max range when n = 2 (a t-interval at one degree
  of freedom is 12.7 sd wide and says nothing), no spread when n = 1.

Stability: a cell is *unstable* when its repetitions disagree by more than
``UNSTABLE`` of the mean: the CI half-width (n >= 3) or the range (n = 2) of the
repetition values -- for RTT of the repetition means, since the echoes' sd is jitter,
not doubt about the mean -- or the width of a search's bracket. Spreads below a
metric's floor (1 point for a percentage: 0 vs 0.4 % loss is not a finding) never are.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from decimal import Decimal

from vnetbench.results.stats import MIN_CI_N, percentiles, summarize

UNSTABLE = 0.25          # relative spread above which a cell is flagged
PCT_FLOOR = 1.0          # percentage points: smaller spreads of a *_pct metric never flag
UNSTABLE_FIX = ("more repetitions (repetitions: in the task, the quick profile's is in "
                "rally-tasks/overlay-comparison.yaml), longer trials, or --profile full; "
                "and a quieter machine")

# (test, metric) -> (per-repetition sd metric, echoes-sent parameter, echo-loss metric)
RTT = {("icmp_rtt", "rtt_mean_ms"): ("rtt_sd_ms", "count", "loss_pct"),
       ("rfc2544_latency", "rtt_avg_ms"): ("rtt_sd_ms", "latency_count", "echo_loss_pct")}
# search result metric -> the metric holding the lowest failing value of the search
SEARCH = {"ndr_fps": "ndr_upper_fps", "pdr_fps": "pdr_upper_fps",
          "burst_frames": "burst_upper_frames"}

NOTES = (
    "spread, by metric: RTT = mean ±sd over all echoes of all repetitions (the seed's "
    "form; p50/p99 on hover and in the CSV); throughput, loss, CPU% and the rest = mean "
    "over repetitions with ±95% Student-t CI (ci) from 3 repetitions, [min–max] of the "
    "repetitions with 2, no spread with 1; RFC 2544 NDR/PDR/burst = [highest passing – "
    "lowest failing] rate of the search's final bracket, ≥ when its top rate passed",
    f"!: unstable: the repetitions disagree by more than {UNSTABLE:.0%} of the mean (CI "
    f"half-width with >= 3 repetitions, range with 2; for RTT the spread of the "
    f"repetition means; for a search the bracket width; percentages only beyond "
    f"{PCT_FLOOR:g} point); do not quote such a value -- measure again with {UNSTABLE_FIX}",
)


@dataclass(frozen=True)
class Spread:
    kind: str                   # "sd" | "ci" | "range" | "search" | "none"
    mean: float | None
    lo: float | None = None     # the interval shown and drawn (error bar)
    hi: float | None = None     # None with kind "search": no failing rate found
    n: int = 0                  # values behind the mean: echoes for RTT, else repetitions
    repetitions: int = 0
    judged: float | None = None  # the spread stability is judged on (None: cannot judge)
    floor: float = 0.0
    sd: float | None = None
    p50: float | None = None
    p99: float | None = None
    ci95: float | None = None   # of the repetition values (means for RTT); n >= MIN_CI_N

    @property
    def relative(self) -> float | None:
        if self.judged is None or self.mean is None:
            return None
        return self.judged / abs(self.mean) if self.mean else (math.inf if self.judged else 0.0)

    @property
    def unstable(self) -> bool:
        return self.relative is not None and self.judged > self.floor and self.relative > UNSTABLE

    def text(self, unit: str = "", fmt=None) -> str:
        """'0.408 ±0.035 sd', '1.02 ±0.05 ci', '9.4 [9.1–9.8]', '61,167 [61,167–62,400]',
        '≥61,167', '0.1'; '-' without a mean. ``unit`` goes after the mean, ``fmt``
        formats every number (default: 3 significant digits, 2 for a ±)."""
        if self.mean is None:
            return "-"
        big, small = (fmt, fmt) if fmt else (num, lambda x: num(x, 2))
        value = big(self.mean) + unit
        if self.kind in ("sd", "ci"):
            return f"{value} ±{small(self.sd if self.kind == 'sd' else self.ci95)} {self.kind}"
        if self.kind == "range" or (self.kind == "search" and self.hi is not None):
            return f"{value} [{big(self.lo)}–{big(self.hi)}]"
        return f"≥{value}" if self.kind == "search" else value

    def describe(self) -> str:
        """What the spread is, in words (HTML hover, chart captions)."""
        reps = f"{self.repetitions} repetition" + ("s" if self.repetitions != 1 else "")
        what = {"sd": f"sd over {self.n} echoes of {reps}",
                "ci": f"95% CI over {reps}", "range": f"min–max of {reps}",
                "search": "the search's final bracket" + (" (top rate passed)" if self.hi is None
                                                           else ""),
                "none": f"{reps}, no spread"}[self.kind]
        more = [f"{k} {num(v)}" for k, v in (("p50", self.p50), ("p99", self.p99)) if v is not None]
        if self.kind == "sd" and self.ci95 is not None:
            more.append(f"CI of the repetition means ±{num(self.ci95, 2)}")
        if self.unstable:
            more.append(f"UNSTABLE: spread {self.relative:.0%} of the mean")
        return "; ".join([what] + more)


def num(x, digits: int = 3) -> str:
    """Significant digits, never an exponent: 61,167 not 6.12e+04, 0.000036 not 3.6e-05."""
    if x is None:
        return "-"
    rounded = Decimal(f"{x:.{digits}g}")
    return f"{x:,.0f}" if abs(rounded) >= 1000 else f"{rounded:f}"


def of(record, metric: str) -> Spread:
    """The spread of ``metric`` in ``record`` by the rules above."""
    values = [x for x in record.samples.get(metric, []) if x is not None]
    floor = PCT_FLOOR if metric.endswith("_pct") else 0.0
    if (record.test, metric) in RTT:
        rtt = _rtt(record, metric, values)
        if rtt:
            return rtt
    if metric in SEARCH and SEARCH[metric] in record.samples:
        return _search(record.samples[metric], record.samples[SEARCH[metric]])
    return repetitions(values, floor, record.metrics.get(metric))


def repetitions(values, floor: float = 0.0, summary: dict | None = None) -> Spread:
    """Mean over repetitions: CI from MIN_CI_N values, range with 2, nothing with 1
    (``summary``: summarize(values), when the record has it already)."""
    s = summary or summarize(values)
    n = s["n"]
    if n >= MIN_CI_N:
        return Spread("ci", s["mean"], s["mean"] - s["ci95"], s["mean"] + s["ci95"], n, n,
                      s["ci95"], floor, s["sd"], ci95=s["ci95"])
    if n == 2:
        return Spread("range", s["mean"], s["min"], s["max"], n, n, s["max"] - s["min"], floor,
                      s["sd"])
    return Spread("none", s["mean"], n=n, repetitions=n, floor=floor)


def _search(found, upper) -> Spread:
    """From the lowest rate found to the highest failing one over the repetitions' brackets."""
    pairs = [(f, u) for f, u in zip(found, upper) if f is not None]
    if not pairs:
        return Spread("none", None)
    mean = statistics.fmean(f for f, _ in pairs)
    lo = min(f for f, _ in pairs)
    hi = None if any(u is None for _, u in pairs) else max(u for _, u in pairs)
    return Spread("search", mean, lo, hi, len(pairs), len(pairs),
                  None if hi is None else hi - lo)


def _rtt(record, metric, means) -> Spread | None:
    """Pooled over every echo: from the recorded echoes, else exactly from each
    repetition's (mean, sd, echo count); None when neither is recorded."""
    echoes = [rep.get("rtt_samples_ms") for rep in record.extra.get("repetitions") or []]
    if echoes and all(e is not None for e in echoes):
        xs = [x for e in echoes for x in e]
        if len(xs) < 2:
            return None
        mean = math.fsum(xs) / len(xs)     # floats, not statistics.stdev's exact fractions:
        sd = math.sqrt(math.fsum((x - mean) * (x - mean) for x in xs) / (len(xs) - 1))   # 1e6 echoes
        n, reps = len(xs), len(echoes)
        pct = percentiles(xs, (50, 99))
    else:
        pooled = _pool(record, metric, *RTT[(record.test, metric)])
        if pooled is None:
            return None
        mean, sd, n, reps = pooled
        pct = {k: summarize(record.samples.get(f"rtt_{k}_ms", []))["mean"] for k in ("p50", "p99")}
    by_rep = repetitions(means)         # stability and the CI: the repetition means
    return Spread("sd", mean, mean - sd, mean + sd, n, reps, by_rep.judged, sd=sd,
                  p50=pct["p50"], p99=pct["p99"], ci95=by_rep.ci95)


def _pool(record, metric, sd_key, count_key, loss_key):
    """(mean, sd, echoes, repetitions) of the union of the repetitions' echoes."""
    sent = record.labels.get("params", {}).get(count_key)
    s = record.samples
    rows = list(zip(s.get(metric, []), s.get(sd_key, []), s.get(loss_key, [])))
    if not sent or not rows or len(rows) != len(s.get(metric, [])):
        return None
    groups = [(round(sent * (1 - loss / 100)), m, sd) for m, sd, loss in rows
              if m is not None and loss is not None]
    groups = [(k, m, sd or 0.0) for k, m, sd in groups if k > 0]
    n = sum(k for k, _, _ in groups)
    if n < 2:
        return None
    mean = sum(k * m for k, m, _ in groups) / n
    ss = sum((k - 1) * sd ** 2 + k * (m - mean) ** 2 for k, m, sd in groups)
    return mean, math.sqrt(ss / (n - 1)), n, len(groups)
