"""Output of the history commands: aligned text tables, JSON, JUnit XML, written atomically.

There is no ``vnetbench.outfiles`` in this tree, so a file is written to a temporary name
beside its target and renamed over it: a reader (CI collecting the JUnit file) never sees
half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from vnetbench.errors import VnetbenchError
from vnetbench.inputs import one_line


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


def write(path, text: str, option: str) -> Path:
    """``text`` into ``path`` atomically; one line naming the option and file if it cannot be."""
    path = Path(path)
    try:
        if path.is_dir():
            raise OSError(21, "is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise VnetbenchError(f"{option} {one_line(str(path), 120)}: cannot be written ({exc.strerror}); "
                             "give a writable file path") from None
    return path
