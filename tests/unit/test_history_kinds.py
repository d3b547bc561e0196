"""history add of each kind of run directory: a comparison's and capacity's records
(recorded in tests/data), a functional run's matrix.json (written by the functional
matrix's own writer from recorded measurements), and a comparison directory holding
both -- one run each, idempotent, a bad matrix refused in one line with nothing
imported. Both stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import sqlalchemy as sa

from vnetbench import cli
from vnetbench.functional import verdict as v
from vnetbench.functional.matrix import Matrix
from vnetbench.functional.verdict import Status
from vnetbench.history import db

from history_runs import postgres, store  # noqa: F401  (fixtures)

DATA = Path(__file__).resolve().parents[1] / "data"


def measured(name: str) -> dict:
    return json.loads((DATA / "functional" / f"{name}.json").read_text())


def functional_run(directory: Path) -> Path:
    """A functional run's output: two cells measured, one leaking (Fail), one not (Pass)."""
    m = Matrix(expect={"ovs-openflow": {"isolation.broadcast": Status.PASS}})
    m.add("ovs-openflow", "vxlan", "isolation.broadcast", v.no_leak(measured("broadcast-openflow-leak")))
    m.add("ovs", "vxlan", "isolation.broadcast", v.no_leak(measured("broadcast-pass")))
    m.write(directory)
    return directory


def counts(target: str) -> dict:
    eng = db.open_db(target)
    with eng.connect() as conn:
        out = {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
               for t in (db.runs, db.records, db.metrics)}
        out["passed"] = sorted(conn.execute(sa.select(db.metrics.c.mean).where(db.metrics.c.metric == "passed")).scalars())
    eng.dispose()
    return out


def test_every_kind_of_run_directory(store, tmp_path, capsys):
    comparison = tmp_path / "comparison"
    comparison.mkdir()
    shutil.copy(DATA / "report" / "records.jsonl", comparison / "records.jsonl")
    capacity = tmp_path / "capacity"
    capacity.mkdir()
    shutil.copy(DATA / "capacity" / "records.jsonl", capacity / "records.jsonl")
    functional = functional_run(tmp_path / "functional-1")
    both = tmp_path / "comparison-with-matrix"
    shutil.copytree(comparison, both)
    functional_run(both / "functional")
    n_comparison = sum(1 for line in (comparison / "records.jsonl").read_text().splitlines() if line.strip())
    n_capacity = sum(1 for line in (capacity / "records.jsonl").read_text().splitlines() if line.strip())

    assert cli.main(["history", "add", str(comparison), str(capacity), str(functional), str(both),
                     "--db", store]) == 0
    out = capsys.readouterr().out
    assert f"comparison: {n_comparison} records added" in out and f"capacity: {n_capacity} records added" in out
    assert "functional-1: 2 records added" in out and f"comparison-with-matrix: {n_comparison + 2} records added" in out
    before = counts(store)
    assert before["runs"] == 4 and before["records"] == 2 * n_comparison + n_capacity + 4
    assert before["passed"] == [0.0, 0.0, 1.0, 1.0]            # the leak failed, the other passed (twice)
    # the matrix file itself is an argument too; adding any of them again changes nothing
    assert cli.main(["history", "add", str(functional / "matrix.json"), str(both), "--db", store]) == 0
    assert "already in the history" in capsys.readouterr().out
    assert counts(store) == before
    assert cli.main(["history", "show", "latest", "--db", store, "--where", "kind=ovs-openflow"]) == 0
    shown = capsys.readouterr().out
    assert "functional" in shown and "row=isolation.broadcast" in shown and "passed" in shown


def test_a_bad_matrix_is_one_line_nothing_imported(store, tmp_path, capsys):
    functional = functional_run(tmp_path / "functional")
    text = (functional / "matrix.json").read_text()
    (functional / "matrix.json").write_text(text[: len(text) // 2])
    assert cli.main(["history", "add", str(functional), "--db", store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matrix.json" in err, err
    assert counts(store)["runs"] == 0
