"""Result records (``records.jsonl``) -> ``Result`` objects: the one loader of records.

Every reader of records -- ``report``, ``capacity`` (profile building), ``reproduce
--from``, ``compare`` reading back what its Rally task wrote, the scale and functional
readers -- loads them here, so a record is judged one way everywhere and a reader may
trust the types it gets. Records are untrusted input (edited by hand, merged from
several runs, copied between machines), so:

* the file: a regular file of at most ``MAX_BYTES``, UTF-8 (``vnetbench.inputs``);
* each line: JSON with no duplicate key, nested at most ``MAX_DEPTH`` levels, every
  number finite and within ``±MAX_ABS`` (``NaN``, ``Infinity``, ``1e400`` and integers
  too large for a float are refused; with that bound no sum, mean or sum of squares over
  a 32 MiB file can overflow a float);
* the record: the published JSON Schema (``schemas/record.schema.json``), versioned as
  records are (``results.record.SCHEMA_VERSION``; a record without the field is version
  1, the first): a record of a version this vnetbench does not read is refused with the
  version named. The schema caps labels at 128 characters and names at 64, which bounds
  what a table header or a chart legend can cost;
* text: a control character, newline or terminal escape in an *identity* -- the test,
  a metric name, a label's key or value -- is **refused at load** (they name rows and
  columns in every format); in *free text* elsewhere (provenance, an N/A reason, a
  saturation's why, a parameter's reason) it is **escaped at load** (``\\x1b`` becomes the four characters),
  so no renderer, Markdown or terminal, can ever print one raw.

A bad record is one ``VnetbenchError`` line: ``FILE:LINE: FIELD: problem; fix``.
``read_json`` reads a run directory's other JSON files (a functional ``matrix.json``)
with the same limits.
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jsonschema

from vnetbench import inputs
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt
from vnetbench.results import conform
from vnetbench.results.record import SCHEMA_VERSION, Result

RECORDS = "records.jsonl"
MAX_BYTES = 32 * 1024 * 1024        # one records file
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # every file of one command together
MAX_RECORDS = 50_000                # records of one command together (real ones are ~2 KB: the
                                    # byte caps bind first; 32 MiB of tiny records would not)
MAX_DEPTH = 24                 # a record is 7 levels deep (extra.repetitions[].cpu.hosts.h.components)
MAX_ABS = 1e18                 # 1e18 x 4M values x 1e18: far below a float's 1.8e308
MAX_ITEMS = 100_000            # values in one list (repetitions, a repetition's RTT echoes)
MAX_VALUES = 1_000_000         # numbers and keys in one record (what a report sorts and sums for a cell)
READ = range(1, SCHEMA_VERSION + 1)     # the record versions this vnetbench reads
PUBLISHED = "schemas/record.schema.json"
FIX = "pass a records.jsonl written by vnetbench (or the directory of a vnetbench compare run)"
# what a $defs entry of the schema asks for, in a message's words
WANT = {"number": f"a finite number within ±{MAX_ABS:g}", "sample": f"a number within ±{MAX_ABS:g} or null",
        "label": "a single-line string of at most 128 characters",
        "name": "a single-line name of 1 to 64 characters",
        "scalar": "a single-line string (at most 128 characters), a number, true/false or null",
        "value": "a string (at most 2,000 characters), a number, true/false or null",
        "text": "a string of at most 2,000 characters",
        "time": "a Unix time in seconds (0 to 1e11)"}


@dataclass(frozen=True)
class Run:
    name: str            # shown in column labels when several runs are compared
    path: Path | None    # the records file (None: records given in memory)
    records: tuple


class Problem(Exception):
    """What is wrong with one line or document: (field, problem, fix); the readers turn it
    into their one-line VnetbenchError."""

    def __init__(self, field: str, problem: str, fix: str = FIX):
        super().__init__(problem)
        self.field, self.problem, self.fix = field, problem, fix


def load(arguments) -> list[Run]:
    """One Run per argument, in order; names made unique by suffixing #2, #3... Together
    at most MAX_TOTAL_BYTES and MAX_RECORDS (the bounds of README's promises)."""
    runs, seen, size, count = [], {}, 0, 0
    for arg in arguments:
        path = records_path(Path(arg))
        name = (path.absolute().parent.name if path.name == RECORDS else path.stem) or "-"
        name = inputs.one_line(name, 64)
        seen[name] = seen.get(name, 0) + 1
        name += f"#{seen[name]}" if seen[name] > 1 else ""
        try:
            size += path.stat().st_size
        except OSError:
            pass                # read() says why it cannot be read
        if size > MAX_TOTAL_BYTES:
            raise VnetbenchError(f"{show(path)}: the records given together pass {MAX_TOTAL_BYTES // 1024 // 1024} MiB; "
                                 "give fewer runs at once")
        records = read(path, MAX_RECORDS - count)
        count += len(records)
        runs.append(Run(name, path, tuple(records)))
    return runs


def records_path(path: Path) -> Path:
    try:
        if path.is_dir():
            if not (path / RECORDS).is_file():
                raise VnetbenchError(f"{show(path)}: no {RECORDS} in this directory; {FIX}")
            return path / RECORDS
        if not path.exists():
            raise VnetbenchError(f"{show(path)}: no such file or directory; {FIX}")
    except (OSError, ValueError):      # a name too long, a NUL byte
        raise VnetbenchError(f"{show(path)}: cannot be read as a path; {FIX}") from None
    return path


def show(path) -> str:
    """A path as an error line shows it: control characters escaped, at most 120 characters."""
    return inputs.one_line(str(path), 120)


def read(path: Path, limit: int = MAX_RECORDS) -> list[Result]:
    """Every record of a records file, in order; the first bad one refused in one line;
    more than ``limit`` records refused before any is parsed."""
    try:
        # lines end at newlines only (as editors number them): a U+2028 inside a string stays
        lines = inputs.decode(inputs.read_bytes(path, MAX_BYTES)).split("\n")
    except inputs.InputError as exc:
        raise VnetbenchError(f"{show(path)}: {exc.problem}; {FIX}") from None
    if sum(1 for line in lines if line.strip()) > limit:
        raise VnetbenchError(f"{show(path)}: more than {MAX_RECORDS:,} records given together"
                             f"{'' if limit == MAX_RECORDS else ' (with the runs before it)'}; "
                             "give fewer runs at once or split the file")
    records = [record(path, no, line) for no, line in enumerate(lines, 1) if line.strip()]
    if not records:
        raise VnetbenchError(f"{show(path)}: no records (empty file); {FIX}")
    return records


def record(path, no: int, line: str) -> Result:
    """One line -> a Result, or VnetbenchError ``FILE:LINE: FIELD: problem; fix``."""
    try:
        d = parse_json(line)
        plain = _plain(line)
        _identify(d)
        _version(d)
        _check(d)
    except Problem as bad:
        where = f"{bad.field}: " if bad.field else ""
        raise VnetbenchError(inputs.one_line(f"{show(path)}:{no}: {where}{bad.problem}; {bad.fix}")) from None
    labels = d["labels"]
    escape = (lambda node: node) if plain else _escaped
    if isinstance(labels.get("params"), dict):      # free text beside the names mode and test
        labels = {**labels, "params": escape(labels["params"])}
    return Result(test=d["test"], labels=labels, samples=d["samples"],
                  provenance=escape(d.get("provenance", {})), started=d.get("started", 0.0),
                  finished=d.get("finished", 0.0), extra=escape(d.get("extra", {})))


def _plain(line: str) -> bool:
    """True when no string of the line's data can hold a control character, judged on its
    text: a JSON string holds one only raw or as an escape (a backslash)."""
    return "\\" not in line and inputs.CONTROL.search(line) is None


class _Numbers:
    """json.loads' number hooks that note a number the walk must judge: an integer of 19
    digits or more (1e18 and up), a float beyond ±MAX_ABS or not finite, NaN or Infinity."""

    def __init__(self):
        self.odd = False

    def int(self, text: str):
        if len(text) > 18:
            self.odd = True
        return int(text)

    def float(self, text: str):
        x = float(text)
        if not -MAX_ABS <= x <= MAX_ABS:
            self.odd = True
        return x

    def constant(self, text: str):
        self.odd = True
        return float(text)


def parse_json(text: str):
    """JSON text -> data: no duplicate key, depth, finite numbers within ±MAX_ABS (Problem).

    The walk that names the field at fault is skipped when it provably finds nothing (a
    record's usual shape): every number passed the hooks (_Numbers), at most MAX_DEPTH
    brackets in all (so nothing nests deeper), at most MAX_VALUES and MAX_ITEMS characters
    (so no more numbers and keys, and no longer list)."""
    numbers = _Numbers()
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=numbers.int,
                         parse_float=numbers.float, parse_constant=numbers.constant)
    except Problem:
        raise
    except json.JSONDecodeError as exc:
        raise Problem("", f"not a JSON line ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:    # integers of 4,300+ digits, deep nesting
        problem = "nested too deeply" if isinstance(exc, RecursionError) else excerpt(str(exc), 80)
        raise Problem("", f"not a usable JSON line ({problem})") from None
    if (numbers.odd or len(text) > min(MAX_VALUES, MAX_ITEMS)
            or text.count("{") + text.count("[") > MAX_DEPTH):
        _walk(doc, "", 0, [MAX_VALUES])
    return doc


def _no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise Problem(inputs.one_line(key, 60), "the key appears twice in one object",
                   "keep one (JSON readers disagree on which one wins)")
    return d


def _walk(node, where: str, depth: int, budget: list) -> None:
    """Depth, sizes and numbers, naming the field (lists of numbers checked in C)."""
    if depth > MAX_DEPTH:
        raise Problem(where or "(top level)", f"nested deeper than {MAX_DEPTH} levels",
                   "a record is at most 7 levels deep; " + FIX)
    if isinstance(node, dict):
        budget[0] -= len(node)
        for key, value in node.items():
            if isinstance(value, (dict, list, float, int)):
                _walk(value, f"{where}.{key}" if where else key, depth + 1, budget)
    elif isinstance(node, list):
        if len(node) > MAX_ITEMS:
            raise Problem(inputs.one_line(where, 120) or "(top level)", f"a list of {len(node):,} values",
                       f"at most {MAX_ITEMS:,} values a list; split the measurement into records")
        numbers = [x for x in node if isinstance(x, (int, float))]
        budget[0] -= len(numbers)
        if budget[0] < 0:
            raise Problem(inputs.one_line(where, 120), f"the record holds more than {MAX_VALUES:,} numbers and keys",
                       "split the measurement into several records")
        if numbers and not _finite(numbers):
            i = next(i for i, x in enumerate(node) if isinstance(x, (int, float)) and not _finite([x]))
            _walk(node[i], f"{where}[{i}]", depth + 1, budget)
        if len(numbers) != len(node):
            for i, value in enumerate(node):
                if isinstance(value, (dict, list)):
                    _walk(value, f"{where}[{i}]", depth + 1, budget)
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and not _finite([node]):
        raise Problem(inputs.one_line(where, 120) or "(top level)",
                   f"{excerpt(node)} is not a finite number within ±{MAX_ABS:g}",
                   "give a measured value (or null where the record allows it)")


def _finite(numbers: list) -> bool:
    """Every number finite and within ±MAX_ABS (fsum would raise on an infinity; max/min run in C)."""
    try:
        lo, hi = min(numbers), max(numbers)
        return -MAX_ABS <= lo and hi <= MAX_ABS      # NaN compares False
    except (OverflowError, TypeError):
        return False


def _identify(d) -> None:
    """The one check before the schema: is this a result record at all?"""
    missing = [k for k in ("test", "labels", "samples") if not isinstance(d, dict) or k not in d]
    if missing:
        raise Problem("", f"not a vnetbench result record (no '{missing[0]}')")
    if not isinstance(d["labels"], dict) or not {"vswitch", "network"} <= set(d["labels"]):
        raise Problem("", "not a vnetbench result record (no labels 'vswitch'/'network')")


def _version(d: dict) -> None:
    """The record's version must be one this code reads (READ). When SCHEMA_VERSION moves
    on, READ keeps the older versions whose records still read (lifted in ``record`` if a
    field changed), and the rest are refused naming their version, never half-read."""
    version = d.get("schema", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise Problem("schema", f"{excerpt(version)} is not a record schema version",
                   f"records of this vnetbench say \"schema\": {SCHEMA_VERSION}")
    if version not in READ:
        raise Problem("schema", f"record schema version {version} is newer than this vnetbench reads "
                   f"(versions {READ.start} to {READ.stop - 1})",
                   "read it with the vnetbench that wrote it (provenance.vnetbench) or a newer one")


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The packaged record schema (``make schema`` copies it to ``schemas/``)."""
    return json.loads(resources.files("vnetbench").joinpath("schemas/record.schema.json").read_text())


@functools.lru_cache(maxsize=1)
def _validator():
    return jsonschema.Draft202012Validator(schema())


@functools.lru_cache(maxsize=1)
def _conforms():
    return conform.compile_schema(schema())


def _check(d: dict) -> None:
    """The schema's verdict (compiled: fast), explained by jsonschema when it is no."""
    if _conforms()(d):
        return
    errors = _validator().iter_errors(_sketch(d))
    error = jsonschema.exceptions.best_match(itertools.islice(errors, 100))
    if error is None:       # the two validators disagree: still refused, never crashed
        raise Problem("(record)", f"does not conform to {PUBLISHED}", f"see {PUBLISHED}")
    raise Problem(_path(error.absolute_path) or "(top level)", *_explain(error))


def _sketch(d: dict) -> dict:
    """What jsonschema explains: the record with each long list of numbers (samples, RTT
    echoes) cut to its first, lowest and highest values -- _walk has seen every number, and
    the schema bounds no such list's length, so its items' type and bounds are judged
    exactly by those three. jsonschema walks 100,000 values in about a second."""
    def cut(node):
        if isinstance(node, dict):
            return {k: cut(v) for k, v in node.items()}
        if isinstance(node, list):
            if len(node) > 8 and all(type(x) in (int, float) for x in node):
                return [node[0], min(node), max(node)]
            return [cut(v) for v in node]
        return node
    return cut(d)


def _path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return inputs.one_line(out, 120)


def _want(node) -> str:
    defs = schema()["$defs"]
    for name, words in WANT.items():
        if node == defs[name]:
            return words
    if node.get("$ref", "").startswith("#/$defs/"):
        return WANT.get(node["$ref"].rsplit("/", 1)[1], "see " + PUBLISHED)
    kinds = node.get("type")
    if kinds:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        words = " or ".join("an object" if k == "object" else "a list" if k == "array" else
                            "an integer" if k == "integer" else k if k == "null" else f"a {k}" for k in kinds)
        return words
    return "see " + PUBLISHED


def _explain(error) -> tuple[str, str]:
    """A jsonschema error -> (problem, fix) in the words of a one-line message."""
    kind, inst, value = error.validator, error.instance, error.validator_value
    if kind == "required":
        return inputs.one_line(error.message, 120), f"add it ({PUBLISHED})"
    if kind == "not" and isinstance(inst, str):
        bad = inputs.CONTROL.search(inst)
        if bad is not None:
            return (f"{excerpt(inst)} contains the control character U+{ord(bad.group()):04X}",
                    "remove it (names and labels are single-line text)")
    if kind in ("maxLength", "minLength"):
        return (f"{excerpt(inst)} is {len(inst)} characters long",
                f"use {'at most' if kind == 'maxLength' else 'at least'} {value} characters")
    if kind in ("minimum", "maximum"):
        return (f"{excerpt(inst)} is {'below the minimum' if kind == 'minimum' else 'above the maximum'} {value:g}",
                f"use a value {'>=' if kind == 'minimum' else '<='} {value:g}")
    if kind in ("minItems", "maxItems"):
        return f"a list of {len(inst)} items", f"give {'at least' if kind == 'minItems' else 'at most'} {value}"
    if kind == "enum":
        return (f"{excerpt(inst)} is not allowed", "use one of: " + inputs.one_line(", ".join(map(str, value)), 200))
    if kind == "additionalProperties":
        return f"unknown field {excerpt(sorted(set(inst) - set(error.schema.get('properties', {})))[0])}", \
            "allowed fields: " + ", ".join(sorted(error.schema.get("properties", {})))
    if kind in ("type", "anyOf", "oneOf", "not"):
        return f"{excerpt(inst)} is not {_want(error.schema)}", f"give {_want(error.schema)} ({PUBLISHED})"
    return inputs.one_line(error.message, 120), f"see {PUBLISHED}"


def _escaped(node):
    """Free text with its control characters shown as escapes (see the module's doc)."""
    if isinstance(node, str):
        return _text(node) if inputs.CONTROL.search(node) else node
    if isinstance(node, dict):
        return {(_text(k) if inputs.CONTROL.search(k) else k): _escaped(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_escaped(v) for v in node] if any(isinstance(v, (str, dict, list)) for v in node) else node
    return node


def _text(s: str) -> str:
    return inputs.CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), s)


def validate(doc, schema_doc: dict, path, fix: str) -> None:
    """``doc`` (from read_json) against a run file's schema; one line naming the file, the
    field and ``fix`` for the best of its first errors."""
    errors = jsonschema.Draft202012Validator(schema_doc).iter_errors(doc)
    error = jsonschema.exceptions.best_match(itertools.islice(errors, 100))
    if error is not None:
        problem, how = _explain(error)
        raise VnetbenchError(inputs.one_line(f"{show(path)}: {_path(error.absolute_path) or '(top level)'}: "
                                             f"{problem}; {fix if how.startswith('see ') else how}"))


def escaped(node):
    """``node`` with control characters in its strings shown as escapes (free text)."""
    return _escaped(node)


def read_json(path, cap: int, fix: str):
    """A run directory's JSON file (e.g. a functional matrix.json) -> data, with the records'
    limits (size, UTF-8, depth, finite numbers, no duplicate key); one line naming the file
    and ``fix`` otherwise."""
    try:
        text = inputs.decode(inputs.read_bytes(path, cap))
        if not text.strip():
            raise Problem("", "is empty")
        return parse_json(text)
    except inputs.InputError as exc:
        raise VnetbenchError(inputs.one_line(f"{show(path)}: {exc.problem}; {fix}")) from None
    except Problem as bad:
        where = f"{bad.field}: " if bad.field else ""
        problem = bad.problem.replace("not a JSON line", "not JSON").replace("not a usable JSON line",
                                                                             "not usable JSON")
        raise VnetbenchError(inputs.one_line(f"{show(path)}: {where}{problem}; {fix}")) from None
