"""Per-test expectations a user declares (``vnetbench functional --expect FILE``): the
verdict each matrix row should have on a kind, or on one kind/network. A measured cell
that differs fails its test -- and so the run -- even without ``--strict``; a cell that
meets it passes, even a Fail the user expects (a known finding). The matrix shows each
cell against it.

    expect:
      "*":                       # every kind
        isolation.broadcast: Pass
      ovs-openflow:
        isolation.broadcast: Fail          # known: VNF floods broadcast
      ovs/vxlan:                 # one kind on one network type (wins over the kind)
        feature.encapsulation: Pass
"""

from __future__ import annotations

from vnetbench.errors import VnetbenchError
from vnetbench.functional.verdict import Status
from vnetbench.inputs import InputError, check_tree, decode, excerpt, parse_yaml, read_bytes
from vnetbench.testbed.model import NetType, VSwitchKind

MAX_BYTES = 256 * 1024
STATUSES = [s.value for s in Status if s is not Status.ERROR]


class ExpectFileError(VnetbenchError):
    """The expectations file is unreadable or names something that does not exist."""


class Expectations:
    """{key: {row: Status}} with keys ``*``, ``<kind>`` or ``<kind>/<network>``."""

    def __init__(self, rules: dict, source: str = ""):
        self.rules, self.source = rules, source

    def status(self, kind: str, network: str, row: str) -> Status | None:
        """The most specific rule: kind/network, then kind, then ``*``."""
        for key in (f"{kind}/{network}", kind, "*"):
            if row in self.rules.get(key, {}):
                return self.rules[key][row]
        return None

    def to_dict(self) -> dict:
        return {"source": self.source,
                "expect": {k: {r: s.value for r, s in rows.items()} for k, rows in self.rules.items()}}


def load(path: str) -> Expectations:
    """The file's expectations; one clear error naming the file and field otherwise."""
    try:
        doc = parse_yaml(decode(read_bytes(path, MAX_BYTES)))
        check_tree(doc)
        return Expectations(_rules(doc), str(path))
    except InputError as exc:
        raise ExpectFileError(f"{path}: {exc}") from None


def _rules(doc) -> dict:
    from vnetbench.functional.matrix import ROW
    if not isinstance(doc, dict) or set(doc) != {"expect"}:
        raise InputError("(top level)", "must be one mapping 'expect:'",
                         "write 'expect: {<kind>: {<row id>: <verdict>}}'")
    if not isinstance(doc["expect"], dict):
        raise InputError("expect", "must map kinds to rows", "write '<kind>: {<row id>: <verdict>}'")
    rules = {}
    for key, rows in doc["expect"].items():
        where = f"expect.{key}"
        _check_key(key, where)
        if not isinstance(rows, dict):
            raise InputError(where, "must map row ids to verdicts", "write '<row id>: <verdict>'")
        for row, status in rows.items():
            if row not in ROW:
                raise InputError(where, f"unknown row {excerpt(row)}",
                                 f"use one of: {', '.join(ROW)}")
            if status not in STATUSES:
                raise InputError(f"{where}.{row}", f"{excerpt(status)} is not a verdict",
                                 f"use one of: {', '.join(STATUSES)}")
        rules[key] = {row: Status(status) for row, status in rows.items()}
    return rules


def _check_key(key: str, where: str) -> None:
    kinds, types = [k.value for k in VSwitchKind], [t.value for t in NetType]
    kind, _, network = key.partition("/")
    if key == "*" or (kind in kinds and (not network or network in types)):
        return
    raise InputError(where, f"{excerpt(key)} is not a kind",
                     f"use '*', a kind ({', '.join(kinds)}) or <kind>/<network> "
                     f"({', '.join(types)})")
