"""The Result record and its JSON-lines store.

One record per measured point: configuration labels (what was compared), the
metric summaries over repetitions, the raw samples, and the provenance needed
to trust or reproduce the number. Records are appended, never rewritten.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vnetbench.results.stats import summarize

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Result:
    test: str                    # test family, e.g. "icmp_rtt", "tcp_stream"
    labels: dict                 # vswitch, network, placement, run_id, parameters
    samples: dict                # metric -> one value per repetition
    provenance: dict = field(default_factory=dict)
    started: float = 0.0
    finished: float = 0.0
    extra: dict = field(default_factory=dict)   # e.g. per-packet RTT distribution

    @property
    def metrics(self) -> dict:
        """metric -> summary (mean, sd, ci95, ...) over the repetitions."""
        return {name: summarize(values) for name, values in self.samples.items()}

    def to_dict(self) -> dict:
        return {"schema": SCHEMA_VERSION, **asdict(self), "metrics": self.metrics}


def from_dict(d: dict) -> Result:
    return Result(test=d["test"], labels=d["labels"], samples=d["samples"],
                  provenance=d.get("provenance", {}), started=d.get("started", 0.0),
                  finished=d.get("finished", 0.0), extra=d.get("extra", {}))


class ResultStore:
    """Append-only JSON lines: safe to tail while a run is going."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, result: Result) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(result.to_dict(), sort_keys=True) + "\n")

    def __iter__(self):
        if not self.path.exists():
            return iter(())
        with open(self.path) as f:
            return iter([from_dict(json.loads(line)) for line in f if line.strip()])


def now() -> float:
    return time.time()
