"""Output of the history commands: aligned text tables and JSON (files are written through
``vnetbench.outfiles``: checked first, atomic, only regular files replaced)."""

from __future__ import annotations

import json


def table(header, rows) -> str:
    """Columns padded to their widest cell (text cells left, numbers right)."""
    rows = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    def line(cells):
        return "  ".join(c.rjust(w) if _num(c) else c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line([str(h) for h in header]), line(["-" * w for w in widths]), *map(line, rows)])


def _num(text: str) -> bool:
    return text[:1].isdigit() or (text[:1] in "+-" and text[1:2].isdigit())


def fmt(x, digits=4) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}g}"


def pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def to_json(doc) -> str:
    return json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"
