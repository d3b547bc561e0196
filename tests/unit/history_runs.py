"""Synthetic run directories and the two stores for the history tests.

``write_run`` writes a records.jsonl as vnetbench writes one (one record per cell, three
repetitions a metric); ``store`` yields a ``--db`` for SQLite and, when the PostgreSQL
server binaries are installed, for a real server started in a temporary directory (as
the postgres user when the tests run as root: postgres refuses to run as root).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PROVENANCE = {"vnetbench": "0.1.0", "backend": "netns", "kernel": "6.1.0-28-amd64", "machine": "x86_64",
              "cpu_model": "Intel(R) Xeon(R) Gold 6230", "vswitch": "ovs", "ovs_datapath": "system",
              "ovs_ports": None, "network": "vxlan", "underlay_mtu": 1500, "tenant_mtu": 1450,
              "security_groups": "off", "tools": {"ovs-vswitchd": "ovs-vswitchd (Open vSwitch) 3.1.0"},
              "run_id": "r0", "collected": 1.0}


def record(test="tcp_stream", metric="gbps", values=(10.0, 10.1, 9.9), started=1.7e9, run_id="r0",
           point="1448", provenance=None, extra_metrics=None):
    prov = dict(PROVENANCE if provenance is None else provenance)
    if "run_id" in prov:
        prov["run_id"] = run_id
    samples = {metric: list(values), **(extra_metrics or {})}
    return {"schema": 1, "test": test, "labels": {"vswitch": "ovs", "network": "vxlan", "placement": "cross-host",
                                                   "point": point, "run_id": run_id, "test": test},
            "samples": samples, "provenance": prov, "started": started, "finished": started + 10, "extra": {}}


def write_run(directory: Path, records) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "records.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return directory


def series_runs(tmp: Path, means, noise=0.05, seed=7, metric="gbps", test="tcp_stream", reps=3):
    """One run directory per mean: ``reps`` repetitions around it with ``noise`` relative sd."""
    rng = random.Random(seed)
    dirs = []
    for i, mean in enumerate(means):
        values = [mean * (1 + rng.gauss(0, noise)) for _ in range(reps)]
        dirs.append(write_run(tmp / f"run{i:03d}", [record(test, metric, values, started=1.7e9 + 3600 * i,
                                                           run_id=f"r{i}")]))
    return dirs


T0 = 1.7e9
STEP = 3600.0
MEANS = {"1448": [100.0] * 30, "8948": [100.0] * 19 + [85.0] * 11}   # the second drops 15 % at run 20


def build_history(tmp_path, target: str) -> dict:
    """30 runs of two cells (3 repetitions, 5 % noise); returns {point: [run means]}."""
    rng = random.Random(49)
    means = {p: [] for p in MEANS}
    dirs = []
    for i in range(30):
        recs = []
        for point, series in MEANS.items():
            values = [series[i] * (1 + rng.gauss(0, 0.05)) for _ in range(3)]
            means[point].append(sum(values) / 3)
            recs.append(record(values=values, started=T0 + STEP * i, run_id=f"r{i}", point=point))
        dirs.append(str(write_run(tmp_path / f"run{i:02d}", recs)))
    from vnetbench import cli
    assert cli.main(["history", "add", *dirs, "--db", target]) == 0
    return means


class Postgres:
    """A PostgreSQL server of its own in a temporary directory, on a unix socket there."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="vnb-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        os.chmod(self.dir, 0o755)
        if self.user:
            shutil.chown(self.dir, self.user)
        self.data = self.dir / "data"
        self._run([str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"])
        self._run([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.dir / "log"), "-o",
                   f"-k {self.dir} -c listen_addresses='' -c fsync=off -c max_connections=20", "start"])
        self.count = 0

    def _run(self, argv):
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)

    def new_db(self) -> str:
        self.count += 1
        name = f"h{self.count}"
        self._run([str(PG_BIN / "createdb"), "-h", str(self.dir), "-U", "postgres", name])
        return f"postgresql://postgres@/{name}?host={self.dir}"

    def stop(self):
        try:
            self._run([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server not installed: no {PG_BIN / 'initdb'} (apt-get install postgresql)")
    pg = Postgres()
    yield pg
    pg.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    """A fresh, empty history database: an SQLite file, then a database on a real PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("postgres").new_db()
