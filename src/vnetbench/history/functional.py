"""A functional matrix (``matrix.json`` of a functional run) as result records, so
``history add`` keeps functional runs beside the measured ones.

Each matrix cell (vSwitch kind, network type, row) becomes a record of test
``functional`` with those three as labels and two metrics: ``passed`` (1 for Pass, 0 for
a failure; none for N/A, Error and the other verdicts, which are not a measurement) and
``value`` (the cell's measured figure -- a stop time, a rate -- when it has one, with its
unit among the labels). The verdict, its detail and expectation stay in ``extra``. The
file is read by ``vnetbench.functional.matrix_file`` (the reader ``vnetbench report``
uses: size, depth, schema; one line naming the file when it is bad). A matrix holds no
time, so the file's modification time stands for when it was measured.
"""

from __future__ import annotations

import os
from pathlib import Path

from vnetbench.functional import matrix_file
from vnetbench.functional.verdict import FAILURES, Status
from vnetbench.inputs import one_line
from vnetbench.results.load import Run
from vnetbench.results.record import Result

TEST = "functional"
FILES = ("matrix.json", "functional/matrix.json")


def matrices(path: Path) -> list[Path]:
    """The matrix files of a RESULTS argument: itself if it is one, else those of the
    directory (a dangling link or a FIFO is listed: the reader refuses it in one line)."""
    if path.name == "matrix.json" and not path.is_dir():
        return [path]
    if not path.is_dir():
        return []
    return [path / f for f in FILES if os.path.lexists(path / f)]


def records(path: Path) -> list[Result]:
    """The records of one matrix file (VnetbenchError in one line if it is bad)."""
    matrix = matrix_file.read(path)
    when = path.stat().st_mtime
    out = []
    for (kind, network, row), (verdict, measurement) in sorted(matrix.cells.items()):
        samples = {}
        if verdict.status is Status.PASS or verdict.status in FAILURES:
            samples["passed"] = [1.0 if verdict.status is Status.PASS else 0.0]
        if verdict.value is not None:
            samples["value"] = [float(verdict.value)]
        expected, by = matrix._expected(kind, network, row)
        out.append(Result(
            test=TEST, labels={"vswitch": kind, "network": network, "row": row, "unit": verdict.unit},
            samples=samples, provenance={"backend": matrix.backend}, started=when, finished=when,
            extra={"status": verdict.status.value, "detail": verdict.detail, "label": verdict.label,
                   "expected": expected.value if expected else None, "expected_by": by,
                   "measurement": measurement or {}}))
    return out


def with_matrices(run: Run | None, path: Path) -> Run | None:
    """``run`` (the argument's records, or None) with the records of its matrices added:
    a run directory holding both is one run."""
    extra = [r for m in matrices(path) for r in records(m)]
    if not extra:
        return run
    if run is None:
        name = one_line((path.absolute().name if path.is_dir() else path.absolute().parent.name) or "-", 64)
        return Run(name, path, tuple(extra))
    return Run(run.name, run.path, run.records + tuple(extra))
