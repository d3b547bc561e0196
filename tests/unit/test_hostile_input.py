"""Property tests: any testbed file given to ``validate`` and any records file given to
``report`` ends in exit 0 or exit 2 with one line of bounded length, within a time
and memory bound (issue 14). Documents come from the published schema and are
mutated (types, sizes, nesting, names, keys, YAML aliases, encodings)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile_docs import ALIAS_BOMBS, VALID, encoded, mutated, to_yaml
from vnetbench import cli

ROOT = Path(__file__).resolve().parents[2]
RECORDS = (ROOT / "tests/data/report/records.jsonl").read_text().splitlines()
MAX_LINE = 600            # characters of the one error line
MAX_SECONDS = 30.0        # per command: catches hangs and blow-ups, tolerates a loaded 2-core CI box
MAX_RSS_KB = 1024 * 1024  # high-water mark of this process: 1 GiB
SETTINGS = dict(deadline=None, derandomize=False, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example])


def run(argv) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - t0


def assert_one_line_outcome(code, out, err, seconds, ok_prefix=None):
    assert code in (0, 2), (code, out[:300], err[:300])
    assert seconds < MAX_SECONDS, f"{seconds:.1f} s"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < MAX_RSS_KB
    if code == 2:
        assert out == "" and err.startswith("vnetbench: error: "), err[:300]
        assert err.count("\n") == 1 and err.endswith("\n") and len(err) <= MAX_LINE + 1, err[:300]
        assert err[:-1].isprintable(), repr(err[:300])
    elif ok_prefix is not None:
        assert err == "" and out.startswith(ok_prefix) and out.count("\n") == 1, out[:300]


def validate(data: bytes):
    with tempfile.NamedTemporaryFile("wb", suffix=".yaml") as f:
        f.write(data)
        f.flush()
        result = run(["testbed", "validate", f.name])
        if result[3] > 3 and os.environ.get("HOSTILE_SLOW_DIR"):   # keep slow inputs to look at
            Path(os.environ["HOSTILE_SLOW_DIR"], f"slow-{result[3]:.0f}s-{time.time_ns()}.yaml").write_bytes(data)
        assert_one_line_outcome(*result, ok_prefix=f"{f.name}: ok: ")
    return result


@settings(max_examples=200, **SETTINGS)
@given(mutated(), st.data())
def test_any_testbed_file_validates_or_fails_in_one_line(case, data):
    kind, doc = case
    validate(data.draw(encoded(to_yaml(doc))))


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(ALIAS_BOMBS), st.data())
def test_alias_bombs_deep_nesting_and_huge_numbers(text, data):
    validate(data.draw(encoded(text)))


@settings(max_examples=30, **SETTINGS)
@given(VALID)
def test_schema_generated_documents_pass_the_schema_stage(doc):
    """The generator is not only producing garbage, and the loader agrees with the
    published schema: unmutated documents fail, if at all, on cross-field checks."""
    code, out, err, seconds = validate(to_yaml(doc).encode())
    assert not any(w in err for w in ("is not of type", "unknown field", "is a required property"))


# --- records given to `vnetbench report` -------------------------------------

ODD = st.one_of(st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
                st.sampled_from([None, True, "", "x", [], {}, [1, "a"], {"a": [None]}, 10**5000]),
                st.text(max_size=20))


@st.composite
def mutated_records(draw) -> bytes:
    records = [json.loads(line) for line in draw(st.lists(st.sampled_from(RECORDS), min_size=1,
                                                          max_size=3))]
    for _ in range(draw(st.integers(0, 3))):
        rec = draw(st.sampled_from(records))
        node, key = _random_slot(rec, random.Random(draw(st.integers(0, 10**6))))
        how = draw(st.sampled_from(["replace", "delete", "nest"]))
        if how == "delete" and isinstance(node, dict):
            node.pop(key, None)
        elif how == "nest":
            value = 1
            for _ in range(draw(st.sampled_from([5, 100, 3000]))):
                value = [value]
            node[key] = value
        else:
            node[key] = draw(ODD)
    lines = []
    for rec in records:
        try:
            lines.append(json.dumps(rec))
        except (ValueError, RecursionError):
            lines.append("[" * 3000)
    text = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        return draw(encoded(text))
    return text.encode()


def _random_slot(rec, rng):
    """A (container, key) pair somewhere in the record."""
    node, key = {"r": rec}, "r"
    for _ in range(rng.randint(1, 4)):
        child = node[key]
        if isinstance(child, dict) and child:
            node, key = child, rng.choice(list(child))
        elif isinstance(child, list) and child:
            node, key = child, rng.randrange(len(child))
        else:
            break
    return node, key


@settings(max_examples=50, **SETTINGS)
@given(mutated_records())
def test_any_records_file_reports_or_fails_in_one_line(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_bytes(data)
        code, out, err, seconds = run(["report", str(path), "--out", str(Path(tmp) / "out")])
        assert_one_line_outcome(code, out, err, seconds)
        if code == 2:
            assert not (Path(tmp) / "out").exists()


def test_report_refuses_fifo_and_devices_at_once(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        code, out, err, seconds = run(["report", str(path), "--out", str(tmp_path / "o")])
        assert code == 2 and "not a regular file" in err and seconds < 5
