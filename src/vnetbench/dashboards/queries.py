"""The queries of a dashboard JSON and Grafana's variable interpolation, so that
tests can evaluate every panel's every query against a real Prometheus without
a Grafana server."""

import math
import re
from dataclasses import dataclass

from .common import ALL, ALL_VALUE

Value = str | list[str]

VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\[\[(\w+)(?::(\w+))?\]\]")
PROMQL_REGEX_SPECIAL = re.compile(r"[$^*{}\[\]'+?.()|]")
REGEX_SPECIAL = re.compile(r"[\\^$*+?.()|\[\]{}/]")


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref_id: str
    expr: str
    instant: bool = False


def panels(items: list[dict]) -> list[dict]:
    """Every panel, including those inside collapsed rows."""
    return [p for item in items for p in (item, *panels(item.get("panels", [])))]


def panel_queries(dashboard: dict) -> list[Query]:
    """Every Prometheus target of every panel, then every annotation query
    (panel "annotation: <name>", refId "Anno"; annotations are range queries)."""
    uid = dashboard["uid"]
    targets = [Query(uid, p.get("title", ""), t["refId"], t["expr"], bool(t.get("instant")))
               for p in panels(dashboard.get("panels", []))
               for t in p.get("targets", []) if t.get("expr")]
    annotations = [Query(uid, f"annotation: {a['name']}", "Anno", a["expr"])
                   for a in dashboard.get("annotations", {}).get("list", [])
                   if a.get("expr")]
    return targets + annotations


def promql_regex_escape(value: str) -> str:
    """Grafana's prometheusSpecialRegexEscape: the value goes into a PromQL
    string that is a regex, hence the doubled backslashes."""
    return PROMQL_REGEX_SPECIAL.sub(r"\\\\\g<0>", value.replace("\\", "\\\\\\\\"))


def regex_escape(value: str) -> str:
    """Grafana's kbn.regexEscape, used by the ${var:regex} format."""
    return REGEX_SPECIAL.sub(r"\\\g<0>", value)


def format_value(value: Value, fmt: str | None) -> str:
    """A multi-select variable as Grafana's Prometheus datasource writes it:
    All -> the custom all value, one value -> escaped, several -> (a|b)."""
    values = [value] if isinstance(value, str) else list(value)
    if values == [ALL]:
        return ALL_VALUE
    if fmt not in (None, "regex"):
        raise ValueError(f"variable format {fmt!r} not supported")
    escaped = [(regex_escape if fmt == "regex" else promql_regex_escape)(v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def builtins(range_s: int, scrape_s: int, max_data_points: int) -> dict[str, str]:
    """Grafana's time variables: $__interval = range / max data points, at least
    the scrape interval (the datasource's timeInterval); $__rate_interval =
    max($__interval + scrape interval, 4 * scrape interval)."""
    interval_s = max(scrape_s, math.ceil(range_s / max_data_points))
    rate_s = max(interval_s + scrape_s, 4 * scrape_s)
    return {"__interval": f"{interval_s}s", "__interval_ms": str(interval_s * 1000),
            "__rate_interval": f"{rate_s}s", "__rate_interval_ms": str(rate_s * 1000),
            "__range": f"{range_s}s", "__range_s": str(range_s),
            "__range_ms": str(range_s * 1000)}


def expand(expr: str, variables: dict[str, Value], range_s: int, *,
           scrape_s: int = 1, max_data_points: int = 1000) -> str:
    """`expr` with every $var, ${var}, ${var:regex}, [[var]] and $__ time
    variable substituted; a value is a string, a list of strings, or
    "$__all"/["$__all"] for All. An undefined variable raises KeyError."""
    times = builtins(range_s, scrape_s, max_data_points)

    def substitute(match: re.Match) -> str:
        name = match.group(1) or match.group(3) or match.group(4)
        fmt = match.group(2) or match.group(5)
        if name in times:
            return times[name]
        return format_value(variables[name], fmt)

    return VARIABLE.sub(substitute, expr)
