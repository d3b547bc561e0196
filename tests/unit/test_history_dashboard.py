"""The history's Grafana dashboard (vnetbench.dashboards.history) and the change points it
reads: its SQL queries, expanded as Grafana expands them, run on a real PostgreSQL holding
a history built by ``vnetbench history add`` and judged by ``history regressions``, return
each cell's series and the change points Otava found. (Grafana itself is not needed: the
queries are what it would send.) The change points are stored by both stores."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from vnetbench import cli
from vnetbench.dashboards import generate, history, schema
from vnetbench.history import db

from history_runs import STEP, T0, build_history, postgres, store  # noqa: F401  (fixtures)

def grafana_sql(sql: str, values: dict, start: float, end: float) -> str:
    """SQL as Grafana's SQL datasources send it: ``$__unixEpochFilter(col)`` -> the range in
    epoch seconds; a multi-value variable -> its values quoted ('a','b', quotes doubled);
    a single value as it is (the query quotes it)."""
    sql = re.sub(r"\$__unixEpochFilter\(([^)]+)\)", lambda m: f"{m[1]} >= {start:.0f} AND {m[1]} <= {end:.0f}", sql)

    def value(m):
        v = values[m[1] or m[2]]
        return ",".join("'" + x.replace("'", "''") + "'" for x in v) if isinstance(v, list) else v
    out = re.sub(r"\$\{(\w+)\}|\$(\w+)", value, sql)
    assert "$" not in out
    return out


def run(url: str, sql: str) -> list[tuple]:
    """The query on the server as Grafana runs it (psycopg, no parameters)."""
    import psycopg
    with psycopg.connect(url.replace("postgresql://", "postgresql://", 1)) as conn:
        return conn.execute(sql).fetchall()


def board_sql(board: dict) -> dict:
    """refId -> rawSql of the panels' targets, the annotation's and the variables'."""
    out = {t["refId"]: t["rawSql"] for p in board["panels"] for t in p["targets"]}
    (anno,) = [a for a in board["annotations"]["list"] if a["name"] == "Change points"]
    out["Anno"] = anno["target"]["rawSql"]
    out.update({v["name"]: v["query"] for v in board["templating"]["list"]})
    return out


def test_dashboard_is_valid_and_committed():
    (board,) = generate.dashboards((history,)).values()
    # the SDK models neither SQL targets nor an annotation's SQL target (as with the
    # Prometheus annotation fields, vnetbench.dashboards.schema): the rest must be valid
    sql_target = re.compile(r"^(dashboard\.panels\[\d+\]\.targets\[0\]: not a Prometheus query"
                            r"|\.annotations\.list\[0\]\.target\.\w+: (unknown to|added by) the schema)$")
    errors = schema.validate(board)
    assert len(errors) == 12 and [e for e in errors if not sql_target.match(e)] == []
    board["panels"][0]["bogus"] = 1
    assert [e for e in schema.validate(board) if not sql_target.match(e)] == [".panels[0].bogus: unknown to the schema"]
    board["panels"][0].pop("bogus")
    assert (generate.JSON_DIR / f"{history.UID}.json").read_text() == generate.render(board)
    refs = {t["datasource"]["uid"] for p in board["panels"] for t in p["targets"]}
    assert refs == {history.DATASOURCE_UID}
    assert {v["name"] for v in board["templating"]["list"]} == {"metric", "test", "cell"}


def test_queries_on_a_real_postgresql_give_series_and_change_points(postgres, tmp_path, capsys):
    url = postgres.new_db()
    means = build_history(tmp_path, url)
    assert cli.main(["history", "regressions", "--db", url]) == 1        # the drop: stored as a change point
    capsys.readouterr()
    (board,) = generate.dashboards((history,)).values()
    sql = board_sql(board)
    everything = (T0 - 1, T0 + STEP * 30)

    assert [m for (m,) in run(url, sql["metric"])] == ["gbps"]
    assert [t for (t,) in run(url, sql["test"])] == ["tcp_stream"]
    cells = run(url, grafana_sql(sql["cell"], {"test": ["tcp_stream"]}, *everything))
    assert len(cells) == 2 and all('"point"' in text and "run_id" not in text for text, _ in cells)
    by_point = {re.search(r'"point": "(\d+)"', text)[1]: cell for text, cell in cells}
    values = {"metric": "gbps", "test": ["tcp_stream"], "cell": [c for _, c in cells]}

    rows = run(url, grafana_sql(sql["A"], values, *everything))
    for point, cell in by_point.items():
        mine = [(t, v) for t, name, v in rows if name.startswith(cell[:8])]
        assert [t for t, _ in mine] == [T0 + STEP * i for i in range(30)]
        assert [v for _, v in mine] == pytest.approx(means[point], rel=1e-9)

    (change,) = run(url, grafana_sql(sql["B"], values, *everything))
    time_, cell8, kind, acked, pct, before, after, p, at, of, run_id = change
    assert cell8 == by_point["8948"][:8] and kind == "regression" and acked == "no" and of == 30
    assert abs(at - 20) <= 1 and time_ == T0 + STEP * (at - 1)
    assert pct == pytest.approx(-15, abs=4) and after < before and p < 0.001
    ((t, text, tags),) = run(url, grafana_sql(sql["Anno"], values, *everything))
    assert t == time_ and tags == "regression"
    assert text.startswith(f"regression -{abs(pct):.1f} % in {cell8} (") and run_id in text

    # Grafana's time range and the cell variable narrow both
    assert len(run(url, grafana_sql(sql["A"], values, T0, T0 + STEP * 9))) == 2 * 10
    assert run(url, grafana_sql(sql["Anno"], {**values, "cell": [by_point["1448"]]}, *everything)) == []

    ack = tmp_path / "ack.yaml"
    ack.write_text(f"- {{cell: {cell8}, metric: gbps, run: {run_id}, reason: accepted}}\n")
    assert cli.main(["history", "regressions", "--db", url, "--ack", str(ack)]) == 0
    ((_, _, tags),) = run(url, grafana_sql(sql["Anno"], values, *everything))
    assert tags == "regression,acknowledged"
    assert run(url, grafana_sql(sql["B"], values, *everything))[0][3] == "accepted"


def test_regressions_replaces_the_stored_change_points(store, tmp_path, capsys):
    build_history(tmp_path, store)
    eng = db.open_db(store)
    count = sa.select(sa.func.count()).select_from(db.change_points)
    assert cli.main(["history", "regressions", "--db", store, "--metric", "gbps"]) == 1
    with eng.connect() as conn:
        assert conn.execute(count).scalar() == 1
    assert cli.main(["history", "regressions", "--db", store]) == 1       # judged again: replaced, not added
    with eng.connect() as conn:
        assert conn.execute(count).scalar() == 1
    # judged over a window that holds no change: that series' stored point goes
    assert cli.main(["history", "regressions", "--db", store, "--last", "8"]) == 0
    with eng.connect() as conn:
        assert conn.execute(count).scalar() == 0
    eng.dispose()
    capsys.readouterr()


def test_a_version_1_history_is_migrated(store, tmp_path, capsys):
    build_history(tmp_path, store)
    eng = db.open_db(store)
    with eng.begin() as conn:          # as a vnetbench of schema version 1 left it
        db.weak_points.drop(conn)
        db.change_points.drop(conn)
        conn.execute(db.schema_version.update().values(version=1))
    eng.dispose()
    assert cli.main(["history", "regressions", "--db", store]) == 1
    eng = db.open_db(store)
    with eng.connect() as conn:
        assert db.version(conn) == db.SCHEMA_VERSION == 4
        assert conn.execute(sa.select(sa.func.count()).select_from(db.change_points)).scalar() == 1
        assert conn.execute(sa.select(sa.func.count()).select_from(db.runs)).scalar() == 30
    eng.dispose()
    capsys.readouterr()
