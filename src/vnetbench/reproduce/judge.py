"""Does a measurement agree with what the seed says? Each claim of a seed row is checked on
the measured cells: *agrees* or *differs* only when the cells' uncertainty leaves no
doubt, else *cannot tell here*; a claim that differs carries its reason in one line:
the emulation-bound cells involved (computed, vnetbench.results.bound) before anything
the seed file states about the row (definition, model, this machine's kernel).

The uncertainty of a measured mean: its 95% CI over repetitions (>= 3), else the
repetitions' range (2), else none (1 repetition: the verdict says so). For RTT the
echoes' sd is jitter, not doubt about the mean, so the CI of the repetition means is
used where there is one."""

from __future__ import annotations

from dataclasses import dataclass

from vnetbench.report.table import Cell, Table
from vnetbench.reproduce.seed import Claim, Row, Seed, split

AGREES, DIFFERS, CANNOT = "agrees", "differs", "cannot tell here"


@dataclass(frozen=True)
class Value:
    """A measured mean with the interval it may lie in."""
    mean: float
    lo: float
    hi: float
    single: bool                # one repetition: no interval


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    status: str                 # AGREES | DIFFERS | CANNOT
    reason: str = ""            # for DIFFERS and CANNOT: why, one line
    values: tuple = ()          # the measured means the claim was judged on, per system


@dataclass(frozen=True)
class RowResult:
    row: Row
    cells: dict                 # column -> Cell (seed systems' and beside columns')
    verdicts: tuple


def value(cell: Cell, metric: str) -> Value | None:
    s = cell.spread(metric)
    if s is None or s.mean is None:
        return None
    if s.ci95 is not None:
        return Value(s.mean, s.mean - s.ci95, s.mean + s.ci95, False)
    if s.kind in ("range", "search") and s.lo is not None and s.hi is not None:
        return Value(s.mean, s.lo, s.hi, False)
    if s.kind == "sd" and s.lo is not None and s.repetitions > 1:   # RTT from 2 repetitions
        return Value(s.mean, s.lo, s.hi, False)
    return Value(s.mean, s.mean, s.mean, True)


def judge(seed: Seed, table: Table) -> list[RowResult]:
    return [judge_row(seed, row, table) for row in seed.rows]


def find_cells(seed: Seed, row: Row, table: Table) -> dict:
    """{where: Cell} of ROW's test, variable and placement for each of the seed's systems
    (``Seed.where``: a column, and a routed system's path) and columns beside them."""
    wheres = list(dict.fromkeys([*(seed.where(s) for s in seed.systems), *seed.beside]))
    out = {}
    for col in table.columns:
        for where in wheres:
            label, path = split(where)
            if col.label != label:
                continue
            placement = f"{row.placement} {path}" if path != "l2" else row.placement
            match = [r for r in table.rows if (r.test, r.variable, r.placement) == (row.test, row.variable, placement)]
            cell = next((table.cell(r, col) for r in match if table.cell(r, col).record), None)
            na = next((table.cell(r, col) for r in table.rows if r.test == row.test and table.cell(r, col).na), None)
            out[where] = cell or na or Cell()
    return out


def judge_row(seed: Seed, row: Row, table: Table) -> RowResult:
    cells = find_cells(seed, row, table)

    def by_system(r: Row, cs: dict) -> dict:
        return {s: cs.get(seed.where(s), Cell()) for s in seed.systems}
    verdicts = []
    for c in row.claims:
        other = None
        if c.than_row:
            other_row = seed.row(c.than_row)
            other = (other_row, by_system(other_row, find_cells(seed, other_row, table)))
        verdicts.append(check(c, row, by_system(row, cells), other))
    return RowResult(row, cells, tuple(verdicts))


def check(claim: Claim, row: Row, cells: dict, other: tuple | None = None) -> Verdict:
    """CELLS: seed system -> measured Cell. OTHER: (row, its cells) for a claim that
    compares a system here with the same system in another row (``than_row``)."""
    metric = claim.metric or row.metric
    operands = [(name, name, cells) for name in _involved(claim, row)]
    if other is not None:
        name, same = claim.systems[0], row.variable == other[0].variable
        at = lambda r: f"{r.variable}, {r.placement}" if same else r.variable  # noqa: E731 (seed 000: intra/inter)
        operands = [(f"{name} ({at(row)})", name, cells), (f"{name} ({at(other[0])})", name, other[1])]
    values, why = {}, {}
    for label, name, cs in operands:
        cell = cs.get(name, Cell())
        if cell.na:
            return Verdict(claim, CANNOT, f"{label}: N/A here ({cell.na})")
        v = value(cell, metric) if cell.record else None
        if v is None:
            return Verdict(claim, CANNOT, f"{label}: not measured")
        values[label], why[label] = v, cell
    status = _status(claim, values)
    shown = tuple((n, v.mean) for n, v in values.items())
    if status == DIFFERS:
        return Verdict(claim, DIFFERS, _why(list(values), row, why), shown)
    if status == CANNOT:
        return Verdict(claim, CANNOT, "the measured values' uncertainty overlaps: more repetitions "
                       "or longer trials would decide", shown)
    single = [n for n, v in values.items() if v.single]
    note = f"one repetition of {', '.join(single)}: no uncertainty to judge by" if single else ""
    return Verdict(claim, AGREES, note, shown)


def _involved(claim: Claim, row: Row) -> list[str]:
    """A highest/lowest claim compares with every system the seed has a figure of."""
    if claim.kind in ("highest", "lowest"):
        others = [n for n, f in row.figures.items() if n not in claim.systems and f.value is not None]
        return [*claim.systems, *others]
    return list(claim.systems)


def _status(claim: Claim, v: dict) -> str:
    names = list(v)
    if claim.kind in ("highest", "lowest"):
        x, others = v[names[0]], [v[n] for n in names[1:]]
        if not others:
            return CANNOT
        sign = 1 if claim.kind == "highest" else -1
        if all(_above(x, o, sign) for o in others):
            return AGREES
        if any(_above(o, x, sign) for o in others):
            return DIFFERS
        return CANNOT
    if claim.kind == "greater":
        x, y = v[names[0]], v[names[1]]
        f = claim.factor
        if x.lo > f * y.hi:
            return AGREES
        if x.hi <= f * y.lo:
            return DIFFERS
        return CANNOT
    if claim.kind == "about":
        top = max(abs(x.mean) for x in v.values()) or 1.0
        tol = claim.within_pct / 100 * top
        if max(x.mean for x in v.values()) - min(x.mean for x in v.values()) <= tol:
            return AGREES
        if max(x.lo for x in v.values()) - min(x.hi for x in v.values()) > tol:
            return DIFFERS
        return CANNOT
    results = []
    for name, limit in zip(claim.systems, claim.limits):
        x = v[name]
        ok, bad = (x.hi <= limit, x.lo > limit) if claim.kind == "at_most" else (x.lo >= limit, x.hi < limit)
        results.append(AGREES if ok else DIFFERS if bad else CANNOT)
    return DIFFERS if DIFFERS in results else CANNOT if CANNOT in results else AGREES


def _above(a, b, sign: int) -> bool:
    """A is clearly above B (sign 1) or clearly below it (sign -1)."""
    return a.lo > b.hi if sign == 1 else a.hi < b.lo


def _why(names: list, row: Row, cells: dict) -> str:
    bound = [(n, b) for n in names for b in cells.get(n, Cell()).bound]
    if bound:
        return "emulation-bound: " + "; ".join(f"{n}'s model: {b.text()}" for n, b in bound)
    if row.explain:
        return "; ".join(f"{k}: {v}" for k, v in row.explain.items())
    return "not explained here: a finding to look into"
