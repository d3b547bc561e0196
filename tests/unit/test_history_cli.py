"""history from the other commands and under hostile input: ``reproduce --from ... --history
DB`` adds its run at the end (a bad --history is refused before any measuring), and any
records file -- mutated from the schema and tests/data -- is imported whole or refused in
one line with nothing imported (the style of test_hostile_records)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import sqlalchemy as sa
from hypothesis import given, settings

from vnetbench import cli
from vnetbench.history import db

from hostile_records import records_file
from test_hostile_input import SETTINGS, assert_one_line_outcome, run

DATA = Path(__file__).resolve().parents[1] / "data"


def runs_in(dbname) -> int:
    with db.open_db(dbname).connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(db.runs)).scalar()


def test_reproduce_from_adds_its_run_to_the_history(tmp_path, capsys):
    src = tmp_path / "run"
    shutil.copytree(DATA / "report", src)
    h = str(tmp_path / "h.sqlite")
    assert cli.main(["reproduce", "003", "--from", str(src), "--history", h]) == 0
    assert "history: run " in capsys.readouterr().out and runs_in(h) == 1
    assert cli.main(["reproduce", "003", "--from", str(src), "--history", h]) == 0
    assert "already in" in capsys.readouterr().out and runs_in(h) == 1


def test_a_bad_history_is_refused_before_measuring(tmp_path, capsys):
    (tmp_path / "dir").mkdir()
    for argv in (["compare", "--history", str(tmp_path / "dir")],
                 ["reproduce", "003", "--from", str(DATA / "report"), "--history", "mysql://x"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--db" in err and "give --db a file path" in err, err
    assert not list((DATA / "report").glob("reproduce-*"))


@settings(max_examples=30, **SETTINGS)
@given(records_file())
def test_history_add_of_hostile_records_imports_whole_or_one_line(records):
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "run").mkdir()
        (tmp / "run" / "records.jsonl").write_bytes(records)
        h = str(tmp / "h.sqlite")
        code, out, err, seconds = result = run(["history", "add", str(tmp / "run"), "--db", h])
        assert_one_line_outcome(*result)
        assert runs_in(h) == (1 if code == 0 else 0)
        if code == 0:
            assert_one_line_outcome(*run(["history", "show", "latest", "--db", h]))
            assert_one_line_outcome(*run(["history", "regressions", "--db", h]))
