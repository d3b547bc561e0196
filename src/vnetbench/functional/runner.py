"""``vnetbench functional``: the functional matrix's pytest run, its files in one directory."""

from __future__ import annotations

import time
from pathlib import Path


def argv(out: Path, vswitches=(), networks=(), strict=False, extra=(), quick=False,
         expect: str | None = None) -> list[str]:
    """pytest arguments: the plugin, the packaged tests, the matrix and JUnit XML in ``out``."""
    args = ["-p", "vnetbench.functional.plugin", "--pyargs", "vnetbench.functional.tests",
            "-rfE", f"--matrix-out={out}", f"--junitxml={out / 'junit.xml'}"]
    args += [f"--vswitch={k}" for k in vswitches] + [f"--network={t}" for t in networks]
    args += ["--strict-verdicts"] if strict else []
    args += [f"--expect={expect}"] if expect else []
    return args + (["--quick"] if quick else []) + list(extra)


#: what the matrix writer puts in the output directory (beside pytest's junit.xml)
MATRIX_FILES = ("matrix.json", "matrix.md", "matrix.html")


def run(out: str | None, vswitches=(), networks=(), strict=False, extra=(), quick=False,
        expect: str | None = None) -> int:
    """The pytest run; a bad expectations file is refused first (one line, exit 2)."""
    import pytest
    if expect:
        from vnetbench.functional import expect as exp
        exp.load(expect)
    from vnetbench import outfiles
    path = outfiles.check_dir(f"results/functional-{time.strftime('%Y%m%d-%H%M%S')}" if out is None else out,
                              "--out", MATRIX_FILES + ("junit.xml",), parents=out is None)  # before the tests
    return int(pytest.main(argv(path, vswitches, networks, strict, extra, quick, expect)))
