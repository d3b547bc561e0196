"""collectors/prometheus: the example scrape configuration and recording rules are
valid for promtool, compute what their comments say, and use only the metrics of
docs/metrics.md."""

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "collectors" / "prometheus"
SCRAPE, RULES = PROM / "scrape.yml", PROM / "rules.yml"
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on",
                "ignoring", "group_left", "group_right", "inf", "nan"}

def promtool(*args, cwd=None):
    done = subprocess.run(["promtool", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def contract_metrics() -> set[str]:
    """First column of the tables of docs/metrics.md."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    return set(re.findall(r"^\| `(vnetbench_\w+)` \|", text, re.MULTILINE))


def metric_names(expr: str) -> set[str]:
    """Identifiers of a PromQL expression that are metric names (not strings, label
    matchers, ranges, grouping labels, functions, keywords or numbers)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    return {m.group(1) for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\b(?!\s*\()", bare)
            if m.group(1).lower() not in PROMQL_WORDS}


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_metric_name_parser():
    assert metric_names('100 * sum without (cpu) (rate(a_total{x="b c"}[1m])) / on(host) b') \
        == {"a_total", "b"}
    assert metric_names('label_replace(x, "part", "p", "", "") or y > 0') == {"x", "y"}


def test_contract_is_parsed():
    names = contract_metrics()
    assert {"vnetbench_vswitch_cpu_seconds_total", "vnetbench_datapath_lookups_total",
            "vnetbench_result"} <= names


def test_rules_use_only_documented_metrics():
    known = contract_metrics()
    used = set()
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, rule["record"]
        assert names <= known, f"{rule['record']}: not in docs/metrics.md: {sorted(names - known)}"
        used |= names
    assert {"vnetbench_vswitch_cpu_seconds_total", "vnetbench_softirq_cpu_seconds_total",
            "vnetbench_dataplane_cpu_seconds_total", "vnetbench_datapath_lookups_total"} <= used


def test_scrape_config_shape():
    cfg = yaml.safe_load(SCRAPE.read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert cfg["rule_files"] == ["rules.yml"]
    targets = jobs["vnetbench-collector"]["static_configs"][0]["targets"]
    assert targets and all(t.endswith(":9477") for t in targets)
    assert jobs["vnetbench-collector"]["scrape_interval"] in ("1s", "5s")
    assert jobs["vnetbench-results"]["honor_labels"] is True


def test_promtool_check_config():
    # also checks the rule files it references (rules.yml, relative to scrape.yml)
    out = promtool("check", "config", SCRAPE)
    assert "1 rule files found" in out


def test_promtool_check_rules():
    out = promtool("check", "rules", RULES)
    assert f"{len(rules())} rules found" in out


UNIT_TEST = """
rule_files: [{rules}]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
      # h1 (OVS): 2 components; 2 CPUs of softirq, ksoftirqd inside it
      - series: 'vnetbench_vswitch_cpu_seconds_total{{host="h1",vswitch="ovs",component="ovs-vswitchd",thread_class="handler"}}'
        values: '0+3x8'        # 0.2 CPU
      - series: 'vnetbench_vswitch_cpu_seconds_total{{host="h1",vswitch="ovs",component="ovs-vswitchd",thread_class="main"}}'
        values: '0+1.5x8'      # 0.1 CPU
      - series: 'vnetbench_vswitch_cpu_seconds_total{{host="h1",vswitch="ovs",component="ovsdb-server",thread_class="all"}}'
        values: '0+1.5x8'      # 0.1 CPU
      - series: 'vnetbench_softirq_cpu_seconds_total{{host="h1",cpu="0"}}'
        values: '0+6x8'        # 0.4 CPU
      - series: 'vnetbench_softirq_cpu_seconds_total{{host="h1",cpu="1"}}'
        values: '0+3x8'        # 0.2 CPU
      - series: 'vnetbench_ksoftirqd_cpu_seconds_total{{host="h1",cpu="0"}}'
        values: '0+1.5x8'      # 0.1 CPU
      - series: 'vnetbench_datapath_lookups_total{{host="h1",vswitch="ovs",datapath="netdev@ovs-netdev",result="hit"}}'
        values: '0+900x8'
      - series: 'vnetbench_datapath_lookups_total{{host="h1",vswitch="ovs",datapath="netdev@ovs-netdev",result="missed"}}'
        values: '0+100x8'
      - series: 'vnetbench_datapath_lookups_total{{host="h1",vswitch="ovs",datapath="netdev@ovs-netdev",result="lost"}}'
        values: '0+50x8'
      # h2 (Linux bridge): no vSwitch process, softirq only
      - series: 'vnetbench_softirq_cpu_seconds_total{{host="h2",cpu="2"}}'
        values: '0+7.5x8'      # 0.5 CPU
      # the split: h1 0.3 + 0.15 + 0.05 CPU, h2 softirq only 0.5 CPU
      - series: 'vnetbench_dataplane_cpu_seconds_total{{host="h1",vswitch="ovs",part="vswitch",component="ovs-vswitchd",thread_class="main"}}'
        values: '0+4.5x8'
      - series: 'vnetbench_dataplane_cpu_seconds_total{{host="h1",vswitch="ovs",part="softirq_in_vswitch",component="ovs-vswitchd",thread_class="main"}}'
        values: '0+2.25x8'
      - series: 'vnetbench_dataplane_cpu_seconds_total{{host="h1",vswitch="ovs",part="softirq_other",component="idle",thread_class="all"}}'
        values: '0+0.75x8'
      - series: 'vnetbench_dataplane_cpu_seconds_total{{host="h2",vswitch="linuxbridge",part="softirq_other",component="task",thread_class="all"}}'
        values: '0+7.5x8'
    promql_expr_test:           # round(): promtool compares floats exactly
      - expr: round(host:vnetbench_vswitch_cpu_percent:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1",vswitch="ovs"}}'
            value: 40
      - expr: round(host_component:vnetbench_vswitch_cpu_percent:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1",vswitch="ovs",component="ovs-vswitchd"}}'
            value: 30
          - labels: '{{host="h1",vswitch="ovs",component="ovsdb-server"}}'
            value: 10
      - expr: round(host:vnetbench_softirq_cpu_percent:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1"}}'
            value: 60
          - labels: '{{host="h2"}}'
            value: 50
      - expr: round(host:vnetbench_ksoftirqd_cpu_percent:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1"}}'
            value: 10
      - expr: round(host:vnetbench_dataplane_cpu_percent:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1"}}'
            value: 50
          - labels: '{{host="h2"}}'
            value: 50
      - expr: round(host_part:vnetbench_dataplane_cpu_percent:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1",part="vswitch"}}'
            value: 30
          - labels: '{{host="h1",part="softirq_in_vswitch"}}'
            value: 15
          - labels: '{{host="h1",part="softirq_other"}}'
            value: 5
          - labels: '{{host="h2",part="softirq_other"}}'
            value: 50
      - expr: round(host_datapath:vnetbench_datapath_miss_ratio:rate1m, 0.001)
        eval_time: 2m
        exp_samples:
          - labels: '{{host="h1",vswitch="ovs",datapath="netdev@ovs-netdev"}}'
            value: 0.1
"""


def test_rules_compute_what_they_say(tmp_path):
    """promtool test rules on synthetic series: per-host and per-component CPU%,
    data-plane total = the sum of the split's parts (also for a host with no vSwitch
    process), per part,
    ksoftirqd apart, miss ratio = missed / (hit + missed)."""
    test = tmp_path / "rules_test.yml"
    test.write_text(UNIT_TEST.format(rules=RULES))
    promtool("test", "rules", test)
