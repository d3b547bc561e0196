"""Run state on disk: every owned object is journaled *before* it is created.

A run lives in ``<root>/<run id>/``: ``journal.jsonl`` (append-only, fsynced,
one owned resource per line), ``meta.json`` (status, testbed, backend) and
per-host working directories. Teardown and ``cleanup`` work from this alone,
so they also work after the builder was killed with SIGKILL mid-build.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench.errors import RunNotFoundError

RUN_ID_RE = re.compile(r"^[0-9a-f]{6}$")


def state_root() -> Path:
    return Path(os.environ.get("VNETBENCH_STATE_DIR", "/run/vnetbench"))


def new_run_id() -> str:
    while True:
        rid = secrets.token_hex(3)
        if not rid.isdigit() and not (state_root() / rid).exists():
            return rid


@dataclass(frozen=True)
class Run:
    """Handle on one run's directory."""
    run_id: str
    root: Path

    @property
    def dir(self) -> Path:
        return self.root / self.run_id

    @property
    def journal_path(self) -> Path:
        return self.dir / "journal.jsonl"

    def create(self) -> None:
        self.dir.mkdir(parents=True, mode=0o700)

    def record(self, kind: str, **data) -> None:
        """Append one resource to the journal and make it durable before returning."""
        line = json.dumps({"kind": kind, **data}, sort_keys=True) + "\n"
        with open(self.journal_path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def entries(self) -> list[dict]:
        """Journal entries in creation order; a torn last line (crash) is ignored."""
        try:
            lines = self.journal_path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def write_meta(self, **updates) -> dict:
        meta = {**self.meta(), **updates, "updated": time.time()}
        tmp = self.dir / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
        os.replace(tmp, self.dir / "meta.json")
        return meta

    def meta(self) -> dict:
        try:
            return json.loads((self.dir / "meta.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}


TESTBED, MONITOR = "testbed", "monitor"
HOW_TO_START = {TESTBED: "vnetbench testbed up FILE", MONITOR: "vnetbench monitor up"}


def runs(kind: str | None = None) -> list[Run]:
    """Every run (testbeds and monitors), or those of one kind (meta "kind")."""
    root = state_root()
    if not root.is_dir():
        return []
    found = sorted((Run(p.name, root) for p in root.iterdir()
                    if p.is_dir() and RUN_ID_RE.match(p.name)), key=lambda r: r.run_id)
    return [r for r in found if kind is None or r.meta().get("kind", TESTBED) == kind]


def find_run(ref: str | None, kind: str | None = TESTBED) -> Run:
    """A run of ``kind`` (any kind if None) by id or name; with no ref, the only one there is."""
    candidates = runs(kind)
    noun, hint = kind or "run", kind or TESTBED      # any kind: point at testbeds
    if ref is None:
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise RunNotFoundError(f"no {noun} is up; start one with '{HOW_TO_START[hint]}'")
        ids = ", ".join(f"{r.run_id} ({r.meta().get('name', '?')})" for r in candidates)
        raise RunNotFoundError(f"several {noun}s are up ({ids}); pick one with --run ID")
    matches = [r for r in candidates if r.run_id == ref or r.meta().get("name") == ref]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFoundError(f"run {ref!r}: no such {noun} run id or name under "
                               f"{state_root()}; 'vnetbench {hint} status' lists them")
    raise RunNotFoundError(f"run {ref!r}: the name matches several runs "
                           f"({', '.join(r.run_id for r in matches)}); use the run id")
