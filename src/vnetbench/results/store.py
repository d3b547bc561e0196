"""The JSON-lines store of result records: appended as they are measured, read back
through the one records loader (``vnetbench.results.load``) so the writer's own file is
judged as any other reader judges it."""

from __future__ import annotations

import json
from pathlib import Path

from vnetbench.results.load import read
from vnetbench.results.record import Result


class ResultStore:
    """Append-only JSON lines: safe to tail while a run is going."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, result: Result) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(result.to_dict(), sort_keys=True) + "\n")

    def __iter__(self):
        """The records so far (none before the first is appended)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return iter(())
        return iter(read(self.path))
