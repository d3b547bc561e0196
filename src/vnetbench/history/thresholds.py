"""Per-metric rules (direction, minimum change, minimum runs) and the acknowledgement file.

The rules ship as ``thresholds.yaml`` beside this module and are replaced whole by
``--thresholds FILE``: the tracker of Orion/Hunter shows why a minimum change per metric
is needed (cloud variance makes a statistically significant 2 % change on a latency
common and uninteresting). The acknowledgement file lists change points someone has
investigated, so a known step in a series stops failing CI. Both are untrusted YAML read
through ``vnetbench.inputs`` (size, depth, UTF-8), and a bad field is one line naming the
file, the field and the fix.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vnetbench import inputs
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt, one_line

MAX_BYTES = 1024 * 1024
SHIPPED = "thresholds.yaml"
BETTER = ("higher", "lower", "either")
RULE_KEYS = ("better", "min_change_pct", "min_runs", "min_segment", "max_pvalue")


@dataclass(frozen=True)
class Rule:
    better: str
    min_change_pct: float
    min_runs: int
    min_segment: int
    max_pvalue: float


@dataclass(frozen=True)
class Rules:
    defaults: Rule
    metrics: tuple        # (pattern, Rule)

    def of(self, metric: str) -> Rule:
        for pattern, rule in self.metrics:
            if fnmatch.fnmatchcase(metric, pattern):
                return rule
        return self.defaults


@dataclass(frozen=True)
class Ack:
    cell: str        # a prefix of the cell id, or "*"
    metric: str      # a shell pattern
    run: str         # a prefix of the id of the run where the change starts
    reason: str

    def covers(self, cell: str, metric: str, run: str) -> bool:
        return ((self.cell == "*" or cell.startswith(self.cell)) and fnmatch.fnmatchcase(metric, self.metric)
                and run.startswith(self.run))


def _yaml(path, what: str, fix: str):
    try:
        if path is None:
            text = resources.files("vnetbench.history").joinpath(SHIPPED).read_text()
        else:
            text = inputs.decode(inputs.read_bytes(path, MAX_BYTES))
        doc = inputs.parse_yaml(text)
        inputs.check_tree(doc)
    except inputs.InputError as exc:
        where = f"{exc.where}: " if exc.where else ""
        raise VnetbenchError(one_line(f"{what} {path}: {where}{exc.problem}; {fix}")) from None
    return doc


def _bad(what, path, field, problem, fix):
    return VnetbenchError(one_line(f"{what} {path or SHIPPED}: {field}: {problem}; {fix}"))


def _rule(node, base: Rule | None, where: str, path) -> Rule:
    what, fix = "--thresholds", "see the shipped vnetbench/history/thresholds.yaml"
    if not isinstance(node, dict):
        raise _bad(what, path, where, f"{excerpt(node)} is not a mapping", fix)
    unknown = sorted(set(node) - set(RULE_KEYS) - {"match"})
    if unknown:
        raise _bad(what, path, f"{where}.{unknown[0]}", "unknown field", "use " + ", ".join(RULE_KEYS))
    values = {}
    for key in RULE_KEYS:
        if key not in node:
            if base is None:
                raise _bad(what, path, f"{where}.{key}", "missing", "defaults must give " + ", ".join(RULE_KEYS))
            values[key] = getattr(base, key)
            continue
        v = node[key]
        if key == "better":
            if v not in BETTER:
                raise _bad(what, path, f"{where}.better", f"{excerpt(v)} is not allowed", "use higher, lower or either")
        elif key == "min_runs":
            if isinstance(v, bool) or not isinstance(v, int) or not 3 <= v <= 10_000:
                raise _bad(what, path, f"{where}.min_runs", f"{excerpt(v)} is not a whole number from 3 to 10000",
                           "give e.g. 6 (Otava needs a few runs on each side of a change)")
        elif key == "min_segment":
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1000:
                raise _bad(what, path, f"{where}.min_segment", f"{excerpt(v)} is not a whole number from 1 to 1000",
                           "give e.g. 3 (runs either side of a change point)")
        elif key == "min_change_pct":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1000:
                raise _bad(what, path, f"{where}.min_change_pct", f"{excerpt(v)} is not a percentage from 0 to 1000",
                           "give e.g. 5")
            v = float(v)
        elif key == "max_pvalue":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise _bad(what, path, f"{where}.max_pvalue", f"{excerpt(v)} is not a probability between 0 and 1",
                           "give e.g. 0.001")
            v = float(v)
        values[key] = v
    return Rule(**values)


def load_rules(path=None) -> Rules:
    """The shipped rules, or ``path``'s (which replace them whole)."""
    fix = "give a thresholds YAML file like the shipped vnetbench/history/thresholds.yaml"
    doc = _yaml(path, "--thresholds", fix)
    if not isinstance(doc, dict) or "defaults" not in doc:
        raise _bad("--thresholds", path, "(top level)", "no 'defaults' mapping", fix)
    unknown = sorted(set(doc) - {"defaults", "metrics"})
    if unknown:
        raise _bad("--thresholds", path, unknown[0], "unknown field", "use defaults and metrics")
    defaults = _rule(doc["defaults"], None, "defaults", path)
    rules = []
    items = doc.get("metrics") or []
    if not isinstance(items, list):
        raise _bad("--thresholds", path, "metrics", "not a list", "give a list of {match: PATTERN, ...}")
    for i, node in enumerate(items):
        where = f"metrics[{i}]"
        if not isinstance(node, dict) or not isinstance(node.get("match"), str) or not node["match"]:
            raise _bad("--thresholds", path, f"{where}.match", "missing or not a text", "give a metric name pattern")
        rules.append((node["match"], _rule(node, defaults, where, path)))
    return Rules(defaults, tuple(rules))


ACK_FIX = ("give a list of {cell: ID-PREFIX or '*', metric: NAME, run: RUN-ID-PREFIX, reason: TEXT} "
           "as 'history regressions' prints them")


def load_acks(path) -> tuple:
    """The acknowledged change points of ``--ack FILE`` (none without it)."""
    if path is None:
        return ()
    doc = _yaml(Path(path), "--ack", ACK_FIX)
    if isinstance(doc, dict) and set(doc) == {"acknowledged"}:
        doc = doc["acknowledged"]
    if not isinstance(doc, list):
        raise _bad("--ack", path, "(top level)", "not a list", ACK_FIX)
    out = []
    for i, node in enumerate(doc):
        if not isinstance(node, dict):
            raise _bad("--ack", path, f"[{i}]", f"{excerpt(node)} is not a mapping", ACK_FIX)
        unknown = sorted(set(node) - {"cell", "metric", "run", "reason"})
        if unknown:
            raise _bad("--ack", path, f"[{i}].{unknown[0]}", "unknown field", "use cell, metric, run and reason")
        for key in ("cell", "metric", "run", "reason"):
            if not isinstance(node.get(key), (str, int)) or isinstance(node.get(key), bool) or str(node[key]) == "":
                raise _bad("--ack", path, f"[{i}].{key}", "missing or empty",
                           "say which change point and why it is accepted" if key == "reason" else ACK_FIX)
        run = str(node["run"])
        if len(run) < 4:
            raise _bad("--ack", path, f"[{i}].run", f"{excerpt(run)} is shorter than 4 characters",
                       "give at least 4 characters of the run id")
        out.append(Ack(str(node["cell"]), str(node["metric"]), run, str(node["reason"])))
    return tuple(out)
