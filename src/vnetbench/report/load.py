"""RESULTS arguments -> runs. A run is one argument (a records.jsonl file or a directory
holding one): its name tells apart the same configuration measured in several runs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from vnetbench import inputs
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt
from vnetbench.results.record import Result, from_dict

RECORDS = "records.jsonl"
MAX_BYTES = 32 * 1024 * 1024
FIX = "pass a records.jsonl written by vnetbench (or the directory of a vnetbench compare run)"


@dataclass(frozen=True)
class Run:
    name: str            # shown in column labels when several runs are compared
    path: Path | None    # the records file (None: records given in memory)
    records: tuple


def load(arguments) -> list[Run]:
    """One Run per argument, in order; names made unique by suffixing #2, #3..."""
    runs, seen = [], {}
    for arg in arguments:
        path = records_path(Path(arg))
        name = path.parent.name if path.name == RECORDS else path.stem
        seen[name] = seen.get(name, 0) + 1
        name += f"#{seen[name]}" if seen[name] > 1 else ""
        runs.append(Run(name, path, tuple(read(path))))
    return runs


def records_path(path: Path) -> Path:
    try:
        if path.is_dir():
            if not (path / RECORDS).is_file():
                raise VnetbenchError(f"{_show(path)}: no {RECORDS} in this directory; {FIX}")
            return path / RECORDS
        if not path.exists():
            raise VnetbenchError(f"{_show(path)}: no such file or directory; {FIX}")
    except (OSError, ValueError):      # a name too long, a NUL byte
        raise VnetbenchError(f"{_show(path)}: cannot be read as a path; {FIX}") from None
    return path


def _show(path) -> str:
    return inputs.one_line(str(path), 120)


def read(path: Path) -> list[Result]:
    try:
        lines = inputs.decode(inputs.read_bytes(path, MAX_BYTES)).splitlines()
    except inputs.InputError as exc:
        raise VnetbenchError(f"{_show(path)}: {exc.problem}; {FIX}") from None
    records = [record(path, no, line) for no, line in enumerate(lines, 1) if line.strip()]
    if not records:
        raise VnetbenchError(f"{path}: no records (empty file); {FIX}")
    return records


def record(path: Path, no: int, line: str) -> Result:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as exc:
        raise VnetbenchError(f"{_show(path)}:{no}: not a JSON line ({exc.msg}); {FIX}") from None
    except (ValueError, RecursionError) as exc:    # huge integers, deep nesting
        raise VnetbenchError(f"{_show(path)}:{no}: not a usable JSON line "
                             f"({excerpt(str(exc) or type(exc).__name__, 80)}); {FIX}") from None
    missing = [k for k in ("test", "labels", "samples") if not isinstance(d, dict) or k not in d]
    if missing or not isinstance(d["labels"], dict) or not {"vswitch", "network"} <= set(d["labels"]):
        what = f"'{missing[0]}'" if missing else "labels 'vswitch'/'network'"
        raise VnetbenchError(f"{_show(path)}:{no}: not a vnetbench result record (no {what}); {FIX}")
    problem = shape_problem(d)
    if problem:
        raise VnetbenchError(f"{_show(path)}:{no}: {problem}; {FIX}")
    return from_dict(d)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _timestamp(x) -> bool:
    return _number(x) and 0 <= x < 1e11       # dates print: before the year 5138


def shape_problem(d: dict) -> str:
    """What makes a record unusable by the report (wrong types), or ''."""
    labels = d["labels"]
    checks = [
        ("test", isinstance(d["test"], str) and d["test"] != "", "a test name"),
        ("samples", isinstance(d["samples"], dict), "an object {metric: [values]}"),
        ("provenance", isinstance(d.get("provenance", {}), dict), "an object"),
        ("extra", isinstance(d.get("extra", {}), dict), "an object"),
        ("started", _timestamp(d.get("started", 0.0)), "a Unix time"),
        ("finished", _timestamp(d.get("finished", 0.0)), "a Unix time"),
        ("labels.params", isinstance(labels.get("params", {}), dict), "an object"),
    ]
    checks += [(f"labels.{k}", isinstance(v, str), "a string") for k, v in labels.items()
               if k in ("vswitch", "network", "placement", "run_id", "point", "test", "pair", "path", "routing")]
    provenance = d.get("provenance")
    checks += [(f"provenance.{k}", isinstance(v, dict), "an object")
               for k, v in (provenance.items() if isinstance(provenance, dict) else ())
               if k in ("tools", "offloads", "pinning")]
    for field, ok, want in checks:
        if not ok:
            value = d
            for part in field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            return f"{field} is {excerpt(value)}, not {want}"
    na = (d.get("extra") or {}).get("not_applicable")
    if na is not None and not isinstance(na, str):
        return f"extra.not_applicable is {excerpt(na)}, not a string"
    for metric, values in d["samples"].items():
        if not isinstance(values, list) or not all(v is None or _number(v) for v in values):
            return (f"samples.{excerpt(metric, 30)} is {excerpt(values)}, not a list of finite "
                    "numbers (or null)")
    return ""
