"""Render the chosen formats in memory first, then write each file atomically
(temporary file + rename) so a failed or interrupted report leaves no half file."""

from __future__ import annotations

import os
import time
from pathlib import Path

from vnetbench.errors import VnetbenchError
from vnetbench.report import charts, html, load, table, text

FORMATS = {"html": "report.html", "md": "report.md", "csv": "report.csv"}


def render(runs: list, formats=tuple(FORMATS), functional=()) -> dict:
    """{file name: content} for the formats asked for; ``functional``: (source, Matrix)
    of functional matrices for the HTML page."""
    model = table.build(runs)
    make = {"html": lambda: html.page(runs, model, charts.charts(model), functional=functional),
            "md": lambda: text.markdown(model), "csv": lambda: text.csv_text(model)}
    return {FORMATS[f]: make[f]() for f in formats}


def write(files: dict, out: Path) -> list[Path]:
    try:
        out.mkdir(parents=True, exist_ok=True)
        return [atomic_write(out / name, content) for name, content in files.items()]
    except OSError as exc:
        raise VnetbenchError(f"{out}: cannot write the report ({exc.strerror or exc}); "
                             f"choose a writable directory with --out") from None


def atomic_write(path: Path, content: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")   # same directory: rename is atomic
    try:
        tmp.write_text(content)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def default_out(arguments) -> Path:
    """The first RESULTS directory, else results/report-<time>."""
    first = Path(arguments[0])
    return first if first.is_dir() else Path("results") / time.strftime("report-%Y%m%d-%H%M%S")


def functional_matrices(arguments) -> list:
    """(path, Matrix) of each RESULTS directory's matrix.json or functional/matrix.json
    (read as hostile input: vnetbench.functional.matrix_file; a bad one is one line)."""
    from vnetbench.functional import matrix_file
    found = []
    for arg in arguments:
        for path in (Path(arg) / "matrix.json", Path(arg) / "functional" / "matrix.json"):
            if os.path.lexists(path):      # a FIFO, a directory, a dangling link: refused by the reader
                found.append((path, matrix_file.read(path)))
    return found


def report(arguments, out: Path | None = None, formats=tuple(FORMATS)) -> list[Path]:
    runs = load.load(arguments)
    return write(render(runs, formats, functional_matrices(arguments)),
                 out or default_out(arguments))
