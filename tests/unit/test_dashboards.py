"""The Grafana dashboards: committed JSON up to date, valid against the pinned
SDK's schema, and every query built only from docs/metrics.md, with defined
variables, expandable to concrete PromQL that Prometheus's parser accepts."""

import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from vnetbench.dashboards import generate, overlay_comparison, port_ready, queries, schema

ROOT = Path(__file__).resolve().parents[2]
BOARDS = generate.dashboards()
QUERIES = [q for board in BOARDS.values() for q in queries.panel_queries(board)]
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on",
                   "ignoring", "group_left", "group_right", "inf", "nan"}


def contract_metrics() -> set[str]:
    """The metric names of the tables of docs/metrics.md (first column)."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    return set(re.findall(r"^\| `(vnetbench_\w+)` \|", text, re.MULTILINE))


def metric_names(expr: str) -> set[str]:
    """Identifiers of `expr` that are metric names: not strings, label
    matchers, ranges, grouping labels, functions, keywords or numbers."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    return {m.group(1) for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\b(?!\s*\()", bare)
            if m.group(1).lower() not in PROMQL_KEYWORDS}


def variables(board: dict) -> dict[str, dict]:
    return {v["name"]: v for v in board["templating"]["list"]}


def sample_values(board: dict) -> list[dict[str, object]]:
    """All, one value, several values (with a regex metacharacter) per variable."""
    names = variables(board)
    return [{n: "$__all" for n in names}, {n: "ovs" for n in names},
            {n: ["dbb070", "a.b"] for n in names}]


def test_committed_json_is_fresh():
    assert generate.main(["--check"]) == 0


def test_check_notices_a_stale_file(tmp_path):
    generate.write(tmp_path)
    assert generate.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / f"{overlay_comparison.UID}.json").write_text("{}\n")
    (tmp_path / "gone.json").write_text("{}\n")
    assert generate.stale(tmp_path) == ["gone.json", f"{overlay_comparison.UID}.json"]
    assert generate.main(["--check", "--out", str(tmp_path)]) == 1


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_validates_against_sdk_schema(uid):
    assert schema.validate(BOARDS[uid]) == []


def test_schema_catches_unknown_keys_and_bad_values():
    board = copy.deepcopy(BOARDS[overlay_comparison.UID])
    panel = board["panels"][1]
    panel["bogus"] = 1
    panel["options"]["orientation"] = "diagonal"
    panel["targets"][0]["format"] = "xml"
    board["templating"]["list"][0]["refresh"] = 9
    errors = "\n".join(schema.validate(board))
    for part in ("bogus: unknown", "orientation: 'diagonal'", "format_val: 'xml'",
                 "refresh: 9"):
        assert part in errors


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_every_panel_has_a_query(uid):
    for panel in queries.panels(BOARDS[uid]["panels"]):
        if panel["type"] != "row":
            assert [t for t in panel.get("targets", []) if t.get("expr")], panel["title"]


def test_queries_use_only_contract_metrics():
    contract = contract_metrics()
    assert "vnetbench_result" in contract and "vnetbench_test_running" in contract
    for q in QUERIES:
        used = metric_names(q.expr)
        assert used and used <= contract, (q, used - contract)
    for board in BOARDS.values():
        for var in variables(board).values():
            assert re.match(r"label_values\((\w+)", var["query"]).group(1) in contract


def test_metric_names_parser():
    expr = ('100 * sum by (host) (rate(a_total{x=~"b|c"}[5m])) / ignoring(metric) '
            '(b_total offset 1m / 1e6 > 0)')
    assert metric_names(expr) == {"a_total", "b_total"}


def test_overlay_data_plane_panels_have_cpu():
    board = BOARDS[overlay_comparison.UID]
    data_plane = [p for p in queries.panels(board["panels"]) if p["type"] != "row"]
    assert len(data_plane) == sum(len(f.metrics) for f in overlay_comparison.FAMILIES)
    for panel in data_plane:
        assert any('metric="cpu_pct"' in t["expr"] for t in panel["targets"]), panel["title"]


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_variables_used_are_defined(uid):
    board = BOARDS[uid]
    defined = set(variables(board))
    used_in_variables = {m for v in variables(board).values()
                         for m in re.findall(r"\$(\w+)", v["query"])}
    used = {m.group(1) or m.group(3) or m.group(4)
            for q in queries.panel_queries(board) for m in queries.VARIABLE.finditer(q.expr)}
    assert {u for u in used if not u.startswith("__")} | used_in_variables <= defined
    for var in variables(board).values():
        assert var["multi"] and var["includeAll"] and var["allValue"] == ".*"


def test_expand_leaves_no_dollar():
    for board in BOARDS.values():
        for values in sample_values(board):
            for q in queries.panel_queries(board):
                assert "$" not in queries.expand(q.expr, values, 3600), q


def test_expand_like_grafana():
    expr = 'm{a=~"$a", b=~"${b}", c=~"${c:regex}", d=~"[[d]]"}[$__rate_interval] $__range'
    values = {"a": "$__all", "b": ["x.y"], "c": ["p", "q.r"], "d": ["s", "t"]}
    assert queries.expand(expr, values, 600) == (
        r'm{a=~".*", b=~"x\\.y", c=~"(p|q\.r)", d=~"(s|t)"}[4s] 600s')
    # 1 day over 1,000 points: $__interval 87s, rate interval 87s + 1s scrape
    assert queries.expand("[$__interval][$__rate_interval]", {}, 86400) == "[87s][88s]"
    assert queries.expand("[$__rate_interval]", {}, 60, scrape_s=15) == "[60s]"
    with pytest.raises(KeyError):
        queries.expand("$undefined", {}, 60)


def test_panel_queries_cover_targets_and_annotations():
    board = BOARDS["vnetbench-vswitch-cpu"]
    found = queries.panel_queries(board)
    targets = sum(len(p.get("targets", [])) for p in queries.panels(board["panels"]))
    assert len(found) == targets + 2
    assert found[-2].panel == "annotation: Test windows"
    assert "vnetbench_test_running" in found[-2].expr
    assert found[-1].panel == "annotation: Faults"
    assert all(q.instant for q in queries.panel_queries(BOARDS[overlay_comparison.UID])
               if not q.panel.startswith("annotation: "))


def test_provisioning_matches_dashboards():
    prov = ROOT / "dashboards" / "provisioning"
    source, = yaml.safe_load((prov / "datasources" / "vnetbench.yaml").read_text())["datasources"]
    assert source["uid"] == "vnetbench-prometheus" and source["type"] == "prometheus"
    provider, = yaml.safe_load((prov / "dashboards" / "vnetbench.yaml").read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]
    refs = {t["datasource"]["uid"] for q in BOARDS.values()
            for p in queries.panels(q["panels"]) for t in p.get("targets", [])}
    assert refs == {"vnetbench-prometheus"}


def test_expanded_queries_parse_as_promql(tmp_path):
    exprs = [queries.expand(q.expr, values, 3600) for board in BOARDS.values()
             for values in sample_values(board) for q in queries.panel_queries(board)]
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"vnetbench:dashboard_query_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    done = subprocess.run(["promtool", "check", "rules", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_every_dashboard_marks_faults_at_their_own_time(uid):
    """The Faults annotation: the start series of faults/record.py, placed at its value
    (Grafana reads "Series value as timestamp" in ms, so seconds * 1000), filtered by
    the dashboard's variables except placement (fault series have none), titled from
    labels the pushed series really carry."""
    from vnetbench.faults.record import HELP, families
    from vnetbench.results.record import Result
    anno, = [a for a in BOARDS[uid]["annotations"]["list"] if a["name"] == "Faults"]
    assert anno["enable"] and anno["useValueForTime"] is True
    assert anno["datasource"]["uid"] == "vnetbench-prometheus"
    assert anno["expr"].startswith("1000 * vnetbench_fault_start_timestamp_seconds{")
    assert "placement" not in anno["expr"]
    for var in ("run_id", "vswitch", "network"):
        assert f'{var}=~"${var}"' in anno["expr"]
    rec = Result(test="fault", labels={"testbed": "t", "vswitch": "ovs", "network": "vxlan",
                                       "fault": "vswitch-restart", "target": "h1"},
                 samples={}, started=1_700_000_000.25, finished=1_700_000_001.0)
    start, = [f for f in families(rec) if f.name == "vnetbench_fault_start_timestamp_seconds"]
    assert start.name in HELP and start.samples[0].value * 1000 == 1_700_000_000_250
    carried = set(start.samples[0].labels) | {"run_id", "fault_id"}     # + Pushgateway group
    used = set(re.findall(r"\{\{(\w+)\}\}", anno["titleFormat"] + anno["textFormat"]))
    used |= set(anno["tagKeys"].split(","))
    assert used and used <= carried, used - carried


def port_ready_steps():
    """Two port_ready steps as the battery records them: 10 chassis, then 52 (12 ports on
    the first: a count of two digits and of three sort as numbers, not as text)."""
    from vnetbench.results.record import Result
    out = []
    for existing, chassis, p95 in ((12, 10, 640.0), (102, 52, 1400.0)):
        samples = {"ports": 50, "not_ready": 1, "cpu_controller_pct": 30.0, "cpu_vswitch_pct": 9.0,
                   "rss_controller_mib": 900.0, "rss_controller_growth_mib": 3.5,
                   "rss_vswitch_mib": 2000.0, "rss_vswitch_growth_mib": 1.0}
        samples.update({f"{s}_{q}_ms": p95 for s, _ in port_ready.STAGES for q in port_ready.QUANTILES})
        out.append(Result(test="port_ready", samples={k: [v] for k, v in samples.items()},
                          labels={"test": "port_ready", "run_id": "r1", "testbed": "t", "vswitch": "ovn",
                                  "network": "geneve", "placement": "cross-host", "pair": "new-ports",
                                  "point": f"{existing} existing, {chassis} chassis",
                                  "params": {"ports": 50, "existing": existing, "chassis": chassis}}))
    return out


def test_port_ready_panels_read_what_the_battery_pushes(tmp_path):
    """Every port_ready panel's query, evaluated by Prometheus's own engine (promtool test
    rules) on the series vnetbench.monitor.publish makes of two recorded steps: one bar
    per step, named by its existing ports and chassis, in numeric order."""
    from vnetbench.monitor import publish
    board = BOARDS[port_ready.UID]
    steps = port_ready_steps()
    series = [{"series": "vnetbench_result{" + ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
               + "}", "values": f"{s.value} {s.value}"}
              for fam in publish.families(steps, None) if fam.name == "vnetbench_result"
              for s in fam.samples]
    exprs = [queries.expand(q.expr, {n: "$__all" for n in variables(board)}, 3600)
             for q in queries.panel_queries(board) if not q.panel.startswith("annotation: ")]
    assert len(exprs) == 3 * 3 + 2 + 2 + 4
    rules = {"groups": [{"name": "board", "rules": [{"record": f"q{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    x = ["0012 existing · 0010 chassis · ovn/geneve · cross-host · r1",
         "0102 existing · 0052 chassis · ovn/geneve · cross-host · r1"]
    tests = [{"expr": f"q{i}", "eval_time": "1m",
              "exp_samples": [{"labels": f'q{i}{{x="{c}"}}',
                               "value": step.samples[re.search(r'metric="(\w+)"', e).group(1)][0]}
                              for c, step in zip(x, steps)]}
             for i, e in enumerate(exprs)]
    # the chassis variable narrows the bars to the steps on that many chassis
    one = queries.expand(port_ready.by_step("first_packet_p95_ms"),
                         {**{n: "$__all" for n in variables(board)}, "chassis": "52"}, 3600)
    rules["groups"][0]["rules"].append({"record": "only52", "expr": one})
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    tests.append({"expr": "only52", "eval_time": "1m",
                  "exp_samples": [{"labels": f'only52{{x="{x[1]}"}}', "value": 1400.0}]})
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
         "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}]}))
    done = subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yaml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
