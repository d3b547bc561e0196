"""A fast yes/no: does a document conform to a JSON Schema (the keywords the record
schema uses)?

Why not jsonschema alone: it takes about 0.25 ms for the smallest record and 2 ms for
a real one, so a 32 MiB records file of small records would take minutes to judge. The
schema is compiled here once into closures (about 20 times faster); jsonschema still
explains a record this finds bad (``vnetbench.results.load``), and a property test
(``tests/unit/test_record_load.py``) holds the two to the same verdict. A keyword this
does not know is an error at compile time, so the schema cannot outgrow it unnoticed.
"""

from __future__ import annotations

import re

MEMO = 4096
ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "x-record-version"}


def compile_schema(schema: dict):
    """``schema`` -> a function document -> bool."""
    compiled, defs = {}, schema.get("$defs", {})

    def ref(name):
        memo = {}

        def check(v):
            # a string's verdict is the string's alone: names and labels repeat in every
            # record, so each is judged once (at most MEMO short strings kept a definition)
            if type(v) is str and len(v) <= 256:
                verdict = memo.get(v)
                if verdict is None:
                    verdict = compiled[name](v)
                    if len(memo) < MEMO:
                        memo[v] = verdict
                return verdict
            return compiled[name](v)
        check.node = defs[name]          # for _numeric: what a list of it may hold
        check.defs = defs
        return check

    for name, node in defs.items():
        compiled[name] = _compile(node, ref)
    return _compile(schema, ref)


def _numeric(node: dict, ref):
    """(lowest, highest, null allowed) when ``node`` admits exactly the numbers within
    bounds (and maybe null): a long list of them is then judged in C (min, max, types)."""
    if set(node) == {"$ref"}:
        return _numeric(ref(node["$ref"].rsplit("/", 1)[1]).node, ref)
    if set(node) == {"anyOf"} and len(node["anyOf"]) == 2 and {"type": "null"} in node["anyOf"]:
        other = next(n for n in node["anyOf"] if n != {"type": "null"})
        inner = _numeric(other, ref)
        return inner and (inner[0], inner[1], True)
    if node.get("type") == "number" and set(node) - ANNOTATIONS <= {"type", "minimum", "maximum"}:
        return node.get("minimum", float("-inf")), node.get("maximum", float("inf")), False
    return None


def _type(kind: str):
    return {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        # as jsonschema: 2.0 is an integer
        "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer()),
    }[kind]


def _compile(node: dict, ref):
    checks = []
    unknown = set(node) - ANNOTATIONS - {
        "$ref", "type", "properties", "required", "additionalProperties", "propertyNames",
        "items", "anyOf", "not", "pattern", "minimum", "maximum", "minLength", "maxLength",
        "minItems", "maxItems"}
    if unknown:
        raise ValueError(f"results.conform: teach it {sorted(unknown)}")
    if "$ref" in node:
        checks.append(ref(node["$ref"].rsplit("/", 1)[1]))
    if "type" in node:
        kinds = [node["type"]] if isinstance(node["type"], str) else node["type"]
        plain = tuple({"object": dict, "array": list, "string": str, "null": type(None)}[k]
                      for k in kinds if k in ("object", "array", "string", "null"))
        tests = [_type(k) for k in kinds if k not in ("object", "array", "string", "null")]
        if not tests:
            checks.append(lambda v: isinstance(v, plain))
        elif not plain and len(tests) == 1:
            checks.append(tests[0])
        else:
            checks.append(lambda v: isinstance(v, plain) or any(t(v) for t in tests))
    number = _type("number")
    bounds = _numeric(node, ref) if "$ref" not in node and ("minimum" in node or "maximum" in node) else None
    if bounds is not None and not bounds[2]:
        lo, hi = bounds[0], bounds[1]      # {"type": "number", minimum, maximum}: one test (NaN fails)
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi
    if "minimum" in node:
        lo = node["minimum"]
        checks.append(lambda v: not number(v) or v >= lo)
    if "maximum" in node:
        hi = node["maximum"]
        checks.append(lambda v: not number(v) or v <= hi)
    if "minLength" in node:
        shortest = node["minLength"]
        checks.append(lambda v: not isinstance(v, str) or len(v) >= shortest)
    if "maxLength" in node:
        longest = node["maxLength"]
        checks.append(lambda v: not isinstance(v, str) or len(v) <= longest)
    if "pattern" in node:
        search = re.compile(node["pattern"]).search
        checks.append(lambda v: not isinstance(v, str) or search(v) is not None)
    if "not" in node:
        inner = _compile(node["not"], ref)
        checks.append(lambda v: not inner(v))
    if "anyOf" in node:
        options = [_compile(n, ref) for n in node["anyOf"]]
        checks.append(lambda v: any(o(v) for o in options))
    if {"properties", "required", "additionalProperties", "propertyNames"} & set(node):
        checks.append(_object(node, ref))
    if {"items", "minItems", "maxItems"} & set(node):
        checks.append(_array(node, ref))
    if len(checks) == 1:
        return checks[0]

    def every(v):
        for c in checks:
            if not c(v):
                return False
        return True
    return every


def _object(node: dict, ref):
    props = {k: _compile(n, ref) for k, n in node.get("properties", {}).items()}
    required = tuple(node.get("required", ()))
    extra = node.get("additionalProperties", True)
    extra = (lambda v: True) if extra is True else (lambda v: False) if extra is False else _compile(extra, ref)
    names = _compile(node["propertyNames"], ref) if "propertyNames" in node else None

    def check(v):
        if not isinstance(v, dict):
            return True
        if any(k not in v for k in required):
            return False
        for k, x in v.items():
            if names is not None and not names(k):
                return False
            if not (props[k] if k in props else extra)(x):
                return False
        return True
    return check


def _array(node: dict, ref):
    items = _compile(node["items"], ref) if "items" in node else None
    lo, hi = node.get("minItems", 0), node.get("maxItems")
    numeric = _numeric(node["items"], ref) if "items" in node else None
    allowed = {int, float} | ({type(None)} if numeric and numeric[2] else set())

    def check(v):
        if not isinstance(v, list):
            return True
        if len(v) < lo or (hi is not None and len(v) > hi):
            return False
        if numeric is not None and len(v) > 16 and set(map(type, v)) <= allowed:
            xs = [x for x in v if x is not None] if numeric[2] else v
            return not xs or (numeric[0] <= min(xs) and max(xs) <= numeric[1])
        if numeric is not None and all(type(x) in allowed for x in v):
            # a few numbers (a cell's repetitions): each compared to the bounds (NaN fails)
            return all(x is None or numeric[0] <= x <= numeric[1] for x in v)
        if items is not None:
            for x in v:
                if not items(x):
                    return False
        return True
    return check
