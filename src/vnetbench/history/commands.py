"""``vnetbench history add|list|show|compare|regressions``: the CLI of the results history.

Handlers parse and check every flag first (one line naming it and the fix, exit 2), then
call the library modules; they alone print. Exit 1 is kept for a verdict CI gates on (an
unacknowledged regression), never for a usage problem.
"""

from __future__ import annotations

import argparse
import os

from vnetbench.history.fields import DEFAULT_DB, WHERE_KEYS

DB_HELP = (f"the history: an SQLite file (default: $VNETBENCH_HISTORY or {DEFAULT_DB}) "
           "or postgresql://USER@HOST/DBNAME")


def _db_default() -> str:
    return os.environ.get("VNETBENCH_HISTORY") or DEFAULT_DB


def add_parsers(sub) -> None:
    h = sub.add_parser("history", help="runs kept in a database: add, list, show, compare, "
                                       "regressions (change points with Apache Otava)")
    hs = h.add_subparsers(required=True, metavar="ACTION")

    s = hs.add_parser("add", help="import run directories (compare, scale, reproduce, capacity, functional), "
                                  "records.jsonl or matrix.json files (idempotent)")
    s.add_argument("results", nargs="+", metavar="RESULTS")
    s.add_argument("--tag", action="append", default=[], help="a free tag, e.g. the tested build (repeatable)")
    s.add_argument("--jobs", type=_positive, default=min(2, os.cpu_count() or 1),
                   help="processes reading runs ahead of the inserts (default: %(default)s)")
    _db(s)
    s.set_defaults(func=cmd_add)

    s = hs.add_parser("list", help="the runs, newest first")
    s.add_argument("--where", action="append", metavar="KEY=VALUE",
                   help=f"only runs with a record where KEY is VALUE ({', '.join(WHERE_KEYS)})")
    s.add_argument("--limit", type=_positive, default=50, help="at most this many runs (default: %(default)s)")
    s.add_argument("--format", choices=["table", "json"], default="table")
    _db(s)
    s.set_defaults(func=cmd_list)

    s = hs.add_parser("show", help="one run: its provenance and cells")
    s.add_argument("run", metavar="RUN", help="run id (prefix), tag or 'latest'")
    s.add_argument("--where", action="append", metavar="KEY=VALUE", help="only these records")
    s.add_argument("--format", choices=["table", "json"], default="table")
    _db(s)
    s.set_defaults(func=cmd_show)

    from vnetbench.history import cli_judge
    cli_judge.add_parsers(hs, _db)


def database_errors(func):
    """A handler whose database fails mid-command (a server gone, a disk full) ends in one
    line naming the database, never a traceback; a run being imported is rolled back."""
    import functools

    @functools.wraps(func)
    def wrapped(args):
        import sqlalchemy as sa
        from vnetbench.errors import VnetbenchError
        from vnetbench.history import db
        from vnetbench.inputs import one_line
        try:
            return func(args)
        except sa.exc.SQLAlchemyError as exc:
            target = getattr(args, "db", None) or getattr(args, "history", None) or _db_default()
            raise VnetbenchError(f"--db {db.shown(target)}: the database failed "
                                 f"({one_line(str(getattr(exc, 'orig', None) or exc), 160)}); runs not "
                                 "reported as added were not; run the command again") from None
    return wrapped


def _db(s) -> None:
    s.add_argument("--db", default=None, metavar="DB", help=DB_HELP)


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number >= 1")
    return n


def engine(args):
    from vnetbench.history import db, query, render  # noqa: F401  (imported when used: SQLAlchemy)
    return db.open_db(args.db or _db_default())


@database_errors
def cmd_add(args) -> int:
    from vnetbench.history import db, query, render  # noqa: F401  (imported when used: SQLAlchemy)
    from vnetbench.history import ingest
    for tag in args.tag:
        ingest.check_tag(tag)
    eng = engine(args)

    def done(a):
        state = "added" if a.new else "already in the history"
        tags = f", tagged {', '.join(a.tags)}" if a.tags else ""
        print(f"{query.short(a.run_id)}  {a.name}: {a.records} records {state}{tags}", flush=True)
    ingest.add(eng, args.results, args.tag, done=done, jobs=args.jobs)
    print(f"history: {db.shown(args.db or _db_default())}")
    return 0


@database_errors
def cmd_list(args) -> int:
    from vnetbench.history import db, query, render  # noqa: F401  (imported when used: SQLAlchemy)
    where = query.parse_where(args.where)
    eng = engine(args)
    with eng.connect() as conn:
        rows = query.runs_where(conn, where, args.limit)
        tags = query.tags_of(conn, [r["id"] for r in rows])
    if args.format == "json":
        print(render.to_json([{**dict(r), "tags": tags.get(r["id"], [])} for r in rows]), end="")
        return 0
    if not rows:
        print("no runs" + (" match" if where else " in the history yet: vnetbench history add RESULTS"))
        return 0
    print(render.table(["run", "measured", "records", "name", "tags"],
                       [[query.short(r["id"]), query.when(r["started"]), r["records"], r["name"],
                         ",".join(tags.get(r["id"], [])) or "-"] for r in rows]))
    return 0


@database_errors
def cmd_show(args) -> int:
    from vnetbench.history import db, query, render  # noqa: F401  (imported when used: SQLAlchemy)
    where = query.parse_where(args.where)
    eng = engine(args)
    with eng.connect() as conn:
        run = query.resolve(conn, args.run)
        tags = query.tags_of(conn, [run["id"]]).get(run["id"], [])
        recs = query.records_of(conn, run["id"])
    recs = [r for r in recs if all(str(r.get(k)) == v for k, v in where.items() if k != "tag")]
    if args.format == "json":
        print(render.to_json({"run": dict(run), "tags": tags, "records": recs}), end="")
        return 0
    print(f"run {run['id']}\n  name {run['name']}  measured {query.when(run['started'])}  "
          f"records {run['records']}  tags {','.join(tags) or '-'}\n  source {run['source']}")
    keys = [k for k in db.PROVENANCE_COLUMNS if any(r.get(k) is not None for r in recs)]
    for k in keys:
        values = sorted({str(r[k]) for r in recs if r.get(k) is not None})
        print(f"  {k}: {', '.join(values)}")
    rows = []
    for r in recs:
        for metric, m in sorted(r["metrics"].items()):
            rows.append([r["cell"][:8], r["test"], query.label_text(r["labels"]), metric, m["n"],
                         render.fmt(m["mean"]), render.fmt(m["sd"])])
    print(render.table(["cell", "test", "labels", "metric", "n", "mean", "sd"], rows))
    return 0


# --history DB of the commands that measure (compare, reproduce): checked before the run,
# the run added at its end


def history_option(add_argument) -> None:
    add_argument("--history", metavar="DB", help="add this run to the results history at the end "
                 f"(an SQLite file such as {DEFAULT_DB}, or postgresql://...); checked before measuring")


def check_history(target: str | None):
    """Open (create, migrate) the history before a run: a bad --history costs no measurement."""
    from vnetbench.history import db, query, render  # noqa: F401  (imported when used: SQLAlchemy)
    if target:
        db.open_db(target).dispose()


def add_to_history(target: str | None, directory) -> None:
    """The finished run into the history, one line saying so; if it cannot be added, the
    run's records are kept and the message says how to add them later."""
    from vnetbench.history import db, query, render  # noqa: F401  (imported when used: SQLAlchemy)
    if not target:
        return
    from vnetbench.errors import VnetbenchError
    from vnetbench.history import ingest
    try:
        (a,) = ingest.add(db.open_db(target), [directory])
    except VnetbenchError as exc:
        raise VnetbenchError(f"--history {db.shown(target)}: the run was not added ({exc}); its records are "
                             f"kept: vnetbench history add {directory} --db {db.shown(target)}") from None
    state = "added to" if a.new else "already in"
    print(f"history: run {query.short(a.run_id)} ({a.records} records) {state} {db.shown(target)}")
