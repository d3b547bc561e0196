"""RESULTS arguments -> runs. A run is one argument (a records.jsonl file or a directory
holding one): its name tells apart the same configuration measured in several runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vnetbench.errors import VnetbenchError
from vnetbench.results.record import Result, from_dict

RECORDS = "records.jsonl"
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
    if path.is_dir():
        if not (path / RECORDS).is_file():
            raise VnetbenchError(f"{path}: no {RECORDS} in this directory; {FIX}")
        return path / RECORDS
    if not path.is_file():
        raise VnetbenchError(f"{path}: no such file or directory; {FIX}")
    return path


def read(path: Path) -> list[Result]:
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise VnetbenchError(f"{path}: cannot read ({exc.__class__.__name__}); {FIX}") from None
    records = [record(path, no, line) for no, line in enumerate(lines, 1) if line.strip()]
    if not records:
        raise VnetbenchError(f"{path}: no records (empty file); {FIX}")
    return records


def record(path: Path, no: int, line: str) -> Result:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as exc:
        raise VnetbenchError(f"{path}:{no}: not a JSON line ({exc.msg}); {FIX}") from None
    missing = [k for k in ("test", "labels", "samples") if not isinstance(d, dict) or k not in d]
    if missing or not {"vswitch", "network"} <= set(d["labels"]):
        what = f"'{missing[0]}'" if missing else "labels 'vswitch'/'network'"
        raise VnetbenchError(f"{path}:{no}: not a vnetbench result record (no {what}); {FIX}")
    return from_dict(d)
