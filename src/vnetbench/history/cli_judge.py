"""``history compare`` and ``history regressions``: the commands that judge runs.

Every flag is checked before the database is opened, so a typo costs no query and is one
line naming the flag and the fix (exit 2). ``regressions`` exits 1 when it finds a
regression nobody acknowledged: that is the CI gate.
"""

from __future__ import annotations

import argparse
import math

from vnetbench.errors import VnetbenchError
from vnetbench.history import render


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
    db_option(s)
    s.set_defaults(func=cmd_compare)


def _probability(text: str) -> float:
    try:
        p = float(text)
    except ValueError:
        p = math.nan
    if not 0 < p < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a probability between 0 and 1, e.g. 0.05")
    return p


def cmd_compare(args) -> int:
    from vnetbench.history import commands, compare, thresholds
    rules = thresholds.load_rules(args.thresholds)
    for f in args.ignore:
        if not f or not f.isprintable():
            raise VnetbenchError(f"--ignore {f!r}: give a provenance field such as kernel or tools.ovs-vswitchd")
    with commands.engine(args).connect() as conn:
        doc = compare.compare(conn, args.a, args.b, rules, args.ignore, args.metric, args.alpha)
    print(render.to_json(doc) if args.format == "json" else compare.text(doc), end="" if args.format == "json" else "\n")
    return 0
