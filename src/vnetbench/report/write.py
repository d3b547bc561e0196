"""Render the chosen formats in memory first, then write them all or none
(vnetbench.outfiles: checked before the work, temporaries renamed into place) so a failed
or interrupted report leaves no half file and no half of the set."""

from __future__ import annotations

import os
import time
from pathlib import Path

from vnetbench import outfiles
from vnetbench.report import charts, html, table, text
from vnetbench.results import load

FORMATS = {"html": "report.html", "md": "report.md", "csv": "report.csv"}


def render(runs: list, formats=tuple(FORMATS), functional=()) -> dict:
    """{file name: content} for the formats asked for; ``functional``: (source, Matrix)
    of functional matrices for the HTML page."""
    model = table.build(runs)
    make = {"html": lambda: html.page(runs, model, charts.charts(model), functional=functional),
            "md": lambda: text.markdown(model), "csv": lambda: text.csv_text(model)}
    return {FORMATS[f]: make[f]() for f in formats}


def write(files: dict, out: Path, flag: str = "--out", parents: bool = False) -> list[Path]:
    """FILES ({name: content}) into the directory OUT, all or none (``outfiles``)."""
    return outfiles.write_files(out, files, flag, parents=parents)


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


def report(arguments, out: str | Path | None = None, formats=tuple(FORMATS)) -> list[Path]:
    # the output checked before the records are read: a bad --out costs nothing
    target = outfiles.check_dir(default_out(arguments) if out is None else out, "--out",
                                [FORMATS[f] for f in formats], parents=out is None)
    runs = load.load(arguments)
    return write(render(runs, formats, functional_matrices(arguments)), target, parents=out is None)
