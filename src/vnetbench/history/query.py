"""Finding runs in the store: by id prefix, tag, ``latest``, and by provenance fields.

A run is named on the command line by a prefix of its id (at least 4 hex digits, as git
names commits), by a tag (the newest run carrying it), or by ``latest`` (the newest run).
"Newest" is by when the run was measured (its records' start), then when it was added.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import sqlalchemy as sa

from vnetbench.errors import VnetbenchError
from vnetbench.history import db
from vnetbench.inputs import excerpt, one_line

from vnetbench.history.fields import WHERE_KEYS
_HEX = re.compile(r"[0-9a-f]{4,64}")


def parse_where(items) -> dict:
    """``["kind=ovs", "kernel=6.1.0"]`` -> {key: value}; one line naming a bad item."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or key not in WHERE_KEYS:
            raise VnetbenchError(f"--where {excerpt(item)}: use KEY=VALUE with KEY one of "
                                 f"{', '.join(WHERE_KEYS)}")
        out[key] = value
    return out


def _newest():
    return (db.runs.c.started.desc(), db.runs.c.added.desc(), db.runs.c.id)


def runs_where(conn, where: dict, limit: int | None = None):
    """Runs (newest first) having a record matching every ``where`` field."""
    q = sa.select(db.runs).order_by(*_newest())
    rec = {k: v for k, v in where.items() if k != "tag"}
    if rec:
        sub = sa.select(db.records.c.run_id).where(*(db.records.c[k] == v for k, v in rec.items()))
        q = q.where(db.runs.c.id.in_(sub))
    if "tag" in where:
        q = q.where(db.runs.c.id.in_(sa.select(db.run_tags.c.run_id).where(db.run_tags.c.tag == where["tag"])))
    if limit:
        q = q.limit(limit)
    return list(conn.execute(q).mappings())


def tags_of(conn, run_ids) -> dict:
    out = {}
    q = sa.select(db.run_tags.c.run_id, db.run_tags.c.tag).where(db.run_tags.c.run_id.in_(list(run_ids)))
    for rid, tag in conn.execute(q.order_by(db.run_tags.c.added, db.run_tags.c.tag)):
        out.setdefault(rid, []).append(tag)
    return out


def resolve(conn, ref: str) -> dict:
    """A run id prefix, a tag or ``latest`` -> the run's row; one line if none or several."""
    if ref == "latest":
        row = conn.execute(sa.select(db.runs).order_by(*_newest()).limit(1)).mappings().first()
        if row is None:
            raise VnetbenchError("latest: the history holds no run; add one with 'vnetbench history add RESULTS'")
        return row
    tagged = conn.execute(sa.select(db.runs).join(db.run_tags, db.run_tags.c.run_id == db.runs.c.id)
                          .where(db.run_tags.c.tag == ref).order_by(*_newest()).limit(1)).mappings().first()
    if tagged is not None:
        return tagged
    if _HEX.fullmatch(ref):
        rows = list(conn.execute(sa.select(db.runs).where(db.runs.c.id.like(ref + "%")).limit(2)).mappings())
        if len(rows) == 1:
            return rows[0]
        if len(rows) > 1:
            raise VnetbenchError(f"run {ref}: the prefix names several runs; give more of the id "
                                 "('vnetbench history list' shows them)")
    raise VnetbenchError(f"run {excerpt(ref)}: no run id, tag or 'latest' by that name; "
                         "'vnetbench history list' shows the runs and tags")


def records_of(conn, run_id: str) -> list[dict]:
    """A run's records with their metrics: [{test, cell, labels, provenance, fields..., metrics}]."""
    recs = {r["seq"]: dict(r) for r in conn.execute(
        sa.select(db.records).where(db.records.c.run_id == run_id).order_by(db.records.c.seq)).mappings()}
    for r in recs.values():
        r["labels"], r["provenance"], r["metrics"] = json.loads(r["labels"]), json.loads(r["provenance"]), {}
    for m in conn.execute(sa.select(db.metrics).where(db.metrics.c.run_id == run_id)).mappings():
        recs[m["seq"]]["metrics"][m["metric"]] = {"n": m["n"], "mean": m["mean"], "sd": m["sd"],
                                                  "samples": json.loads(m["samples"])}
    return list(recs.values())


def parse_since(text: str | None) -> float | None:
    """``--since`` 2026-01-31 (or an ISO date-time, UTC if no zone) -> Unix time."""
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise VnetbenchError(f"--since {excerpt(text)}: not a date; give YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M") if t else "-"


def short(run_id: str) -> str:
    return run_id[:12]


def label_text(labels: dict, skip=("run_id", "test", "testbed")) -> str:
    """Labels as one short line (params flattened), for a table's cell column."""
    parts = []
    for k, v in sorted(labels.items()):
        if k in skip:
            continue
        if isinstance(v, dict):
            v = ",".join(f"{a}={b}" for a, b in sorted(v.items()))
        parts.append(f"{k}={v}")
    return one_line(" ".join(parts), 200)
