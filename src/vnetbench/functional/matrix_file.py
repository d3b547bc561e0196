"""A run directory's functional ``matrix.json`` read back for ``vnetbench report``, as
hostile input: the records' limits (``vnetbench.results.load.read_json``: a regular file
of at most 4 MiB, UTF-8, JSON nested at most 24 levels, finite numbers, no duplicate
key), then the shape ``Matrix.from_dict`` needs (``SCHEMA``: known rows and verdicts,
single-line names, at most 10,000 cells). Free text (details, labels) comes back with
control characters escaped. Anything else is one line naming the file and the fix."""

from __future__ import annotations

from vnetbench.functional.matrix import ROW, Matrix
from vnetbench.functional.verdict import Status
from vnetbench.results import load

MAX_BYTES = 4 * 1024 * 1024
FIX = ("write it again with the functional run (tox -e functional) or move it out of the "
       "RESULTS directory")
_NAME = {"type": "string", "minLength": 1, "maxLength": 64, "not": {"$ref": "#/$defs/control"}}
_STATUS = {"enum": [s.value for s in Status]}
SCHEMA = {
    "type": "object", "required": ["cells"],
    "$defs": {"control": load.schema()["$defs"]["control"]},
    "properties": {
        "backend": _NAME,
        "rows": {"type": "array"},
        "expectations": {"type": "object", "properties": {"source": {"type": "string", "maxLength": 4096}}},
        "cells": {"type": "array", "maxItems": 10_000, "items": {
            "type": "object", "required": ["vswitch", "network", "row", "status", "value", "unit", "detail"],
            "properties": {
                "vswitch": _NAME, "network": _NAME, "row": {"enum": sorted(ROW)}, "status": _STATUS,
                "value": {"type": ["number", "null"]}, "unit": {"type": "string", "maxLength": 64},
                "detail": {"type": "string", "maxLength": 4096}, "label": {"type": "string", "maxLength": 128},
                "extra": {"type": ["object", "null"]}, "measurement": {"type": ["object", "null"]},
                "expected": {"anyOf": [_STATUS, {"type": "null"}]},
                "expected_by": {"enum": ["user", "docs", None]}}}},
    },
}


def read(path) -> Matrix:
    """The matrix of ``path``, or VnetbenchError in one line."""
    doc = load.read_json(path, MAX_BYTES, FIX)
    load.validate(doc, SCHEMA, path, FIX)
    return Matrix.from_dict(load.escaped(doc))
