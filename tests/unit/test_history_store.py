"""The history store (vnetbench.history): the same tests on SQLite and a real PostgreSQL.

Import is idempotent (a run is its content hash), a transaction per run, a bad input
refused in one line with nothing imported, records of an older vnetbench imported, the
schema created and versioned by the tool, and list/show query by provenance fields.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from vnetbench import cli
from vnetbench.errors import VnetbenchError
from vnetbench.history import db, ingest, query

from history_runs import postgres, record, store, write_run  # noqa: F401  (fixtures)


def count(dbname, table):
    eng = db.open_db(dbname)
    with eng.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()


def test_add_twice_is_idempotent(store, tmp_path, capsys):
    run = write_run(tmp_path / "a", [record(), record("icmp_rtt", "rtt_mean_ms", (0.1, 0.12, 0.11))])
    assert cli.main(["history", "add", str(run), "--db", store]) == 0
    first = capsys.readouterr().out
    assert "2 records added" in first
    assert cli.main(["history", "add", str(run / "records.jsonl"), "--db", store, "--tag", "ovs-3.1"]) == 0
    second = capsys.readouterr().out
    assert "already in the history, tagged ovs-3.1" in second
    assert cli.main(["history", "add", str(run), "--db", store, "--tag", "ovs-3.1"]) == 0
    assert (count(store, db.runs), count(store, db.records), count(store, db.metrics), count(store, db.run_tags)) \
        == (1, 2, 2, 1)
    # the same records rewritten with other spacing and key order are the same run
    copy = tmp_path / "copy"
    copy.mkdir()
    lines = (run / "records.jsonl").read_text().splitlines()
    (copy / "records.jsonl").write_text("\n".join(json.dumps(json.loads(x), indent=None) for x in lines) + "\n")
    assert cli.main(["history", "add", str(copy), "--db", store]) == 0
    assert count(store, db.runs) == 1


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_truncated_records_refused_in_one_line_nothing_imported(store, tmp_path, capsys, jobs):
    good = write_run(tmp_path / "good", [record()])
    bad = write_run(tmp_path / "bad", [record(), record(point="9000")])
    later = write_run(tmp_path / "later", [record(point="64")])
    text = (bad / "records.jsonl").read_text()
    (bad / "records.jsonl").write_text(text[: len(text) - 40])       # cut mid-line, as a killed writer leaves it
    assert cli.main(["history", "add", str(bad), "--db", store, "--jobs", jobs]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad/records.jsonl:2" in err and "not a JSON line" in err
    assert count(store, db.runs) == 0 and count(store, db.records) == 0 and count(store, db.metrics) == 0
    # among others: the runs before it are imported whole, it and those after it not at all
    assert cli.main(["history", "add", str(good), str(bad), str(later), "--db", store, "--jobs", jobs]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "bad/records.jsonl:2" in err and "the 1 run(s) before it were" in err
    assert "good: 1 records added" in out and "later" not in out
    assert (count(store, db.runs), count(store, db.records)) == (1, 1)


def test_a_run_is_imported_whole_or_not_at_all(store, tmp_path, monkeypatch):
    run = write_run(tmp_path / "a", [record(), record(point="9000")])
    eng = db.open_db(store)
    real = ingest._insert

    def broken(conn, prepared):
        real(conn, prepared)
        raise RuntimeError("disk full")
    monkeypatch.setattr(ingest, "_insert", broken)
    with pytest.raises(RuntimeError):
        ingest.add(eng, [run])
    assert count(store, db.runs) == 0 and count(store, db.records) == 0 and count(store, db.metrics) == 0


def test_records_of_an_older_vnetbench_import(store, tmp_path, capsys):
    old = {"vnetbench": "0.0.9", "kernel": "5.10.0", "vswitch": "linuxbridge", "network": "flat"}
    rec = record(provenance=old)
    del rec["schema"], rec["extra"], rec["finished"]
    run = write_run(tmp_path / "old", [rec])
    assert cli.main(["history", "add", str(run), "--db", store]) == 0
    assert cli.main(["history", "show", "latest", "--db", store, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out.split("history: ", 1)[1].split("\n", 1)[1])
    r = doc["records"][0]
    assert r["kernel"] == "5.10.0" and r["kind"] == "linuxbridge" and r["cpu_model"] is None
    assert r["ovs_version"] is None and r["vnetbench_version"] == "0.0.9"


def test_list_and_show_query_by_provenance(store, tmp_path, capsys):
    a = write_run(tmp_path / "a", [record(started=1.7e9)])
    other = dict(record()["provenance"], kernel="6.12.0", tools={"ovs-vswitchd": "ovs-vswitchd (Open vSwitch) 3.3.1"})
    b = write_run(tmp_path / "b", [record(started=1.8e9, provenance=other)])
    assert cli.main(["history", "add", str(a), "--db", store, "--tag", "baseline"]) == 0
    assert cli.main(["history", "add", str(b), "--db", store]) == 0
    capsys.readouterr()
    assert cli.main(["history", "list", "--db", store, "--where", "ovs_version=3.3.1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["b"]
    assert cli.main(["history", "list", "--db", store, "--where", "tag=baseline"]) == 0
    out = capsys.readouterr().out
    assert " a " in out and "baseline" in out and " b " not in out
    assert cli.main(["history", "show", "baseline", "--db", store]) == 0
    out = capsys.readouterr().out
    assert "kernel: 6.1.0-28-amd64" in out and "ovs_version: 3.1.0" in out and "gbps" in out
    eng = db.open_db(store)
    with eng.connect() as conn:
        assert query.resolve(conn, "latest")["name"] == "b"
        rid = query.resolve(conn, "baseline")["id"]
        assert query.resolve(conn, rid[:6])["name"] == "a"


@pytest.mark.parametrize("argv, words", [
    (["history", "list", "--where", "colour=red"], "--where 'colour=red': use KEY=VALUE with KEY one of test, kind"),
    (["history", "list", "--where", "kernel"], "--where 'kernel': use KEY=VALUE"),
    (["history", "show", "nosuchrun"], "run 'nosuchrun': no run id, tag or 'latest'"),
    (["history", "add", "RESULTS_MISSING"], "RESULTS_MISSING: no such file or directory"),
    (["history", "add", "--tag", " x", "."], "--tag ' x': a tag is 1 to 128 printable characters"),
    (["history", "list", "--db", "mysql://x/y"], "--db 'mysql://x/y': unknown database URL"),
])
def test_bad_flags_one_line_exit_2(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    if "--db" not in argv:
        argv = [*argv, "--db", str(tmp_path / "h.sqlite")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_not_a_database_refused_in_one_line(tmp_path, capsys):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not SQLite" * 100)
    assert cli.main(["history", "list", "--db", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be used as a history database" in err


def test_schema_is_versioned_and_a_newer_one_refused(store):
    eng = db.open_db(store)
    with eng.begin() as conn:
        assert db.version(conn) == db.SCHEMA_VERSION
        assert db.migrate(conn) == db.SCHEMA_VERSION      # nothing to do the second time
        conn.execute(db.schema_version.update().values(version=db.SCHEMA_VERSION + 1))
    with pytest.raises(VnetbenchError, match="newer than this vnetbench reads"):
        db.open_db(store)


def test_real_runs_import_and_judge(store, tmp_path, capsys):
    """The recorded runs of tests/data: report's from a vnetbench before 'backend' and
    'cpu_model' were recorded, capacity's with them; each imports, compares with itself
    and has too few runs for a regression verdict."""
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "data"
    assert cli.main(["history", "add", str(data / "report"), str(data / "capacity"), "--db", store]) == 0
    out = capsys.readouterr().out
    assert "report: 110 records added" in out and "capacity: 38 records added" in out
    eng = db.open_db(store)
    with eng.connect() as conn:
        older = {r["backend"] for r in query.records_of(conn, query.runs_where(conn, {"kernel": "6.18.44-fc-v445"})[0]["id"])}
        assert older == {None}
        assert [r["name"] for r in query.runs_where(conn, {"backend": "netns"})] == ["capacity"]
    assert cli.main(["history", "compare", "latest", "latest", "--db", store, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cells"] and {c["verdict"] for c in doc["cells"]} <= {"no difference", "no significant difference"} | {
        c["verdict"] for c in doc["cells"] if c["verdict"].startswith("cannot tell")}
    assert cli.main(["history", "regressions", "--db", store, "--format", "json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["verdicts"]) == {"not enough runs"}


def test_two_imports_of_one_run_at_once(store, tmp_path, monkeypatch):
    """The import that commits second hits the run's key, rolls back and finds it there."""
    run = write_run(tmp_path / "a", [record(), record(point="9000")])
    eng = db.open_db(store)
    real, calls = ingest._insert, []

    def racing(conn, prepared):
        if not calls:                # another job commits the same run first
            calls.append(1)
            other = db.open_db(store)
            with other.begin() as c2:
                real(c2, prepared)
            other.dispose()
        real(conn, prepared)
    monkeypatch.setattr(ingest, "_insert", racing)
    (added,) = ingest.add(eng, [run])
    assert not added.new and calls == [1]
    assert (count(store, db.runs), count(store, db.records), count(store, db.metrics)) == (1, 2, 2)


def test_a_database_failing_mid_command_is_one_line(tmp_path, capsys, monkeypatch):
    def gone(*a, **k):
        raise sa.exc.OperationalError("SELECT", {}, Exception("server closed the connection unexpectedly"))
    monkeypatch.setattr(query, "runs_where", gone)
    assert cli.main(["history", "list", "--db", str(tmp_path / "h.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the database failed (server closed the connection unexpectedly)" in err


def test_a_run_is_the_hash_of_its_records_content(tmp_path):
    """The id (and so idempotence against a history written before) is the sha256 of each
    record's canonical JSON [test, labels, samples, provenance, started, finished, extra]
    and a newline, whatever the import builds it from; means and sds as the records' own
    summaries give them."""
    import hashlib
    from vnetbench.results import load
    recs = [record(values=(10, 10.5, None), extra_metrics={"rtt_ms": [1e-05, 2.5e17, 3], "é": [0.1]}),
            record("icmp_rtt", "rtt_mean_ms", (0.1, 0.12, 0.11), started=1.7e9 + 0.25,
                   provenance={"vnetbench": "0.0.9", "tools": {"ovs-vswitchd": "3.3.1 \u2028"}})]
    (run,) = load.load([write_run(tmp_path / "a", recs)])
    h = hashlib.sha256()
    for r in run.records:
        h.update(ingest.canonical([r.test, r.labels, r.samples, r.provenance, r.started, r.finished, r.extra]).encode())
        h.update(b"\n")
    rows = ingest.rows_of(run, 1.0)
    assert rows["run"]["id"] == h.hexdigest()
    for m in rows["metrics"]:
        s = run.records[m["seq"]].metrics[m["metric"]]
        assert (m["n"], m["mean"], m["sd"]) == (s["n"], s["mean"], s["sd"])
        assert json.loads(m["samples"]) == run.records[m["seq"]].samples[m["metric"]]


def _latency_run(tmp_path, i: int, rate_fps: float):
    rec = record(test="rfc2544_latency", metric="rtt_avg_ms", values=[0.2, 0.21, 0.19], started=1.7e9 + 3600 * i,
                 run_id=f"r{i}", point="64B latency")
    rec["labels"]["params"] = {"frame_size": 64, "rate_fps": rate_fps, "latency_count": 100}
    return write_run(tmp_path / f"lat{i}", [rec])


def test_a_measured_parameter_is_not_part_of_the_cell(store, tmp_path, capsys):
    """The RFC 2544 latency stream runs at the NDR its own run found: two runs of the
    same configuration are one cell (they were two, and no series ever formed), and a
    history of the earlier schema is migrated to it, its stored points for the old cells
    dropped."""
    runs = [_latency_run(tmp_path, i, rate) for i, rate in enumerate((72244.0, 72836.0))]
    assert cli.main(["history", "add", *map(str, runs), "--db", store]) == 0
    eng = db.open_db(store)
    count = sa.select(sa.func.count(sa.distinct(db.records.c.cell)))
    with eng.begin() as conn:
        assert conn.execute(count).scalar() == 1
        conn.execute(db.records.update().values(cell=sa.func.substr(db.records.c.run_id, 1, 32)))
        first = conn.execute(sa.select(db.runs.c.id).order_by(db.runs.c.started)).scalars().first()
        conn.execute(db.change_points.insert().values(   # as version 3 left them: a cell a run
            cell=first[:32], metric="rtt_avg_ms", run_id=first, position=1, runs=2, before=1, after=2,
            change_pct=100, pvalue=0.0, kind="change", judged=1.0))
        conn.execute(db.schema_version.update().values(version=3))
        assert conn.execute(count).scalar() == 2
    eng.dispose()
    eng = db.open_db(store)
    with eng.connect() as conn:
        assert conn.execute(count).scalar() == 1
        assert conn.execute(sa.select(sa.func.count()).select_from(db.change_points)).scalar() == 0
        assert db.version(conn) == db.SCHEMA_VERSION
        labels = json.loads(conn.execute(sa.select(db.records.c.labels)).scalar())
        assert labels["params"]["rate_fps"] in (72244.0, 72836.0)      # kept in the record
    eng.dispose()
    capsys.readouterr()


def test_the_fairness_bottleneck_device_is_not_part_of_the_cell():
    """Its qdisc command names the run's own device (the run id is in the name)."""
    def labels(dev):
        return {"test": "udp_fairness", "vswitch": "ovs", "run_id": dev,
                "params": {"bottleneck_bps": 100000000, "qdisc": f"replace dev {dev}-1 root tbf rate 100mbit"}}
    assert ingest.cell_of("udp_fairness", labels("tp2dbea7")) == ingest.cell_of("udp_fairness", labels("tpc2d55d"))
    other = labels("tp2dbea7")
    other["params"]["bottleneck_bps"] = 50000000
    assert ingest.cell_of("udp_fairness", other) != ingest.cell_of("udp_fairness", labels("tp2dbea7"))
