"""The history store: one SQL schema for SQLite and PostgreSQL, created and migrated here.

SQLAlchemy Core (already installed with Rally) speaks both dialects, so the schema is
written once as ``Table`` objects and no SQL string differs between the two stores. A
``schema_version`` table holds the version the database is at; ``open_db`` applies the
missing migrations in one transaction, and refuses a database written by a newer
vnetbench rather than guessing at its tables.

The tables, from the run down:

* ``runs`` -- one imported run, keyed by its content hash (so adding it twice is a no-op);
* ``run_tags`` -- free tags (``--tag``), a run may carry several;
* ``records`` -- one result record: its cell (test + labels without the run id, hashed),
  labels and provenance as JSON, and the provenance fields people query by as columns;
* ``metrics`` -- per record and metric: n, mean, sd and the per-repetition samples (JSON).
  The mean is what a series is drawn from; the samples are what ``compare`` tests;
* ``change_points`` (version 2) -- the change points the last ``history regressions``
  found in each series it judged, so a dashboard (``vnetbench.dashboards.history``) can
  mark them on the series without running Otava itself;
* ``weak_points`` (version 3) -- per series, Otava's weak change points (its split step's
  candidates) over the series' first ``runs`` runs, with a digest of those runs and
  values: the next ``history regressions`` hands them to Otava's incremental mode and
  analyses only the windows the new runs touch, as long as the digest still matches.

Version 4 changes no table: it recomputes the cells of records whose labels hold a
parameter of the run's own (``cells.RUN_PARAMS``), which earlier versions hashed
into the cell.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vnetbench.errors import VnetbenchError
from vnetbench.inputs import one_line

import sqlalchemy as sa

from vnetbench.history.cells import RUN_PARAMS, cell_of
from vnetbench.history.fields import DEFAULT_DB, PROVENANCE_COLUMNS  # noqa: F401  (DEFAULT_DB: API)

SCHEMA_VERSION = 4
DB_FIX = "give --db a file path (SQLite) or postgresql://USER@HOST/DBNAME"

meta = sa.MetaData()

schema_version = sa.Table("schema_version", meta, sa.Column("version", sa.Integer, nullable=False))

runs = sa.Table(
    "runs", meta,
    sa.Column("id", sa.String(64), primary_key=True),       # sha256 of the records' content
    sa.Column("name", sa.String(128), nullable=False),      # the run directory's name
    sa.Column("source", sa.Text, nullable=False),           # where it was imported from
    sa.Column("added", sa.Float, nullable=False),
    sa.Column("started", sa.Float, nullable=False),         # earliest record start (series order)
    sa.Column("finished", sa.Float, nullable=False),
    sa.Column("records", sa.Integer, nullable=False),
)

run_tags = sa.Table(
    "run_tags", meta,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("tag", sa.String(128), primary_key=True),
    sa.Column("added", sa.Float, nullable=False),
)

records = sa.Table(
    "records", meta,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("test", sa.String(64), nullable=False),
    sa.Column("cell", sa.String(64), nullable=False, index=True),
    sa.Column("labels", sa.Text, nullable=False),
    sa.Column("provenance", sa.Text, nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("finished", sa.Float, nullable=False),
    *(sa.Column(name, sa.String(256)) for name in PROVENANCE_COLUMNS),
)

metrics = sa.Table(
    "metrics", meta,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("metric", sa.String(64), primary_key=True),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("mean", sa.Float),
    sa.Column("sd", sa.Float),
    sa.Column("samples", sa.Text, nullable=False),
    sa.ForeignKeyConstraint(["run_id", "seq"], ["records.run_id", "records.seq"], ondelete="CASCADE"),
)


change_points = sa.Table(
    "change_points", meta,
    sa.Column("cell", sa.String(64), primary_key=True),
    sa.Column("metric", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),     # 0-based index of that run in the series
    sa.Column("runs", sa.Integer, nullable=False),         # the series' length when judged
    sa.Column("before", sa.Float, nullable=False),
    sa.Column("after", sa.Float, nullable=False),
    sa.Column("change_pct", sa.Float, nullable=False),
    sa.Column("pvalue", sa.Float, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),      # regression | improvement | change
    sa.Column("acknowledged", sa.Text),                    # the acknowledgement's reason
    sa.Column("judged", sa.Float, nullable=False),         # when regressions found it (Unix time)
)


weak_points = sa.Table(
    "weak_points", meta,
    sa.Column("cell", sa.String(64), primary_key=True),
    sa.Column("metric", sa.String(64), primary_key=True),
    sa.Column("window", sa.Integer, nullable=False),       # Otava's window_len
    sa.Column("max_pvalue", sa.Float, nullable=False),     # the rule's (the split step's is 10x)
    sa.Column("runs", sa.Integer, nullable=False),         # how many of the series' runs they cover
    sa.Column("digest", sa.String(64), nullable=False),    # of those runs' ids and values
    sa.Column("points", sa.Text, nullable=False),          # JSON [[index, qhat], ...]
    sa.Column("judged", sa.Float, nullable=False),
)


def _v1(conn) -> None:
    meta.create_all(conn, tables=[runs, run_tags, records, metrics])


def _v2(conn) -> None:
    meta.create_all(conn, tables=[change_points])


def _v3(conn) -> None:
    meta.create_all(conn, tables=[weak_points])


def _v4(conn) -> None:
    """The cells of the records whose labels hold a parameter of the run
    (``cells.RUN_PARAMS``) computed again without it; the change points and weak
    points stored for their old cells go (the next ``regressions`` judges the new ones)."""
    rows = conn.execute(sa.select(records.c.run_id, records.c.seq, records.c.test, records.c.cell,
                                  records.c.labels).where(records.c.test.in_(list(RUN_PARAMS)))).all()
    old = {r.cell for r in rows}
    updates = [{"r": r.run_id, "s": r.seq, "c": cell_of(r.test, json.loads(r.labels))} for r in rows]
    if updates:
        conn.execute(records.update().where(records.c.run_id == sa.bindparam("r"), records.c.seq == sa.bindparam("s"))
                     .values(cell=sa.bindparam("c")), updates)
    for table in (change_points, weak_points):
        if old:
            conn.execute(table.delete().where(table.c.cell.in_(sorted(old))))


#: version -> what brings a database from version - 1 to it (append, never edit)
MIGRATIONS = {1: _v1, 2: _v2, 3: _v3, 4: _v4}


def url_of(db: str) -> str:
    """``--db`` -> an SQLAlchemy URL: a PostgreSQL URL (driver psycopg 3), else a SQLite file."""
    if db.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise VnetbenchError("--db: a PostgreSQL history needs the psycopg driver; "
                                 "pip install 'psycopg[binary]'") from None
        return "postgresql+psycopg://" + db.split("://", 1)[1]
    if "://" in db:
        raise VnetbenchError(f"--db {one_line(db, 80)!r}: unknown database URL; {DB_FIX}")
    path = Path(db)
    if path.is_dir():
        raise VnetbenchError(f"--db {one_line(db, 120)}: is a directory; {DB_FIX}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise VnetbenchError(f"--db {one_line(db, 120)}: cannot create its directory ({exc.strerror}); "
                             f"{DB_FIX}") from None
    return "sqlite:///" + os.path.abspath(path)


def shown(db: str) -> str:
    """The database as messages name it (a URL's password never printed)."""
    if "://" in db:
        try:
            return sa.engine.make_url(url_of(db)).render_as_string(hide_password=True).replace("+psycopg", "")
        except Exception:       # noqa: BLE001 -- a malformed URL is named by open_db
            return one_line(db.split("@")[-1], 120)
    return one_line(db, 120)


def open_db(db: str) -> sa.Engine:
    """An engine on ``db`` with the schema at SCHEMA_VERSION (created or migrated)."""
    url = url_of(db)
    try:
        engine = sa.create_engine(url)
        if url.startswith("sqlite"):
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        with engine.begin() as conn:
            migrate(conn)
    except sa.exc.SQLAlchemyError as exc:
        raise VnetbenchError(f"--db {shown(db)}: cannot be used as a history database "
                             f"({one_line(str(getattr(exc, 'orig', exc) or exc), 160)}); {DB_FIX}") from None
    except ValueError as exc:       # a malformed URL
        raise VnetbenchError(f"--db {shown(db)}: {one_line(str(exc), 160)}; {DB_FIX}") from None
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA busy_timeout = 30000")      # two CI jobs adding at once wait, not fail
    # a write-ahead log: readers (a compare) never block an import, and a commit syncs the
    # log once instead of the database and its journal (durable across a crash of the
    # process; a power loss may lose the last runs added, never corrupt the file)
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.close()


def version(conn) -> int:
    """The schema version of the database behind ``conn`` (0: empty)."""
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar() or 0


def migrate(conn) -> int:
    """Bring the database to SCHEMA_VERSION; return the version it was at."""
    was = version(conn)
    if was > SCHEMA_VERSION:
        raise VnetbenchError(f"the history database is at schema version {was}, newer than this "
                             f"vnetbench reads ({SCHEMA_VERSION}); use a newer vnetbench")
    if was == 0:
        meta.create_all(conn, tables=[schema_version])
    for v in range(was + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[v](conn)
        conn.execute(schema_version.delete())
        conn.execute(schema_version.insert().values(version=v))
    return was
