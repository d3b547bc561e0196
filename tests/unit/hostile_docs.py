"""Hypothesis strategies for hostile input: documents generated from the published
testbed JSON Schema (a small interpreter of the keywords it uses), then mutated
in type, size, nesting, names, YAML aliases and encoding."""

from __future__ import annotations

import json
import math
import string

import yaml
from hypothesis import strategies as st

from vnetbench.testbed.loader import schema

SCHEMA = schema()
NAMES = st.sampled_from(["h1", "h2", "vnet1", "red", "a", "same", "cross", "x-1"])


def from_schema(node: dict, depth: int = 0) -> st.SearchStrategy:
    """Values valid for ``node`` (pattern-bound strings drawn from names that match)."""
    if "$ref" in node:
        return from_schema(_resolve(node["$ref"]), depth)
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "oneOf" in node:
        return st.one_of([from_schema(n, depth) for n in node["oneOf"]])
    kind = node.get("type")
    if kind == "object":
        props = node.get("properties", {})
        required = node.get("required", [])
        optional = [k for k in props if k not in required]
        return st.fixed_dictionaries(
            {k: from_schema(props[k], depth + 1) for k in required},
            optional={k: from_schema(props[k], depth + 1) for k in optional})
    if kind == "array":
        lo, hi = node.get("minItems", 0), min(node.get("maxItems", 4), 4)
        return st.lists(from_schema(node["items"], depth + 1), min_size=lo, max_size=max(lo, hi),
                        unique=node.get("uniqueItems", False))
    if kind == "boolean":
        return st.booleans()
    if kind == "number":
        return st.floats(node.get("minimum", -1e9), node.get("maximum", 1e9))
    if kind == "integer":
        return st.integers(node.get("minimum", -2**31), min(node.get("maximum", 2**32), 2**32))
    if kind == "string":
        if node.get("format") == "ipv4":
            return st.sampled_from(["198.19.1.10", "198.19.1.2", "10.0.0.1", "198.18.128.5", "198.19.1.254"])
        if "pattern" in node and "/" in node["pattern"]:
            return st.sampled_from(["198.19.1.0/24", "198.19.2.0/24", "10.0.0.0/16", "198.18.0.0/24", "198.18.128.0/24"])
        return NAMES
    raise NotImplementedError(f"hostile_docs.from_schema: teach it {node}")


def _resolve(ref: str) -> dict:
    node = SCHEMA
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


VALID = from_schema(SCHEMA)

ODD_SCALARS = st.one_of(
    st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1500.0, 0.0, 101.0, True, False, None, "", "1500", 10**40, -1]),
    st.text(max_size=30),
)
BAD_NAMES = st.one_of(
    st.sampled_from(["h1\n", "h1\r", "h\x00", "h\u2028", "\ufeffh1", "h1 ", "H1", "1h", "h" * 25,
                     "é", "h\x1b[31m", "-h"]),
    st.builds(lambda n: "a" * n, st.integers(25, 200_000)),
    st.text(string.printable + "\x00\x7f\u200b", min_size=1, max_size=40),
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _replace(doc, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc.get(head), rest, value)}
    out = list(doc)
    out[head] = _replace(doc[head], rest, value)
    return out


@st.composite
def mutated(draw, base=VALID) -> tuple[str, object]:
    """(kind of mutation, document) from a valid document."""
    doc = draw(base)
    paths = list(_paths(doc))
    path = draw(st.sampled_from(paths))
    kind = draw(st.sampled_from(["none", "type", "name", "size", "nesting", "key", "delete"]))
    if kind == "type":
        doc = _replace(doc, path, draw(st.one_of(ODD_SCALARS, st.lists(ODD_SCALARS, max_size=3),
                                                  st.dictionaries(st.text(max_size=5), ODD_SCALARS, max_size=2))))
    elif kind == "name":
        named = [p for p in paths if p and p[-1] in ("name", "host", "vnet")] or [("name",)]
        doc = _replace(doc, draw(st.sampled_from(named)), draw(BAD_NAMES))
    elif kind == "size":
        n = draw(st.sampled_from([300, 2000, 5000]))
        item = draw(st.sampled_from([{"name": "h"}, {"placement": "same-host"}, {"name": "v"}]))
        field = draw(st.sampled_from(["hosts", "vnets", "pairs", "vms"]))
        doc = {**doc, field: [{**item, **({"name": f"n{i}"} if "name" in item else {})}
                              for i in range(n)]} if isinstance(doc, dict) else doc
    elif kind == "nesting":
        value = draw(st.integers(0, 3))
        for _ in range(draw(st.sampled_from([10, 40, 200]))):
            value = [value] if draw(st.booleans()) else {"a": value}
        doc = _replace(doc, path, value)
    elif kind == "key" and isinstance(doc, dict):
        doc = {**doc, draw(st.one_of(st.integers(), st.sampled_from([None, True, 1.5]))): 1,
               draw(st.sampled_from(["frob", "Name", "vswitch "])): 2}
    elif kind == "delete" and path:
        parent = path[:-1]
        node = doc
        for p in parent:
            node = node[p]
        if isinstance(node, dict):
            doc = _replace(doc, parent, {k: v for k, v in node.items() if k != path[-1]})
    return kind, doc


def to_yaml(doc) -> str:
    try:
        return yaml.safe_dump(doc, default_flow_style=None, allow_unicode=True, width=1 << 30)
    except (yaml.YAMLError, RecursionError):
        return json.dumps(doc, default=str)


ALIAS_BOMBS = [
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    + "".join(f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    + "vswitch: ovs\nnetwork: {type: vxlan}\n",
    "vswitch: &v ovs\nnetwork: &n {type: vxlan}\nhosts: &h [{name: h1}]\nname: *v\n",   # harmless
    "vswitch: ovs\nnetwork: &n {type: vxlan, x: *n}\n",                                 # undefined
    "vswitch: ovs\nnetwork: {type: vxlan}\nhosts: &h [*h]\n",                          # recursive
    "vswitch: ovs\nnetwork: {type: vxlan}\n" + "x: " + "[" * 5000 + "]" * 5000 + "\n",
    "vswitch: ovs\nnetwork: {type: vxlan, underlay_mtu: " + "9" * 6000 + "}\n",
    "vswitch: ovs\nnetwork: {type: vxlan, underlay_mtu: 1e400}\n",
    "vswitch: !!python/object:os.system ovs\nnetwork: {type: vxlan}\n",
    "vswitch: ovs\nnetwork: {type: vxlan}\n? [a, b]\n: 1\n",
    "vswitch: ovs\nnetwork: {type: vxlan}\n2001-01-01: 1\nname: 2001-01-01\n",
]


@st.composite
def encoded(draw, text: str) -> bytes:
    """``text`` as bytes: UTF-8 mostly, else another encoding, a BOM, junk or a cut."""
    how = draw(st.sampled_from(["utf8"] * 6 + ["utf16", "latin1", "bom", "junk", "cut", "nul"]))
    data = text.encode("utf-8")
    if how == "utf16":
        return text.encode("utf-16")
    if how == "latin1":
        return text.encode("latin-1", errors="replace") + b"\xe9\xff"
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "junk":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if how == "cut":
        return data[:draw(st.integers(0, len(data)))]
    if how == "nul":
        return data.replace(b"\n", b"\n\x00", 1)
    return data


def finite(x) -> bool:
    return not isinstance(x, float) or math.isfinite(x)
