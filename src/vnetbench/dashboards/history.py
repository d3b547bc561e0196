"""The results history (``vnetbench history``, a PostgreSQL store) in Grafana: one
metric's series per cell, the change points ``history regressions`` found marked on it
(an annotation) and listed (a table).

The queries are SQL on the history's own tables (``vnetbench.history.db``) through
Grafana's PostgreSQL datasource (``grafana-postgresql-datasource``, uid
``vnetbench-history``). A series is what ``history regressions`` judges: per run, the mean
of the cell's records' means, drawn at the run's measured time (``runs.started``, Unix
seconds, filtered by ``$__unixEpochFilter``). The change points are those the last
``history regressions`` stored (table ``change_points``): Grafana draws, it does not run
Otava. The SDK has no builder for SQL queries, so the two small classes below add them as
Grafana's JSON spells them (``rawSql``, ``format``, ``editorMode: code``).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import table, timeseries
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models.dashboard import (
    AnnotationQuery,
    DataSourceRef,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

UID = "vnetbench-history"
DATASOURCE_UID = "vnetbench-history"
DATASOURCE = DataSourceRef(type_val="grafana-postgresql-datasource", uid=DATASOURCE_UID)

# one run's point of one cell: the mean over the cell's records in that run (as
# vnetbench.history.regress draws a series)
SERIES_SQL = """SELECT u.started AS "time", substr(r.cell, 1, 8) || ' ' || r.test AS metric, AVG(m.mean) AS value
FROM metrics m
JOIN records r ON r.run_id = m.run_id AND r.seq = m.seq
JOIN runs u ON u.id = m.run_id
WHERE m.metric = '$metric' AND r.cell IN ($cell) AND m.mean IS NOT NULL AND $__unixEpochFilter(u.started)
GROUP BY u.id, u.started, r.cell, r.test
ORDER BY 1, 2"""

CHANGES_SQL = """SELECT u.started AS "time", substr(c.cell, 1, 8) AS cell, c.kind,
  CASE WHEN c.acknowledged IS NULL THEN 'no' ELSE c.acknowledged END AS acknowledged,
  c.change_pct AS "change %", c.before, c.after, c.pvalue AS p,
  c.position + 1 AS "at run", c.runs AS "of runs", substr(c.run_id, 1, 12) AS run
FROM change_points c
JOIN runs u ON u.id = c.run_id
WHERE c.metric = '$metric' AND c.cell IN ($cell) AND $__unixEpochFilter(u.started)
ORDER BY 1, 2"""

# Grafana's SQL annotation columns: time (epoch seconds are converted), text, tags
ANNOTATION_SQL = """SELECT u.started AS "time",
  c.kind || ' ' || to_char(c.change_pct, 'FMS990.0') || ' % in ' || substr(c.cell, 1, 8)
    || ' (' || to_char(c.before, 'FM999999990.999') || ' -> ' || to_char(c.after, 'FM999999990.999')
    || ', run ' || substr(c.run_id, 1, 12) || ')' AS text,
  c.kind || CASE WHEN c.acknowledged IS NULL THEN '' ELSE ',acknowledged' END AS tags
FROM change_points c
JOIN runs u ON u.id = c.run_id
WHERE c.metric = '$metric' AND c.cell IN ($cell) AND $__unixEpochFilter(u.started)
ORDER BY 1"""

METRIC_VAR_SQL = "SELECT DISTINCT metric FROM metrics ORDER BY 1"
TEST_VAR_SQL = "SELECT DISTINCT test FROM records ORDER BY 1"
# a cell named by its short id, test and configuration labels (the run's own labels left out)
CELL_VAR_SQL = """SELECT DISTINCT ON (cell)
  substr(cell, 1, 8) || ' ' || test || ' ' || (labels::jsonb - 'run_id' - 'test' - 'testbed')::text AS __text,
  cell AS __value
FROM records WHERE test IN ($test) ORDER BY cell"""


class SqlQuery(cogvariants.Dataquery):
    """A raw SQL target of Grafana's SQL datasources."""

    def __init__(self, ref_id: str, sql: str, fmt: str) -> None:
        self.ref_id, self.sql, self.fmt = ref_id, sql, fmt

    def to_json(self) -> dict[str, object]:
        return {"refId": self.ref_id, "datasource": DATASOURCE.to_json(), "rawSql": self.sql,
                "format": self.fmt, "rawQuery": True, "editorMode": "code"}


class Sql:
    """Builder of a SqlQuery (what ``with_target`` takes)."""

    def __init__(self, ref_id: str, sql: str, fmt: str = "time_series") -> None:
        self._query = SqlQuery(ref_id, sql, fmt)

    def build(self) -> SqlQuery:
        return self._query


class SqlAnnotationQuery(AnnotationQuery):
    """The SDK's AnnotationQuery with the SQL target Grafana's SQL datasources read."""

    sql: str = ""

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "target": SqlQuery("Anno", self.sql, "table").to_json()}


class SqlAnnotation(dash.AnnotationQuery):
    _internal: SqlAnnotationQuery

    def __init__(self, sql: str) -> None:
        self._internal = SqlAnnotationQuery()
        self._internal.sql = sql


def variable(name: str, label: str, sql: str, multi: bool) -> dash.QueryVariable:
    v = (dash.QueryVariable(name).label(label).datasource(DATASOURCE).query(sql)
         .refresh(VariableRefresh.ON_DASHBOARD_LOAD).sort(VariableSort.DISABLED))
    if multi:
        v = v.multi(True).include_all(True).current(VariableOption(selected=True, text=["All"], value=["$__all"]))
    return v


def variables() -> list[dash.QueryVariable]:
    """metric (one: a panel has one unit), test and cell (several, narrowed by test)."""
    return [variable("metric", "metric", METRIC_VAR_SQL, multi=False),
            variable("test", "test", TEST_VAR_SQL, multi=True),
            variable("cell", "cell", CELL_VAR_SQL, multi=True)]


def change_points() -> SqlAnnotation:
    return (SqlAnnotation(ANNOTATION_SQL)
            .name("Change points")
            .datasource(DATASOURCE)
            .enable(True)
            .icon_color("red"))


def build() -> dash.Dashboard:
    series = (timeseries.Panel()
              .id(1)
              .title("$metric per cell, one point a run")
              .description("Each run's mean of the cell's repetitions, at the time the run was measured; "
                           "red marks: the change points the last `vnetbench history regressions` found "
                           "(regression, improvement or change, with the % and the means either side)")
              .datasource(DATASOURCE)
              .with_target(Sql("A", SERIES_SQL))
              .height(12)
              .span(24))
    changes = (table.Panel()
               .id(2)
               .title("Change points of $metric")
               .description("What the last `vnetbench history regressions` stored for these series: "
                            "acknowledged ones carry the reason from the --ack file")
               .datasource(DATASOURCE)
               .with_target(Sql("B", CHANGES_SQL, "table"))
               .height(8)
               .span(24))
    return (dash.Dashboard("vnetbench: results history")
            .uid(UID)
            .tags(["vnetbench", "history"])
            .time("now-90d", "now")
            .variables(variables())
            .annotation(change_points())
            .with_panel(series)
            .with_panel(changes))
