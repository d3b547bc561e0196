"""``vnetbench functional``: the functional matrix's pytest run, its files in one directory."""

from __future__ import annotations

import time
from pathlib import Path


def argv(out: Path, vswitches=(), networks=(), strict=False, extra=(), quick=False) -> list[str]:
    """pytest arguments: the plugin, the packaged tests, the matrix and JUnit XML in ``out``."""
    args = ["-p", "vnetbench.functional.plugin", "--pyargs", "vnetbench.functional.tests",
            "-rfE", f"--matrix-out={out}", f"--junitxml={out / 'junit.xml'}"]
    args += [f"--vswitch={k}" for k in vswitches] + [f"--network={t}" for t in networks]
    return args + (["--strict-verdicts"] if strict else []) + (["--quick"] if quick else []) + list(extra)


def run(out: str | None, vswitches=(), networks=(), strict=False, extra=(), quick=False) -> int:
    import pytest
    path = Path(out or f"results/functional-{time.strftime('%Y%m%d-%H%M%S')}")
    return int(pytest.main(argv(path, vswitches, networks, strict, extra, quick)))
