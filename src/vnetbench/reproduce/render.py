"""A seed reproduction for people (plain text, Markdown) and machines (JSON): per seed
row, the seed's figure beside the measured one for each system, the columns measured
beside them, and each of the seed's claims with agrees / differs / cannot tell here and
the reason."""

from __future__ import annotations

from vnetbench.reproduce.judge import AGREES, CANNOT, DIFFERS, RowResult
from vnetbench.reproduce.seed import Seed
from vnetbench.results.bound import NOTE as BOUND_NOTE

SIGN = {AGREES: "agrees", DIFFERS: "DIFFERS", CANNOT: "cannot tell here"}


def header(seed: Seed) -> list[str]:
    systems = ", ".join(f"{s} = {seed.where(s)}" for s in seed.systems)
    return [f"seed {seed.id}: \"{seed.title}\", {seed.table} ({seed.file})",
            f"systems: {systems}" + (f"; measured beside them: {', '.join(seed.beside)}" if seed.beside else "")]


def summary(results: list[RowResult]) -> str:
    verdicts = [v for r in results for v in r.verdicts]
    count = {s: sum(v.status == s for v in verdicts) for s in (AGREES, DIFFERS, CANNOT)}
    bound = sum(v.status == DIFFERS and v.reason.startswith("emulation-bound") for v in verdicts)
    return (f"{len(verdicts)} claims on {len(results)} rows: {count[AGREES]} agree, {count[DIFFERS]} "
            f"differ ({bound} of them emulation-bound), {count[CANNOT]} cannot be told here")


def _measured(r: RowResult, column: str) -> str:
    cell = r.cells.get(column)
    if cell is None:
        return "not run"
    return cell.text(r.row.metric) or "not measured"


def _cells(seed: Seed, r: RowResult) -> list[tuple[str, str]]:
    out = []
    for system in seed.systems:
        out.append((f"{system} (seed)", r.row.figures.get(system).show(r.row.unit)
                    if system in r.row.figures else "-"))
        out.append((f"{seed.where(system)} (here)", _measured(r, seed.where(system))))
    return out + [(f"{c} (here)", _measured(r, c)) for c in seed.beside]


def _claims(r: RowResult) -> list[str]:
    out = []
    for v in r.verdicts:
        measured = ", ".join(f"{n} {m:.3g}" for n, m in v.values)
        line = f"{SIGN[v.status]}: {v.claim.says}" + (f" [here: {measured}]" if measured else "")
        out.append(line + (f" -- {v.reason}" if v.reason else ""))
    return out


def plain(seed: Seed, results: list[RowResult]) -> str:
    lines = header(seed) + [summary(results), ""]
    for r in results:
        lines.append(f"{r.row.source} [{r.row.metric}, {r.row.placement}]")
        lines += [f"    {k:<32} {v}" for k, v in _cells(seed, r)]
        lines += [f"  {c}" for c in _claims(r)] or ["  (the seed states no claim on this row)"]
        lines.append("")
    return "\n".join(lines + [BOUND_NOTE]) + "\n"


def markdown(seed: Seed, results: list[RowResult]) -> str:
    cols = [k for k, _ in _cells(seed, results[0])] if results else []
    out = [f"# Reproducing seed {seed.id}", "", *[f"- {x}" for x in header(seed)], f"- {summary(results)}", "",
           "| row | placement | " + " | ".join(cols) + " |", "|" + "---|" * (2 + len(cols))]
    for r in results:
        out.append(f"| {r.row.source} [{r.row.metric}] | {r.row.placement} | " +
                   " | ".join(v.replace("|", "\\|") for _, v in _cells(seed, r)) + " |")
    out += ["", "## The seed's claims", ""]
    for r in results:
        out += [f"- **{r.row.id}** ({r.row.placement}): {c}" for c in _claims(r)]
    return "\n".join(out + ["", f"- {BOUND_NOTE}"]) + "\n"


def to_dict(seed: Seed, results: list[RowResult]) -> dict:
    def cell(r, column):
        c = r.cells.get(column)
        if c is None or not (c.record or c.na):
            return {"measured": None}
        if c.na:
            return {"measured": None, "not_applicable": c.na}
        s = c.spread(r.row.metric)
        return {"measured": s.mean if s else None, "lo": s.lo if s else None, "hi": s.hi if s else None,
                "spread": s.kind if s else None, "text": c.text(r.row.metric),
                "emulation_bound": [{"component": b.component, "peak_pct": b.peak_pct} for b in c.bound]}
    rows = []
    for r in results:
        rows.append({
            "id": r.row.id, "source": {"file": seed.file, "table": seed.table, "row": r.row.source},
            "test": r.row.test, "variable": r.row.variable, "placement": r.row.placement,
            "metric": r.row.metric, "unit": r.row.unit,
            "systems": {s: {"column": col, "path": (seed.paths or {}).get(s, "l2"),
                            "seed": vars(r.row.figures[s]) if s in r.row.figures else None,
                            **cell(r, seed.where(s))} for s, col in seed.systems.items()},
            "beside": {c: cell(r, c) for c in seed.beside},
            "claims": [{"says": v.claim.says, "kind": v.claim.kind, "systems": list(v.claim.systems),
                        "verdict": v.status, "reason": v.reason, "values": dict(v.values)}
                       for v in r.verdicts]})
    return {"seed": seed.id, "file": seed.file, "title": seed.title, "summary": summary(results), "rows": rows}
