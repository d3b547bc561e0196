"""``history compare`` and ``history regressions``: the commands that judge runs.

Every flag is checked before the database is opened, so a typo costs no query and is one
line naming the flag and the fix (exit 2). ``regressions`` exits 1 when it finds a
regression nobody acknowledged: that is the CI gate.
"""

from __future__ import annotations

import argparse
import math
import os

from vnetbench.errors import VnetbenchError
from vnetbench.history import render
from vnetbench.history.commands import database_errors


def add_parsers(hs, db_option) -> None:
    s = hs.add_parser("compare", help="two runs cell by cell: means, %% difference, Welch's t-test, "
                                      "Hedges' g (A B: run ids, tags or 'latest')")
    s.add_argument("a", metavar="A", help="the reference: run id (prefix), tag (e.g. baseline) or 'latest'")
    s.add_argument("b", metavar="B", nargs="?", default="latest", help="compared with A (default: latest)")
    s.add_argument("--metric", action="append", metavar="PATTERN", help="only these metrics (shell pattern)")
    s.add_argument("--ignore", action="append", default=[], metavar="FIELD",
                   help="judge cells whose provenance differs in this field anyway (e.g. kernel)")
    s.add_argument("--alpha", type=_probability, default=0.05, help="significance level (default: %(default)s)")
    s.add_argument("--thresholds", metavar="FILE", help="metric directions (default: the shipped thresholds.yaml)")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.add_argument("--html", metavar="FILE", help="also write the comparison as an HTML page with each judged "
                   "cell's series and its change points (as the history's Grafana dashboard draws it)")
    db_option(s)
    s.set_defaults(func=cmd_compare)
    add_regressions(hs, db_option)


def _last(text: str) -> int:
    if not text.isdigit() or not 6 <= int(text) <= 10_000_000:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of runs >= 6, e.g. 100")
    return int(text)


def _jobs(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to 64")
    return int(text)


def _probability(text: str) -> float:
    try:
        p = float(text)
    except ValueError:
        p = math.nan
    if not 0 < p < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a probability between 0 and 1, e.g. 0.05")
    return p


@database_errors
def cmd_compare(args) -> int:
    from vnetbench import outfiles
    from vnetbench.history import commands, compare, html, thresholds
    rules = thresholds.load_rules(args.thresholds)
    for f in args.ignore:
        if not f or not f.isprintable():
            raise VnetbenchError(f"--ignore {f!r}: give a provenance field such as kernel or tools.ovs-vswitchd")
    if args.html:
        outfiles.check_file(args.html, "--html")        # before the database is read
    with commands.engine(args).connect() as conn:
        doc = compare.compare(conn, args.a, args.b, rules, args.ignore, args.metric, args.alpha)
        page = html.page(conn, doc, rules) if args.html else None
    if page is not None:
        outfiles.write_file(args.html, page, "--html")
    print(render.to_json(doc) if args.format == "json" else compare.text(doc), end="" if args.format == "json" else "\n")
    return 0


def _save(eng, series, weak, shown: str) -> None:
    """The verdicts' change points into the database for the dashboard, and Otava's weak
    change points for the next incremental analysis; a database this user may only read
    (a CI job's role) still gets its verdict, with one line saying so."""
    import sys
    import time

    import sqlalchemy as sa

    from vnetbench.history import regress
    from vnetbench.inputs import one_line
    try:
        with eng.begin() as conn:
            regress.save(conn, series, time.time(), weak)
    except sa.exc.SQLAlchemyError as exc:
        print(f"history regressions: change points not stored in {shown} for the dashboard "
              f"({one_line(str(getattr(exc, 'orig', None) or exc), 120)}); the verdict below stands",
              file=sys.stderr)


def add_regressions(hs, db_option) -> None:
    s = hs.add_parser("regressions", help="change points of every cell's series (Apache Otava); "
                                          "exit 1 on an unacknowledged regression")
    s.add_argument("--metric", action="append", metavar="PATTERN", help="only these metrics (shell pattern)")
    s.add_argument("--since", metavar="DATE", help="only runs measured since (YYYY-MM-DD[THH:MM], UTC)")
    s.add_argument("--where", action="append", metavar="KEY=VALUE", help="only records where KEY is VALUE")
    s.add_argument("--thresholds", metavar="FILE",
                   help="per-metric direction, minimum change, minimum runs (default: the shipped thresholds.yaml)")
    s.add_argument("--ack", metavar="FILE", help="YAML list of acknowledged change points {cell, metric, run, reason}")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.add_argument("--junit", metavar="FILE", help="also write JUnit XML here (a test case per series)")
    s.add_argument("--last", type=_last, metavar="N",
                   help="judge only each series' newest N runs (at least 6; default: all): a CI gate's "
                        "question is the recent change, and Otava's cost grows with the series")
    s.add_argument("--jobs", type=_jobs, default=min(2, os.cpu_count() or 1),
                   help="processes running Otava over the series (default: %(default)s)")
    s.add_argument("--full", action="store_true",
                   help="analyse every series from its first run; by default a series whose earlier "
                        "runs the last regressions already analysed is analysed in Otava's incremental "
                        "mode, from the weak change points stored then")
    db_option(s)
    s.set_defaults(func=cmd_regressions)


@database_errors
def cmd_regressions(args) -> int:
    from vnetbench import outfiles
    from vnetbench.history import commands, db, query, regress, thresholds
    since = query.parse_since(args.since)
    where = query.parse_where(args.where)
    rules = thresholds.load_rules(args.thresholds)
    acks = thresholds.load_acks(args.ack)
    if args.junit:
        outfiles.check_file(args.junit, "--junit")          # before the series are judged
    if args.metric and any(not m or not m.isprintable() for m in args.metric):
        raise VnetbenchError("--metric: give a metric name or shell pattern such as gbps or rtt_*_ms")
    dbname = args.db or commands._db_default()
    eng = commands.engine(args)
    with eng.connect() as conn:
        series, weak = regress.judge(conn, rules, acks, since, args.metric, where, jobs=args.jobs,
                                     last=args.last, incremental=not args.full)
    _save(eng, series, weak, db.shown(dbname))
    if args.junit:
        outfiles.write_file(args.junit, regress.junit(series), "--junit")
    if args.format == "json":
        print(render.to_json(regress.to_doc(series, db.shown(dbname))), end="")
    else:
        print(regress.text(series) if series else "no series: the history holds no runs that match")
    return 1 if regress.failed(series) else 0
