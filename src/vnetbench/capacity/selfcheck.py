"""A profile ``vnetbench capacity`` built, checked as ``vnetbench plan`` will read it,
before it is written: a profile its own schema or plan refuses (a network ``bogus``, an
empty or multi-line vSwitch name, a capacity of 0 from a host that reported 0 CPUs, a
negative one from a negative CPU figure) must never be written and reported as done.

The refusal is one line naming the field of the profile, the records it came from
(file and record number, with their family, kind and network) and the fix: the
records are what is wrong, so that is where the user has to look.
"""

from __future__ import annotations

import re

from vnetbench import inputs
from vnetbench.capacity import files, profile
from vnetbench.errors import TestbedFileError, VnetbenchError
from vnetbench.testbed.loader import check_schema

_CELL = re.compile(r"^cells\[(\d+)\]")


def check(doc: dict, runs) -> None:
    """Raise one VnetbenchError when ``doc`` (built from ``runs``' records) would not read
    back through ``files.load_profile``."""
    where = "the profile"
    try:
        try:
            inputs.check_tree(doc)
        except inputs.InputError as exc:
            raise TestbedFileError(where, exc.where, exc.problem, "") from None
        check_schema(doc, files.schema("capacity-profile"), where, "schemas/capacity-profile.schema.json")
        files.check_profile(doc, where)
    except TestbedFileError as exc:
        raise VnetbenchError(f"{_origin(doc, exc.where, runs)}: the profile built from them fails "
                             f"as plan reads it, {exc.where or '(top level)'}: "
                             f"{inputs.one_line(exc.problem, 120)} (nothing written); fix or leave out "
                             "those records and run 'vnetbench capacity' again") from None


def _origin(doc: dict, where: str, runs) -> str:
    """The records behind the field ``where``: those of its cell (the first), or
    every run's file for a field outside the cells."""
    m = _CELL.match(where or "")
    if m is None or int(m.group(1)) >= len(doc.get("cells", ())):
        return "the records of " + ", ".join(_show(run.path) for run in runs[:3]) + (
            f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    cell = doc["cells"][int(m.group(1))]
    found, total = [], 0
    for run in runs:
        for i, r in enumerate(run.records):
            key = profile.cell_key(r)
            if key is None or key[0] != cell.get("vswitch") or key[1] != cell.get("network"):
                continue
            total += 1
            if not found:
                found.append(f"{_show(run.path)} record {i + 1} ({inputs.excerpt(r.test, 24)}, "
                             f"vswitch {inputs.excerpt(key[0], 30)}, network {inputs.excerpt(key[1], 30)})")
    if not found:     # pragma: no cover -- a cell has records
        return f"the records of cell {inputs.excerpt(cell.get('vswitch'), 30)}/{inputs.excerpt(cell.get('network'), 30)}"
    return found[0] + (f" and {total - 1} more like it" if total > 1 else "")


def _show(path) -> str:
    """The path's end (its file name matters most), one line."""
    if path is None:
        return "records given in memory"
    text = inputs.one_line(str(path), 400)
    return text if len(text) <= 60 else "..." + text[-57:]
