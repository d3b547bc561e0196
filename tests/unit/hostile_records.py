"""Hypothesis strategies for hostile result records and run directories: records
generated from the published record schema (a small interpreter of its keywords, as
hostile_docs does for testbed files), real records from tests/data, then mutated in type,
size, nesting, numbers (NaN, Infinity, 1e400, integers too large for a float), text
(control characters, terminal escapes, 2 MB labels), version and encoding; run
directories with a matrix.json that is empty, garbage, binary, deep or of the wrong shape;
the same run given twice or copied under another name."""

from __future__ import annotations

import json
import string
from pathlib import Path

from hypothesis import strategies as st

from hostile_docs import encoded
from vnetbench.results.load import schema

SCHEMA = schema()
ROOT = Path(__file__).resolve().parents[2]
REAL = [line for name in ("report", "capacity") for line in
        (ROOT / f"tests/data/{name}/records.jsonl").read_text().splitlines() if line.strip()]
SAFE_TEXT = st.text(string.ascii_letters + string.digits + "-_/ .", min_size=1, max_size=12)
LABELS = st.sampled_from(["ovs", "linuxbridge", "vxlan", "vlan", "same-host", "cross-host", "p=5",
                          "ovs", "flat", "geneve", "x"])
BIG = "__BIG_NUMBER__"      # replaced by a literal JSON cannot hold in a float


def from_schema(node: dict, depth: int = 0) -> st.SearchStrategy:
    """Values valid for ``node`` of the record schema."""
    if "$ref" in node:
        return from_schema(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]], depth)
    if "anyOf" in node:
        return st.one_of([from_schema(n, depth) for n in node["anyOf"]])
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or ["object"]
    options = []
    for kind in kinds:
        if kind == "null":
            options.append(st.none())
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "integer":
            options.append(st.integers(int(node.get("minimum", -10**6)), int(min(node.get("maximum", 10**6), 10**6))))
        elif kind == "number":
            options.append(st.floats(max(node.get("minimum", -1e6), -1e6), min(node.get("maximum", 1e6), 1e6)))
        elif kind == "string":
            options.append(LABELS if "not" in node else SAFE_TEXT)
        elif kind == "array":
            item = from_schema(node.get("items", {"type": "integer"}), depth + 1)
            options.append(st.lists(item, min_size=node.get("minItems", 0),
                                    max_size=max(node.get("minItems", 0), min(node.get("maxItems", 3), 3))))
        elif kind == "object":
            props = node.get("properties", {})
            required = node.get("required", [])
            if depth > 4:
                options.append(st.fixed_dictionaries({k: from_schema(props[k], depth + 1) for k in required}))
                continue
            options.append(st.fixed_dictionaries(
                {k: from_schema(props[k], depth + 1) for k in required},
                optional={k: from_schema(props[k], depth + 1) for k in props if k not in required}))
    return st.one_of(options)


GENERATED = from_schema(SCHEMA).map(lambda d: {**d, "test": d["test"] if d["test"] != "fault" else "x"})
RECORD = st.one_of(st.sampled_from(REAL).map(json.loads), GENERATED)

ODD = st.one_of(
    st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([None, True, "", "x", [], {}, [1, "a"], {"a": [None]}, 10**30, -10**19, 2**1024,
                     BIG, "1.5", "ovs\n", "\x1b[31mred\x1b[0m", "a\u2028b", "\x00", "x" * 3000,
                     1e308, -1e308, 5e-324, 0, 0.0, [1e308, 1e308], 9]),
    st.text(max_size=20),
)


def _slots(node, path=()):
    yield path
    if len(path) > 8:
        return
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _slots(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:5]):
            yield from _slots(v, path + (i,))


def _set(node, path, value):
    if not path:
        return value
    if isinstance(node, dict):
        return {**node, path[0]: _set(node[path[0]], path[1:], value)}
    out = list(node)
    out[path[0]] = _set(node[path[0]], path[1:], value)
    return out


@st.composite
def mutated_record(draw) -> dict:
    rec = draw(RECORD)
    for _ in range(draw(st.integers(0, 2))):
        path = draw(st.sampled_from(list(_slots(rec))))
        how = draw(st.sampled_from(["odd", "odd", "delete", "nest", "label", "version", "wide"]))
        if how == "odd":
            rec = _set(rec, path, draw(ODD))
        elif how == "delete" and path:
            parent = path[:-1]
            node = rec
            for p in parent:
                node = node[p]
            if isinstance(node, dict):
                rec = _set(rec, parent, {k: v for k, v in node.items() if k != path[-1]})
        elif how == "nest":
            value = 1
            for _ in range(draw(st.sampled_from([5, 30, 3000]))):
                value = [value] if draw(st.booleans()) else {"a": value}
            rec = _set(rec, path, value)
        elif how == "label" and isinstance(rec, dict) and isinstance(rec.get("labels"), dict):
            key = draw(st.sampled_from(["vswitch", "network", "placement", "point", "routing", "x\ny"]))
            value = draw(st.sampled_from(["a" * 129, "a" * 2_000_000, "ovs\x1b]0;pwned\x07", "b\nc", "ok",
                                          "|pipe|", "<b>&amp;</b>"]))
            rec = {**rec, "labels": {**rec["labels"], key: value}}
        elif how == "version" and isinstance(rec, dict):
            rec = {**rec, "schema": draw(st.sampled_from([0, 1, 2, 99, "1", 1.0, None, True]))}
        elif how == "wide" and isinstance(rec, dict) and isinstance(rec.get("samples"), dict):
            key = draw(st.sampled_from(["gbps", "rtt_mean_ms", "cpu_pct", "loss_pct"]))
            n = draw(st.sampled_from([0, 1, 1000, 100_001]))
            rec = {**rec, "samples": {**rec["samples"], key: [1e18] * n}}
    return rec


def dumps(rec) -> str:
    try:
        text = json.dumps(rec)
    except (ValueError, RecursionError):
        return "[" * 3000
    return text.replace(f'"{BIG}"', "1e400")


@st.composite
def records_file(draw) -> bytes:
    """A records.jsonl: mostly sound lines, some hostile; sometimes badly encoded."""
    recs = draw(st.lists(st.one_of(RECORD, mutated_record()), min_size=1, max_size=4))
    lines = [dumps(r) for r in recs]
    if draw(st.integers(0, 9)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(
            ["", "garbage", "{}", "[]", '{"test": "a", "test": "b"}', "\x00" * 10, "NaN"])))
    text = "\n".join(lines) + "\n"
    return draw(encoded(text)) if draw(st.integers(0, 4)) == 0 else text.encode()


MATRIX_CELL = {"vswitch": "ovs", "network": "vxlan", "row": "isolation.same-ips", "status": "Pass",
               "value": 1.0, "unit": "ms", "detail": "ok", "extra": {}, "label": "",
               "expected": None, "expected_by": None, "measurement": {}}


@st.composite
def matrix_file(draw) -> bytes | None:
    """A run directory's matrix.json: None (absent), sound, or hostile."""
    how = draw(st.sampled_from(["absent", "absent", "sound", "empty", "garbage", "binary", "deep",
                                "type", "cell", "huge"]))
    if how == "absent":
        return None
    if how == "sound":
        return json.dumps({"backend": "netns", "cells": [MATRIX_CELL]}).encode()
    if how == "empty":
        return draw(st.sampled_from([b"", b"  \n"]))
    if how == "garbage":
        return draw(st.sampled_from([b"garbage", b"{", b'{"cells": [}', b"NaN", b'{"cells": [], "cells": 1}']))
    if how == "binary":
        return draw(st.binary(min_size=1, max_size=64))
    if how == "deep":
        return b"[" * draw(st.sampled_from([30, 3000, 100_000]))
    if how == "type":
        return json.dumps(draw(st.sampled_from([[], 1, "x", {"cells": 3}, {"cells": [1]}, {"cells": {}}]))).encode()
    if how == "cell":
        key = draw(st.sampled_from(sorted(MATRIX_CELL)))
        return dumps({"cells": [{**MATRIX_CELL, key: draw(ODD)}]}).encode()
    return json.dumps({"cells": [MATRIX_CELL] * draw(st.sampled_from([10, 10_001]))}).encode()



FLOAT_EDGES = st.sampled_from([0.0, 5e-324, 1e-300, -1e-300, 1e-7, 1e18, -1e18, -1.0, 0.5, 3.0, 1e17])
INT_EDGES = st.sampled_from([0, 1, -1, 2, 10**18, -(10**18), 65536, 3])
SCALE = [line for line in (ROOT / "tests/data/capacity/records.jsonl").read_text().splitlines() if line.strip()]


@st.composite
def extreme_numbers(draw) -> bytes:
    """Real scale and battery records with numbers (loads, CPU, rates, counts) replaced by
    admitted extremes: 0, denormals, ±1e18, negatives -- what divides, sums and sorts."""
    lines = draw(st.lists(st.sampled_from(SCALE + REAL), min_size=1, max_size=6))
    p = draw(st.sampled_from([0.05, 0.3, 1.0]))
    rnd = draw(st.randoms(use_true_random=False))

    def swap(node, key=""):
        if isinstance(node, dict):
            return {k: (v if k in ("schema", "started", "finished") else swap(v, k)) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v, key) for v in node]
        if isinstance(node, bool) or not isinstance(node, (int, float)) or rnd.random() > p:
            return node
        return draw(INT_EDGES) if isinstance(node, int) else draw(FLOAT_EDGES)
    return ("\n".join(json.dumps(swap(json.loads(line))) for line in lines) + "\n").encode()
