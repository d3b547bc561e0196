"""The Result record.

One record per measured point: configuration labels (what was compared), the
metric summaries over repetitions, the raw samples, and the provenance needed
to trust or reproduce the number. Records are appended, never rewritten
(``vnetbench.results.store``), and read back by ``vnetbench.results.load`` only;
their published schema is ``schemas/record.schema.json`` (version SCHEMA_VERSION).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from functools import cached_property

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

    @cached_property
    def metrics(self) -> dict:
        """metric -> summary (mean, sd, ci95, ...) over the repetitions (computed once: a
        report asks for it per cell and format; samples are not changed once measured)."""
        return {name: summarize(values) for name, values in self.samples.items()}

    def to_dict(self) -> dict:
        return {"schema": SCHEMA_VERSION, **asdict(self), "metrics": self.metrics}


def from_dict(d: dict) -> Result:
    return Result(test=d["test"], labels=d["labels"], samples=d["samples"],
                  provenance=d.get("provenance", {}), started=d.get("started", 0.0),
                  finished=d.get("finished", 0.0), extra=d.get("extra", {}))


def now() -> float:
    return time.time()
