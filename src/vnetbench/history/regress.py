"""``history regressions``: change points over each cell's series, found by Apache Otava.

A series is one cell (test + configuration labels) and one metric: the mean of each
run's repetitions, in the order the runs were measured. Otava's Hunter algorithm
(``otava.analysis.compute_change_points``: E-Divisive split over sliding windows, then a
merge step that keeps a point only if a t-test between the segments either side is
significant at ``max_pvalue`` *and* its relative change passes ``min_magnitude``) finds
where the series steps; no detector is written here. Around it, what the Orion/Hunter
tracker says a CI gate needs:

* a minimum change per metric (``thresholds.yaml``): smaller steps are noise to a cloud;
* a minimum number of runs per series before any verdict ("not enough runs");
* a direction per metric: a lower throughput, or a higher latency, CPU or loss, is a
  regression; the other way an improvement; a metric of no known direction a "change";
* an acknowledgement file: a change point someone investigated no longer fails the gate.

The rows are streamed from the database ordered by series, so memory holds one series
(plus the results), not the history.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

import sqlalchemy as sa

from vnetbench.history import db, query
from vnetbench.history.compare import diff, metadata
from vnetbench.history.ingest import cell_labels

WINDOW = 30          # Otava's sliding window (runs): Hunter's paper uses 30 to 50


@dataclass
class Change:
    index: int               # 0-based position of the first run after the change
    run: str                 # that run's id
    before: float            # mean of the segment before
    after: float
    change_pct: float
    pvalue: float
    kind: str                # regression | improvement | change
    acknowledged: str | None = None     # the ack's reason
    metadata_diff: dict = field(default_factory=dict)   # provenance fields that changed there


@dataclass
class Series:
    cell: str
    test: str
    labels: dict
    metric: str
    better: str
    runs: int
    verdict: str             # regression | acknowledged | ok | not enough runs
    changes: list = field(default_factory=list)
    min_runs: int = 0
    last_run: str = ""
    analysis: str = "whole"  # whole | incremental (Otava's, from the stored weak points)


def detect(values, rule, memo=None):
    """Otava's change points of ``values`` that hold as steps: [(index, before, after, %, p)].

    Otava's merge step keeps its statistics from the split windows, and it can report an
    outlier of one or two runs as two change points (up, then down). So each point is
    judged again between the whole segments either side of it (to the neighbouring
    points), with Otava's own t-test (``TTestSignificanceTester.compare``): both segments
    at least ``min_segment`` runs, the change at least ``min_change_pct``, p below
    ``max_pvalue``. The weakest point that fails is dropped and its neighbours judged
    again, until every point holds. ``memo``: see ``analyse``."""
    return analyse(values, rule, memo)[0]


def analyse(values, rule, memo=None):
    """``detect``'s points, and Otava's weak change points of ``values`` ([(index, qhat)]:
    its split step's candidates, before the merge step judges them).

    ``memo``: (n, weak points) from an earlier analysis of the first n of these values.
    Otava's incremental mode (``new_data``, ``old_weak_cp``) then keeps the weak points
    before the last few windows and runs E-Divisive only over the windows the values
    after n touch; the merge step and the judging below see the whole series either way."""
    from otava.analysis import compute_change_points
    from otava.change_point_divisive.base import ChangePoint
    if len(set(values)) <= 1:
        return [], []
    incremental = {}
    if memo is not None:
        n, weak = memo
        incremental = {"new_data": len(values) - n,
                       "old_weak_cp": [ChangePoint(index=i, qhat=q, stats=None) for i, q in weak]}
    found, weak = compute_change_points(list(values), window_len=WINDOW, max_pvalue=rule.max_pvalue,
                                        min_magnitude=rule.min_change_pct / 100, **incremental)
    return _judged(values, rule, sorted({int(cp.index) for cp in found})), \
        [(int(cp.index), float(cp.qhat)) for cp in weak or ()]


def _judged(values, rule, points):
    """``detect``'s second judgement of Otava's points (see there)."""
    from otava.analysis import TTestSignificanceTester
    tester = TTestSignificanceTester(rule.max_pvalue)
    while True:
        judged, failing = [], []
        for k, index in enumerate(points):
            lo = points[k - 1] if k else 0
            hi = points[k + 1] if k + 1 < len(points) else len(values)
            left, right = values[lo:index], values[index:hi]
            st = tester.compare(left, right)
            pct = (st.mean_2 / st.mean_1 - 1) * 100 if st.mean_1 else math.inf
            short = min(len(left), len(right))
            ok = (short >= rule.min_segment and math.isfinite(pct) and abs(pct) >= rule.min_change_pct
                  and st.pvalue < rule.max_pvalue)
            judged.append((index, float(st.mean_1), float(st.mean_2), float(pct), float(st.pvalue)))
            if not ok:
                failing.append((short >= rule.min_segment, -float(st.pvalue) if math.isfinite(st.pvalue) else 0,
                                abs(pct) if math.isfinite(pct) else 0, k))
        if not failing:
            return judged
        del points[min(failing)[3]]


def kind_of(better: str, pct: float) -> str:
    if better == "either":
        return "change"
    return "regression" if (pct < 0) == (better == "higher") else "improvement"


def _rows(conn, since, where, metrics):
    q = (sa.select(db.records.c.cell, db.records.c.test, db.records.c.labels, db.metrics.c.metric,
                   db.runs.c.id, db.metrics.c.mean)
         .join(db.metrics, sa.and_(db.metrics.c.run_id == db.records.c.run_id, db.metrics.c.seq == db.records.c.seq))
         .join(db.runs, db.runs.c.id == db.records.c.run_id)
         .where(db.metrics.c.mean.is_not(None))
         .order_by(db.records.c.cell, db.metrics.c.metric, db.runs.c.started, db.runs.c.added, db.runs.c.id))
    if since is not None:
        q = q.where(db.runs.c.started >= since)
    for k, v in (where or {}).items():
        if k == "tag":
            q = q.where(db.runs.c.id.in_(sa.select(db.run_tags.c.run_id).where(db.run_tags.c.tag == v)))
        else:
            q = q.where(db.records.c[k] == v)
    if metrics and not any(any(ch in p for ch in "*?[") for p in metrics):
        q = q.where(db.metrics.c.metric.in_(list(metrics)))
    return conn.execution_options(yield_per=20_000).execute(q)


def _series(rows):
    """Rows ordered by (cell, metric, run time) -> (cell, test, labels, metric, [(run, mean)])."""
    key, head, points = None, None, []
    for cell, test, labels, metric, run, mean in rows:
        if (cell, metric) != key:
            if key is not None:
                yield (*head, points)
            key, head, points = (cell, metric), (cell, test, labels, metric), []
        if points and points[-1][0] == run:       # two records of one cell in a run: their mean
            r, m, c = points[-1]
            points[-1] = (r, m + mean, c + 1)
        else:
            points.append((run, mean, 1))
    if key is not None:
        yield (*head, points)


def _analyse_job(job):
    return analyse(*job)


def _analyses(jobs_list, jobs: int):
    """analyse() over every (values, rule, memo), in order; with jobs > 1 in worker
    processes (Otava costs about 40 ms for a series of 1,000 runs analysed whole, and
    series are independent)."""
    if jobs <= 1 or len(jobs_list) < 32:
        return [analyse(*job) for job in jobs_list]
    import concurrent.futures as cf
    import multiprocessing
    with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_analyse_job, jobs_list, chunksize=max(1, len(jobs_list) // (8 * jobs))))


@dataclass
class Weak:
    """A series' weak change points as ``weak_points`` stores them (see ``db``)."""
    runs: int
    digest: str
    points: list
    max_pvalue: float = 0.0


def _digests(runs, values, n: int | None):
    """The digest of the series' first N points (None when it has fewer) and of all of
    them: a run inserted earlier in the order, or a value changed, changes the first."""
    h, prefix = hashlib.blake2b(digest_size=16), None
    for k, (run, value) in enumerate(zip(runs, values)):
        if k == n:
            prefix = h.hexdigest()
        h.update(f"{run}={value!r};".encode())
    whole = h.hexdigest()
    return (whole if n == len(values) else prefix), whole


def _stored(conn, rule_of) -> dict:
    """(cell, metric) -> Weak, for the entries made with this window and the metric's
    current p-value (a changed rule, or window, analyses the series whole again)."""
    t = db.weak_points
    out = {}
    for row in conn.execute(sa.select(t)):
        if row.window == WINDOW and row.max_pvalue == rule_of(row.metric).max_pvalue:
            out[(row.cell, row.metric)] = Weak(row.runs, row.digest, json.loads(row.points), row.max_pvalue)
    return out


def find(conn, rules, acks=(), since=None, metrics=None, where=None, jobs: int = 1,
         last: int | None = None) -> list[Series]:
    """Every series' verdict (see the module's doc); ``judge`` without what it stores."""
    return judge(conn, rules, acks, since, metrics, where, jobs, last, incremental=False)[0]


def judge(conn, rules, acks=(), since=None, metrics=None, where=None, jobs: int = 1,
          last: int | None = None, incremental: bool = True):
    """Every series' verdict, and the weak change points to store: (series, {(cell,
    metric): Weak}). ``last``: only each series' newest ``last`` runs go to Otava (its
    cost grows with the series; positions stay those of the whole series).

    ``incremental``: a whole series (no ``since``, ``where`` or ``last``) whose first runs
    are those stored in ``weak_points`` (same ids, same values, same order) is analysed
    in Otava's incremental mode from them; any other is analysed whole."""
    whole_series = since is None and not where and not last
    stored = _stored(conn, rules.of) if incremental and whole_series else {}
    out, todo, interned, weak = [], [], {}, {}
    for cell, test, labels, metric, points in _series(_rows(conn, since, where, metrics)):
        if metrics and not any(fnmatch.fnmatchcase(metric, p) for p in metrics):
            continue
        rule = rules.of(metric)
        runs = [interned.setdefault(r, r) for r, _, _ in points]
        values = [m / c for _, m, c in points]
        s = Series(cell, test, cell_labels(json.loads(labels)), metric, rule.better, len(values), "ok",
                   min_runs=rule.min_runs, last_run=runs[-1])
        out.append(s)
        if len(values) < rule.min_runs:
            s.verdict = "not enough runs"
            continue
        memo = None
        if whole_series:
            old = stored.get((cell, metric))
            prefix, whole = _digests(runs, values, old.runs if old else None)
            if old and old.runs <= len(values) and prefix == old.digest:
                memo, s.analysis = (old.runs, old.points), "incremental"
            weak[(cell, metric)] = Weak(len(values), whole, [], rule.max_pvalue)
        skip = max(0, len(values) - last) if last else 0
        todo.append((s, runs, values[skip:], rule, skip, memo))
    found = _analyses([(values, rule, memo) for _, _, values, rule, _, memo in todo], jobs)
    for (s, runs, values, rule, skip, _), (points, weak_points) in zip(todo, found):
        if (s.cell, s.metric) in weak:
            weak[(s.cell, s.metric)].points = weak_points
        s.changes = changes(points, runs, rule, skip, s.cell, s.metric, acks)
        for ch in s.changes:
            if ch.kind == "regression":
                ch.metadata_diff = _what_changed(conn, s.cell, runs[ch.index - 1], ch.run)
        open_ = [c for c in s.changes if c.kind == "regression" and not c.acknowledged]
        acked = [c for c in s.changes if c.kind == "regression" and c.acknowledged]
        s.verdict = "regression" if open_ else "acknowledged" if acked else "ok"
    return out, weak


def changes(points, runs, rule, skip: int, cell: str, metric: str, acks=()) -> list[Change]:
    """detect()'s points of a series (judged from position ``skip``) -> Changes, each with
    its kind and the acknowledgement covering it."""
    out = []
    for index, before, after, pct, p in points:
        index += skip
        ch = Change(index, runs[index], before, after, pct, p, kind_of(rule.better, pct))
        ack = next((a for a in acks if a.covers(cell, metric, ch.run)), None)
        ch.acknowledged = ack.reason if ack else None
        out.append(ch)
    return out


def series_of(conn, cell: str, metric: str):
    """One cell's series of one metric: (test, labels, [run id], [value]) in run order, or
    None if the history holds none."""
    for _, test, labels, name, points in _series(_rows(conn, None, {"cell": cell}, [metric])):
        if name != metric:          # a name with [ * ? is not filtered by the query
            continue
        return test, cell_labels(json.loads(labels)), [r for r, _, _ in points], [m / c for _, m, c in points]
    return None


def _what_changed(conn, cell: str, before: str, after: str) -> dict:
    """The provenance fields of the cell that differ between the runs either side of a change."""
    rows = dict(conn.execute(sa.select(db.records.c.run_id, db.records.c.provenance)
                             .where(db.records.c.cell == cell, db.records.c.run_id.in_([before, after]))).all())
    if before not in rows or after not in rows:
        return {}
    d = diff(metadata(json.loads(rows[before])), metadata(json.loads(rows[after])))
    return {k: {"before": a, "after": b} for k, (a, b) in d.items()}


def save(conn, series, now: float, weak=None) -> None:
    """The change points of the judged series into ``change_points``, replacing what an
    earlier ``regressions`` stored for those series (one transaction: the caller's), so
    the dashboard marks what the last verdict said. A series judged "not enough runs"
    has none. ``weak`` ({(cell, metric): Weak}, from ``judge``) replaces those series'
    weak change points for the next incremental analysis."""
    t = db.change_points
    keys = [{"c": s.cell, "m": s.metric} for s in series]
    if not keys:
        return
    conn.execute(t.delete().where(t.c.cell == sa.bindparam("c"), t.c.metric == sa.bindparam("m")), keys)
    rows = [{"cell": s.cell, "metric": s.metric, "run_id": c.run, "position": c.index, "runs": s.runs,
             "before": c.before, "after": c.after, "change_pct": c.change_pct, "pvalue": c.pvalue,
             "kind": c.kind, "acknowledged": c.acknowledged, "judged": now}
            for s in series for c in s.changes]
    if rows:
        conn.execute(t.insert(), rows)
    if weak:
        w = db.weak_points
        conn.execute(w.delete().where(w.c.cell == sa.bindparam("c"), w.c.metric == sa.bindparam("m")),
                     [{"c": c, "m": m} for c, m in weak])
        conn.execute(w.insert(), [{"cell": c, "metric": m, "window": WINDOW, "max_pvalue": v.max_pvalue,
                                   "runs": v.runs, "digest": v.digest, "points": json.dumps(v.points),
                                   "judged": now} for (c, m), v in weak.items()])


def failed(series) -> bool:
    return any(s.verdict == "regression" for s in series)


def to_doc(series, db_shown: str) -> dict:
    counts = {}
    for s in series:
        counts[s.verdict] = counts.get(s.verdict, 0) + 1
    return {"db": db_shown, "window": WINDOW, "series": len(series), "verdicts": counts,
            "failed": failed(series), "results": [asdict(s) for s in series]}


def text(series) -> str:
    from vnetbench.history import render
    rows, hints = [], []
    for s in series:
        for c in s.changes:
            verdict = c.kind + (" (acknowledged)" if c.acknowledged else "")
            rows.append([s.cell[:8], s.test, query.label_text(s.labels), s.metric,
                         f"{c.index + 1}/{s.runs}", query.short(c.run), render.fmt(c.before), render.fmt(c.after),
                         render.pct(c.change_pct), render.fmt(c.pvalue, 2), verdict])
            if c.kind == "regression" and not c.acknowledged:
                hints.append(f"- {{cell: {s.cell[:8]}, metric: {s.metric}, run: {c.run[:12]}, reason: ...}}")
                for k, v in c.metadata_diff.items():
                    hints.append(f"  # {s.metric} at run {c.run[:12]}: {k} {v['before']} -> {v['after']}")
    lines = []
    if rows:
        lines.append(render.table(["cell", "test", "labels", "metric", "at run", "run id", "before", "after",
                                   "change", "p", "verdict"], rows))
    few = [s for s in series if s.verdict == "not enough runs"]
    for s in few[:20]:
        lines.append(f"not enough runs: {s.cell[:8]} {s.test} {query.label_text(s.labels)} {s.metric}: "
                     f"{s.runs} of the {s.min_runs} needed")
    if len(few) > 20:
        lines.append(f"not enough runs: {len(few) - 20} more series")
    n = {v: sum(1 for s in series if s.verdict == v) for v in ("regression", "acknowledged", "ok", "not enough runs")}
    lines.append(f"{len(series)} series: {n['regression']} with a regression, {n['acknowledged']} acknowledged, "
                 f"{n['ok']} ok, {n['not enough runs']} with not enough runs")
    if hints:
        lines.append("to acknowledge a change point once investigated, add to the --ack file:")
        lines.extend(hints)
    return "\n".join(lines)


def junit(series) -> str:
    """JUnit XML: a test case per series; a failure per unacknowledged regression."""
    from xml.sax.saxutils import quoteattr, escape
    cases = []
    for s in series:
        name = quoteattr(f"{s.test} {query.label_text(s.labels)} {s.metric}")
        body = ""
        if s.verdict == "regression":
            msgs = [f"{c.change_pct:+.1f}% at run {c.index + 1} of {s.runs} ({c.run[:12]}): "
                    f"{c.before:.6g} -> {c.after:.6g}, p={c.pvalue:.2g}"
                    for c in s.changes if c.kind == "regression" and not c.acknowledged]
            body = f"<failure message={quoteattr(msgs[0])} type=\"regression\">{escape(chr(10).join(msgs))}</failure>"
        elif s.verdict == "not enough runs":
            body = f"<skipped message={quoteattr(f'not enough runs: {s.runs} of {s.min_runs}')}/>"
        cases.append(f"  <testcase classname={quoteattr('history.' + s.cell[:8])} name={name}>{body}</testcase>")
    fails = sum(1 for s in series if s.verdict == "regression")
    skips = sum(1 for s in series if s.verdict == "not enough runs")
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            f"<testsuite name=\"vnetbench history regressions\" tests=\"{len(series)}\" failures=\"{fails}\" "
            f"errors=\"0\" skipped=\"{skips}\">\n" + "\n".join(cases) + "\n</testsuite>\n")
