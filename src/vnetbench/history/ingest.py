"""``history add``: run directories -> the store, through the one records loader.

A run is read by ``vnetbench.results.load`` (so the store holds only what every other
reader would accept) and identified by the hash of its records' content: the same
records, wherever they are copied, are the same run, so adding them twice changes
nothing (a new ``--tag`` is still attached). Each run is imported in its own
transaction: a run is in the store whole or not at all. A bad argument (a truncated
``records.jsonl``) is refused in one line with nothing of it imported; the runs given
before it stay imported, which is harmless because adding them again changes nothing.
Arguments are read one at a time, so memory holds a few runs, not a thousand.

What it imports: a ``records.jsonl`` or a directory holding one (compare, reproduce,
capacity's and a scale task's results), read by the loader, and a functional matrix
(``matrix.json``, or a run directory's ``functional/matrix.json``) as records of test
``functional`` (``history.functional``).

Records from an older vnetbench carry fewer provenance fields: a field it did not write
is stored as NULL, never refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
import time
from dataclasses import dataclass

import sqlalchemy as sa

from vnetbench.errors import VnetbenchError
from vnetbench.history import db
from vnetbench.history.cells import RUN_LABELS, canonical, cell_labels, cell_of  # noqa: F401  (API)
from vnetbench.inputs import one_line
from vnetbench.results import load as records_load

#: provenance that changes every run: left out of the software-metadata comparison
VOLATILE = ("run_id", "collected")
TAG_MAX = 128


@dataclass(frozen=True)
class Added:
    run_id: str
    name: str
    records: int
    new: bool           # False: the run was already in the store
    tags: tuple


def _parts(r) -> dict:
    """A record's fields as canonical JSON, each encoded once: the run's identity (the hash
    of its records' content, key order and spacing aside) and the rows are both built from
    them (an import's JSON encoding was a third of its time)."""
    samples = {m: _numbers(v) for m, v in r.samples.items()}
    return {"labels": canonical(r.labels), "provenance": canonical(r.provenance), "samples": samples,
            "all_samples": "{" + ",".join(f"{json.dumps(m)}:{samples[m]}" for m in sorted(samples)) + "}"}


def _line(r, parts: dict) -> str:
    """``canonical([test, labels, samples, provenance, started, finished, extra])`` + newline,
    from the parts (a JSON list is its items' JSON joined by commas)."""
    return (f"[{canonical(r.test)},{parts['labels']},{parts['all_samples']},{parts['provenance']},"
            f"{canonical(r.started)},{canonical(r.finished)},{canonical(r.extra)}]\n")


def _numbers(values) -> str:
    """A list of samples (numbers or null, as the record schema allows) as canonical JSON:
    Python's repr of an int or a finite float is JSON's spelling of it."""
    if all(type(v) in (int, float) for v in values):
        return "[" + ",".join(map(repr, values)) + "]"
    return canonical(list(values))


def _moments(values) -> tuple:
    """n, mean, sd of the non-null samples (as vnetbench.results.stats.summarize computes them)."""
    xs = [float(x) for x in values if x is not None]
    n = len(xs)
    if not n:
        return 0, None, None
    mean = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - mean) * (x - mean) for x in xs) / (n - 1)) if n > 1 else None
    return n, mean, sd


_VERSION = re.compile(r"\d+(?:\.\d+)+[\w.+~-]*")


def _version(text) -> str | None:
    """'ovs-vswitchd (Open vSwitch) 3.1.0' -> '3.1.0' (the text itself if no version is in it)."""
    if text is None or isinstance(text, (dict, list)):
        return None
    m = _VERSION.search(str(text))
    return m.group() if m else str(text)


def _first(prov: dict, *paths):
    for path in paths:
        node = prov
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, (dict, list)):
            return node
    return None


def fields(record) -> dict:
    """The provenance fields people query by, from whatever the record carries (None if absent)."""
    prov, labels = record.provenance, record.labels
    tools = prov.get("tools") if isinstance(prov.get("tools"), dict) else {}
    out = {
        "kind": _first(prov, "vswitch") or labels.get("vswitch"),
        "network": _first(prov, "network") or labels.get("network"),
        "backend": _first(prov, "backend"),
        "datapath": _first(prov, "ovs_datapath", "datapath"),
        "ports": _first(prov, "ovs_ports", "ports"),
        "tenant_mtu": _first(prov, "tenant_mtu", "mtu"),
        "underlay_mtu": _first(prov, "underlay_mtu"),
        "security_groups": _first(prov, "security_groups"),
        "kernel": _first(prov, "kernel"),
        "cpu_model": _first(prov, "cpu_model"),
        "ovs_version": _version(_first(prov, "ovs_version", "ovs.version") or tools.get("ovs-vswitchd")),
        "ovn_version": _version(_first(prov, "ovn_version", "ovn.version") or tools.get("ovn-controller")
                                or tools.get("ovn-northd")),
        "openstack_version": _version(_first(prov, "openstack_version", "openstack.version", "openstack.release")),
        "vnetbench_version": _first(prov, "vnetbench"),
    }
    return {k: (None if v is None else one_line(str(v), 256)) for k, v in out.items()}


def check_tag(tag: str) -> str:
    if not tag or len(tag) > TAG_MAX or not tag.isprintable() or tag.strip() != tag:
        raise VnetbenchError(f"--tag {one_line(repr(tag), 60)}: a tag is 1 to {TAG_MAX} printable characters "
                             "without surrounding spaces; give e.g. --tag ovs-3.3.1")
    return tag


def prepare(arg, now: float) -> dict:
    """One argument -> everything its import writes: the run's id and rows (no database here,
    so a worker process can do it: loading is the slow half of an import)."""
    return rows_of(load_run(arg), now)


def load_run(arg):
    """One RESULTS argument -> a ``results.load.Run``: its records.jsonl (through the one
    records loader) and its functional matrices (``history.functional``), either or both."""
    from pathlib import Path

    from vnetbench.history import functional
    path = Path(arg)
    try:
        has_records = not functional.matrices(path) or (path.is_dir() and (path / records_load.RECORDS).is_file())
    except (OSError, ValueError):
        has_records = True          # the loader names what is wrong with the path
    run = records_load.load([arg])[0] if has_records else None
    return functional.with_matrices(run, path)


def rows_of(run, now: float) -> dict:
    """A loaded run (``results.load.Run``) -> its rows: runs, records, metrics."""
    records = run.records
    h = hashlib.sha256()
    rows, metric_rows, known = [], [], {}
    for seq, r in enumerate(records):
        parts = _parts(r)
        h.update(_line(r, parts).encode())
        # records of a run mostly share their provenance: its fields are read once
        key = (parts["provenance"], r.labels.get("vswitch"), r.labels.get("network"))
        queried = known.get(key) or known.setdefault(key, fields(r))
        rows.append({"seq": seq, "test": r.test, "cell": cell_of(r.test, r.labels), "labels": parts["labels"],
                     "provenance": parts["provenance"], "started": r.started, "finished": r.finished, **queried})
        for metric, values in r.samples.items():
            n, mean, sd = _moments(values)
            metric_rows.append({"seq": seq, "metric": metric, "n": n, "mean": mean, "sd": sd,
                                "samples": parts["samples"][metric]})
    rid = h.hexdigest()
    for row in rows:
        row["run_id"] = rid
    for row in metric_rows:
        row["run_id"] = rid
    starts = [r.started for r in records if r.started] or [0.0]
    run_row = {"id": rid, "name": run.name, "source": one_line(str(run.path), 1000) if run.path else "(memory)",
               "added": now, "started": min(starts), "finished": max([r.finished for r in records] or [0.0]),
               "records": len(records)}
    return {"run": run_row, "records": rows, "metrics": metric_rows}


def _prepared(arguments, now: float, jobs: int):
    """prepare() of each argument, in order; with jobs > 1 in worker processes, at most
    2 x jobs runs ahead of the inserts (memory holds a few runs, not the history)."""
    if jobs <= 1 or len(arguments) < 2:
        for arg in arguments:
            yield arg, (lambda a=arg: prepare(a, now))
        return
    import concurrent.futures as cf
    import multiprocessing
    pool = cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
    try:
        pending = []
        for i, arg in enumerate(arguments):
            pending.append((arg, pool.submit(prepare, arg, now)))
            if len(pending) > 2 * jobs:
                a, f = pending.pop(0)
                yield a, f.result
        for a, f in pending:
            yield a, f.result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def add(engine, arguments, tags=(), now=None, done=None, jobs: int = 1) -> list[Added]:
    """Import each run, in order, a transaction each; return what happened to each.

    Runs are read one at a time (one loader call each: no run shares another's byte
    budget, and memory holds a few runs, not a thousand); ``jobs`` worker processes read
    them ahead of the inserts. A bad argument stops the command there: it and the runs
    after it are not imported, the runs before it are (whole), and the message says so --
    adding them again once the bad one is fixed changes nothing. ``done`` is called with
    each Added as it is committed (the CLI prints it)."""
    if not arguments:
        raise VnetbenchError("history add: no RESULTS given; pass run directories or records.jsonl files")
    tags = tuple(dict.fromkeys(check_tag(t) for t in tags))
    now = time.time() if now is None else now
    out = []
    for arg, result in _prepared(list(arguments), now, jobs):
        try:
            prepared = result()
        except VnetbenchError as exc:
            if out:
                raise VnetbenchError(f"{exc} (nothing of it imported; the {len(out)} run(s) before it were: "
                                     "adding them again changes nothing)") from None
            raise
        out.append(write(engine, prepared, tags))
        if done is not None:
            done(out[-1])
    return out


def add_run(engine, run, tags=(), now=None) -> Added:
    """A run already loaded (``results.load.Run``) into the store."""
    now = time.time() if now is None else now
    return write(engine, rows_of(run, now), tags)


def write(engine, prepared: dict, tags=()) -> Added:
    """One prepared run in one transaction: all its rows, or (already there) only new tags.
    Two imports of the same run at once (two CI jobs on a shared PostgreSQL): the one that
    commits second hits the primary key, rolls back, and finds the run there."""
    for attempt in (1, 2):
        try:
            return _write(engine, prepared, tags)
        except sa.exc.IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _write(engine, prepared: dict, tags) -> Added:
    run = prepared["run"]
    rid = run["id"]
    with engine.begin() as conn:
        exists = conn.execute(sa.select(db.runs.c.id).where(db.runs.c.id == rid)).first() is not None
        if not exists:
            _insert(conn, prepared)
        have = {t for (t,) in conn.execute(sa.select(db.run_tags.c.tag).where(db.run_tags.c.run_id == rid))}
        new_tags = [t for t in tags if t not in have]
        if new_tags:
            conn.execute(db.run_tags.insert(), [{"run_id": rid, "tag": t, "added": run["added"]} for t in new_tags])
    return Added(rid, run["name"], run["records"], not exists, tuple(new_tags))


def _insert(conn, prepared: dict) -> None:
    conn.execute(db.runs.insert().values(**prepared["run"]))
    bulk(conn, db.records, prepared["records"])
    bulk(conn, db.metrics, prepared["metrics"])


def bulk(conn, table, rows: list[dict]) -> None:
    """Rows inserted by one DB-API executemany with the dialect's own statement: the ORM-free
    path without SQLAlchemy's per-row parameter processing (a third of an import's time)."""
    if not rows:
        return
    compiled = table.insert().compile(dialect=conn.dialect)
    if compiled.positional:
        params = list(map(operator.itemgetter(*compiled.positiontup), rows))
    else:
        params = rows
    conn.exec_driver_sql(str(compiled), params)
