"""Property tests: hostile workload, hosts and capacity-profile files, generated from the
published schemas and then broken in one known way (a key given twice, an unknown key,
a non-finite or out-of-range number, a wrong type, a list past the schema's maximum, a
control character), are *refused* by ``vnetbench plan``: exit 2, one line on stderr
naming the file and the field, no output file left, within a time bound (issue 51).
test_capacity_files.py holds the weaker property (any outcome but a crash) for random
mutations; this one holds that nonsense is never accepted. Also: every numeric flag, and
``vnetbench capacity`` never writing a profile plan would refuse."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from test_capacity_files import HOSTS, WORKLOAD
from test_capacity_plan import PROFILE
from test_hostile_input import SETTINGS, assert_one_line_outcome, run
from vnetbench.capacity import files

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("workload", "hosts", "capacity-profile")
SCHEMAS = {k: files.schema(k) for k in KINDS}
VALID = {"workload": WORKLOAD, "hosts": HOSTS, "capacity-profile": PROFILE}
NAMES = ["a", "b", "h", "ovs", "x-1"]
BOUND_S = 10.0            # per plan: generous for a loaded 2-core box; typical is < 1 s
QUICK = dict(SETTINGS, max_examples=25, phases=[Phase.explicit, Phase.reuse, Phase.generate])


# --- documents from a schema, with the schema node of every leaf -------------------

def _resolve(root: dict, node: dict) -> dict:
    while "$ref" in node:
        target = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


@st.composite
def generated(draw, root: dict, node: dict | None = None, path=(), leaves=None):
    """(document valid for ``node``, [(path, schema node) of every leaf and object])."""
    node = _resolve(root, root if node is None else node)
    leaves = [] if leaves is None else leaves
    if "oneOf" in node:
        node = _resolve(root, next(n for n in node["oneOf"] if n.get("type") != "null"))
    kind = node.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    leaves.append((path, node))
    if "const" in node:
        return node["const"], leaves
    if "enum" in node:
        return draw(st.sampled_from(node["enum"])), leaves
    if kind == "object":
        props = node.get("properties", {})
        out = {}
        for key, sub in props.items():
            if key in node.get("required", ()) or (sub.get("$ref") != "#/$defs/machine" and draw(st.booleans())):
                out[key] = draw(generated(root, sub, path + (key,), leaves))[0]
        return out, leaves
    if kind == "array":
        n = draw(st.integers(node.get("minItems", 0), min(node.get("maxItems", 3), 3)))
        return [draw(generated(root, node["items"], path + (i,), leaves))[0] for i in range(n)], leaves
    if kind == "boolean":
        return draw(st.booleans()), leaves
    if kind in ("number", "integer"):
        lo = node.get("minimum", node.get("exclusiveMinimum", 0) + 1)
        hi = min(node.get("maximum", 10**6), 10**6)
        return draw(st.integers(math.ceil(lo), int(hi))), leaves
    if kind == "string":
        return draw(st.sampled_from(NAMES)), leaves
    return None, leaves


# --- one break per document, with what the refusal must name ----------------------

def _at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _set(doc, path, value):
    doc = json.loads(json.dumps(doc))
    if not path:
        return value
    _at(doc, path[:-1])[path[-1]] = value
    return doc


def where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@st.composite
def broken(draw, kind: str):
    """(YAML text, what the one line must contain): a document of ``kind`` generated from
    its schema (or the tests' valid one) with exactly one thing wrong."""
    doc, leaves = draw(st.one_of(generated(SCHEMAS[kind]), st.just((VALID[kind], None))))
    if leaves is None:
        leaves = draw(generated(SCHEMAS[kind]))[1]
        leaves = [(p, n) for p, n in leaves if _exists(doc, p)]
    how = draw(st.sampled_from(["duplicate", "unknown", "nonfinite", "range", "type", "huge", "control"]))
    objects = [(p, n) for p, n in leaves if isinstance(_at(doc, p), dict) and n.get("additionalProperties") is False]
    numbers = [(p, n) for p, n in leaves if p and n.get("type") in ("number", "integer", ["integer", "null"])
               and isinstance(_at(doc, p), (int, float)) and not isinstance(_at(doc, p), bool)]
    strings = [(p, n) for p, n in leaves if p and isinstance(_at(doc, p), str) and "enum" not in n]
    if how == "duplicate":
        path, _ = draw(st.sampled_from(objects))
        node = _at(doc, path)
        key = draw(st.sampled_from(sorted(node))) if node else "name"
        flow = json.dumps({key: 1, **{k: v for k, v in node.items() if k != key}, "\u0000": 0})
        flow = flow.replace(', "\\u0000": 0', f', "{key}": 2').replace('{"\\u0000": 0', f'{{"{key}": 2')
        text = yaml.safe_dump(_set(doc, path, "@@HERE@@"), width=1 << 30).replace("'@@HERE@@'", flow)
        if not path:
            text = flow + "\n"
        return text, [f"key '{key}' is given twice"]
    if how == "unknown":
        path, node = draw(st.sampled_from(objects))
        known = sorted(node.get("properties", {})) or ["name"]
        typo = draw(st.sampled_from(known)) + draw(st.sampled_from(["u", "_", "s"]))
        value = _at(doc, path)
        return yaml.safe_dump(_set(doc, path, {**value, typo: 1})), [where(path) or "(top level)", "unknown field", typo]
    if how in ("nonfinite", "range") and numbers:
        path, node = draw(st.sampled_from(numbers))
        if how == "nonfinite":
            literal = draw(st.sampled_from([".nan", ".inf", "-.inf", ".NaN", "1.0e+400", "-1.0e+999"]))
            text = yaml.safe_dump(_set(doc, path, "@@HERE@@"), width=1 << 30).replace("'@@HERE@@'", literal)
            return text, [where(path), "finite"]
        lo = node.get("minimum", node.get("exclusiveMinimum"))
        hi = node.get("maximum")
        choices = ([lo - 1 if isinstance(lo, int) else -1.5] if lo is not None else []) + \
                  ([hi * 10 + 1] if hi is not None else [])
        if choices:
            return yaml.safe_dump(_set(doc, path, draw(st.sampled_from(choices)))), [where(path)]
    if how == "type" and numbers:
        path, _ = draw(st.sampled_from(numbers))
        bad = draw(st.sampled_from(["12", [1], {"mean": 1}, True]))
        return yaml.safe_dump(_set(doc, path, bad)), [where(path)]
    if how == "huge":
        key, node = max(((k, n) for k, n in SCHEMAS[kind]["properties"].items() if "maxItems" in n),
                        key=lambda kn: kn[1]["maxItems"])
        n = draw(st.sampled_from([node["maxItems"] + 1, 20_000, 100_000]))
        item = (_at(doc, (key,)) or [None])[0] if isinstance(doc.get(key), list) else None
        line = "- " + json.dumps(item if item is not None else 1) + "\n"
        others = {k: v for k, v in doc.items() if k != key}
        rest = yaml.safe_dump(others) if others else ""     # not "{}": a flow map, then a block key
        return rest + f"{key}:\n" + line * n, [(f"{key}: more than {node['maxItems']} items",
                                                 "is larger than 4096 KiB")]
    if strings:
        path, _ = draw(st.sampled_from(strings))
        value = draw(st.sampled_from(["a\nb", "ovs\x1b[31m", "x\u2028y", "h\r", "\x00"]))
        return yaml.safe_dump(_set(doc, path, value)), [where(path)]
    return yaml.safe_dump({**doc, "frob": 1}) if isinstance(doc, dict) else "frob: 1\n", ["unknown field"]


def _exists(doc, path) -> bool:
    try:
        _at(doc, path)
        return True
    except (KeyError, IndexError, TypeError):
        return False


# --- running plan ------------------------------------------------------------------

def plan(tmp: Path, texts: dict, *flags):
    names = {"workload": "workload.yaml", "hosts": "hosts.yaml", "capacity-profile": "profile.yaml"}
    for kind, name in names.items():
        (tmp / name).write_text(texts.get(kind) or yaml.safe_dump(VALID[kind]))
    out, handoff = tmp / "plan.json", tmp / "handoff.txt"
    for p in (out, handoff):
        p.unlink(missing_ok=True)
    t0 = time.monotonic()
    result = run(["plan", str(tmp / "workload.yaml"), str(tmp / "hosts.yaml"), "--capacity",
                  str(tmp / "profile.yaml"), "--format", "json", "--out", str(out), "--openstack",
                  str(handoff), *flags])
    assert time.monotonic() - t0 < BOUND_S, f"{time.monotonic() - t0:.1f} s"
    code, _, err, _ = result
    if code == 2:
        assert not out.exists() and not handoff.exists(), "an output file left after a refusal"
    return result


def _refused(tmp, kind, case):
    text, must = case
    code, out, err, seconds = plan(tmp, {kind: text})
    assert_one_line_outcome(code, out, err, seconds)
    assert code == 2, (kind, text[:300], out[:300])
    name = {"workload": "workload.yaml", "hosts": "hosts.yaml", "capacity-profile": "profile.yaml"}[kind]
    assert f"{name}: " in err, err
    for piece in must:           # a tuple: any one of them
        assert any(p in err for p in ((piece,) if isinstance(piece, str) else piece)), (piece, err)
    assert re.search(r"; \S", err), f"no fix given: {err}"


@settings(**QUICK)
@given(broken("workload"))
def test_a_broken_workload_is_refused_in_one_line(tmp_path_factory, case):
    _refused(tmp_path_factory.mktemp("w"), "workload", case)


@settings(**QUICK)
@given(broken("hosts"))
@example(("hosts:\n" + '- {"name": "h", "cores": 2, "memory_mb": 2048, "vswitch": "b"}\n' * 1025,
          [("hosts: more than 1024 items", "is larger than 4096 KiB")]))   # nothing but the list
def test_a_broken_hosts_file_is_refused_in_one_line(tmp_path_factory, case):
    _refused(tmp_path_factory.mktemp("h"), "hosts", case)


@settings(**QUICK)
@given(broken("capacity-profile"))
def test_a_broken_profile_is_refused_in_one_line(tmp_path_factory, case):
    _refused(tmp_path_factory.mktemp("p"), "capacity-profile", case)


def test_the_untouched_files_plan(tmp_path):
    code, out, err, _ = plan(tmp_path, {})
    assert code == 0 and err == "" and (tmp_path / "plan.json").exists() and (tmp_path / "handoff.txt").exists()


def test_a_profile_point_at_load_0_and_infinite_capacity_with_openstack(tmp_path):
    prof = json.loads(json.dumps(PROFILE))
    prof["cells"][0]["roles"]["tx"]["points"][0]["load_gbps"]["mean"] = 0
    _refused(tmp_path, "capacity-profile", (yaml.safe_dump(prof), ["cells[0].roles.tx.points[0].load_gbps.mean"]))
    for literal in (".inf", ".nan"):
        prof = json.loads(json.dumps(PROFILE))
        prof["cells"][0]["roles"]["tx"]["capacity_gbps"]["mean"] = "@@HERE@@"
        text = yaml.safe_dump(prof).replace("'@@HERE@@'", literal)
        _refused(tmp_path, "capacity-profile", (text, ["cells[0].roles.tx.capacity_gbps.mean", "finite"]))


def test_typos_in_a_profile_are_refused(tmp_path):
    for path, typo in ((("cells", 0), "tenant_mtuu"), (("cells", 0, "roles", "tx"), "dataplane_cpu")):
        prof = json.loads(json.dumps(PROFILE))
        _at(prof, path)[typo] = 1
        _refused(tmp_path, "capacity-profile", (yaml.safe_dump(prof), [where(path), "unknown field", typo]))


def test_a_100000_vm_workload_is_refused_for_its_size_at_once(tmp_path):
    text = "vms:\n" + "- {name: a, vcpus: 1, memory_mb: 1}\n" * 100_000
    t0 = time.monotonic()
    _refused(tmp_path, "workload", (text, ["vms: more than 4096 items", "limit"]))
    assert time.monotonic() - t0 < 5


# --- flags -------------------------------------------------------------------------

@settings(**dict(QUICK, max_examples=30))
@given(st.one_of(st.integers(-10**12, 10**12).map(str), st.sampled_from(
    ["nan", "inf", "-inf", "1e400", "5.5", "", " 5", "0x10", "5\n", "\x1b[31m", "९"]), st.text(max_size=8)))
def test_numeric_flags_are_checked_in_one_line(tmp_path_factory, value):
    tmp = tmp_path_factory.mktemp("f")
    code, out, err, seconds = plan(tmp, {}, "--seconds", value)
    assert_one_line_outcome(code, out, err, seconds)
    try:
        ok = 1 <= int(value) <= 3600
    except ValueError:
        ok = False
    assert code == (0 if ok else 2), (value, err)
    if not ok:
        assert "--seconds" in err


@settings(**dict(QUICK, max_examples=20))
@given(st.one_of(st.sampled_from(["br-data", "br:x", "a,b", "", "x" * 16, "br\n", "br\x1b[0m"]),
                 st.text(max_size=20)))
def test_the_bridge_flag_is_checked_in_one_line(tmp_path_factory, value):
    code, out, err, seconds = plan(tmp_path_factory.mktemp("b"), {}, "--bridge", value)
    assert_one_line_outcome(code, out, err, seconds)
    assert code == (0 if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}", value) else 2), (value, err)


# --- capacity never writes what plan refuses ---------------------------------------

RECORDS = (ROOT / "tests/data/capacity/records.jsonl").read_text().splitlines()
SCALE = [i for i, line in enumerate(RECORDS) if json.loads(line)["test"] == "scale"]


@st.composite
def bad_records(draw):
    """The recorded scale run with its labels or CPU figures changed as a hand-merged or
    foreign records file might have them."""
    recs = [json.loads(line) for line in RECORDS]
    for _ in range(draw(st.integers(1, 3))):
        rec = recs[draw(st.sampled_from(SCALE))]
        how = draw(st.sampled_from(["network", "vswitch", "cpus", "dataplane", "gbps"]))
        if how == "network":
            rec["labels"]["network"] = draw(st.sampled_from(["bogus", "", "VXLAN", "vxlan\n"]))
        elif how == "vswitch":
            rec["labels"]["vswitch"] = draw(st.sampled_from(["", "a\nb", "OVS", "x" * 30, "ovs\x1b[31m"]))
        else:
            value = draw(st.sampled_from([0, -1, -50.0, 1e-300, 1e300]))
            for rep in rec["extra"].get("repetitions") or []:
                for host in (rep.get("hosts") or {}).values():
                    if how == "cpus":
                        host["cpus"] = value if isinstance(value, int) else 1
                    elif how == "dataplane":
                        host["dataplane_pct"] = value
                for pair in rep.get("pairs") or []:
                    if how == "gbps":
                        pair["gbps"] = value
    return "\n".join(json.dumps(r) for r in recs) + "\n"


@settings(**dict(QUICK, max_examples=25))
@given(bad_records())
def test_capacity_writes_only_profiles_plan_reads(tmp_path_factory, text):
    tmp = tmp_path_factory.mktemp("c")
    (tmp / "records.jsonl").write_text(text)
    out = tmp / "profile.yaml"
    code, stdout, err, seconds = run(["capacity", str(tmp / "records.jsonl"), "--out", str(out)])
    assert_one_line_outcome(code, stdout, err, seconds)
    if code == 0:
        assert files.load_profile(out)["vnetbench_capacity"] == 1
    else:
        assert not out.exists()
        assert "records.jsonl" in err, err


def test_capacity_names_the_records_of_a_bogus_network(tmp_path):
    recs = [json.loads(line) for line in RECORDS]
    for i in SCALE:
        recs[i]["labels"]["network"] = "bogus"
    (tmp_path / "records.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    code, out, err, _ = run(["capacity", str(tmp_path / "records.jsonl"), "--out", str(tmp_path / "p.yaml")])
    assert code == 2 and not (tmp_path / "p.yaml").exists(), err
    assert "cells[1].network: 'bogus' is not allowed" in err and "fix or leave out those records" in err, err
    assert re.search(r"records\.jsonl record \d+ \('scale', vswitch '\w+', network 'bogus'\)", err), err


def test_testbed_files_refuse_duplicate_keys_by_the_same_loader(tmp_path):
    path = tmp_path / "tb.yaml"
    path.write_text("vswitch: ovs\nnetwork: {type: vxlan}\nvswitch: linuxbridge\n")
    code, out, err, _ = run(["testbed", "validate", str(path)])
    assert code == 2 and "tb.yaml: line 3 column 1: key 'vswitch' is given twice (first at line 1" in err, err


def _scale_changed(change) -> str:
    recs = [json.loads(line) for line in RECORDS]
    for i in SCALE:
        change(recs[i])
    return "\n".join(json.dumps(r) for r in recs) + "\n"


def _hosts_cpu(field, value):
    def change(rec):
        for rep in rec["extra"].get("repetitions") or []:
            for host in (rep.get("hosts") or {}).values():
                host[field] = value
    return change


@pytest.mark.parametrize("change,field", [
    (lambda r: r["labels"].update(network="bogus"), "network"),
    (lambda r: r["labels"].update(vswitch=""), "vswitch"),
    (lambda r: r["labels"].update(vswitch="a\nb"), "vswitch"),
    (_hosts_cpu("cpus", 0), "roles"),
    (_hosts_cpu("cpus", -2), "roles"),
    (_hosts_cpu("dataplane_pct", -30.0), "roles"),
])
def test_capacity_refuses_what_plan_would_refuse_and_writes_nothing(tmp_path, change, field):
    (tmp_path / "records.jsonl").write_text(_scale_changed(change))
    out = tmp_path / "p.yaml"
    code, stdout, err, seconds = run(["capacity", str(tmp_path / "records.jsonl"), "--out", str(out)])
    assert_one_line_outcome(code, stdout, err, seconds)
    assert code == 2 and not out.exists(), err
    # refused by the record loader (file:line: field) when the record itself breaks the
    # record schema, else by capacity's check of the profile it built, naming the records
    by_loader = re.search(r"records\.jsonl:\d+: (labels|extra)\.", err)
    assert by_loader or (re.search(r"records\.jsonl record \d+ \('scale'", err) and f".{field}" in err
                         and "fix or leave out those records" in err), err
