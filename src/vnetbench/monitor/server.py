"""A monitor run: its own namespace with a real Prometheus and Pushgateway
(Debian packages) on 127.0.0.1, Prometheus data kept in a directory of the
user's choice (by default under the results directory, so it outlives the run).

Like a testbed, everything is journaled before it is created and unwound by
``down()`` or ``vnetbench cleanup``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from vnetbench.errors import BuildError, PrerequisiteError
from vnetbench import signals
from vnetbench.linux import links, nsops, proc
from vnetbench.monitor import nshttp
from vnetbench.state import MONITOR, Run, find_run, new_run_id, state_root
from vnetbench.testbed import deployment

PROMETHEUS_PORT, PUSHGATEWAY_PORT = 9090, 9091
SCRAPE_INTERVAL = "1s"
PROGRAMS = {"prometheus": "prometheus", "pushgateway": "prometheus-pushgateway"}


def config(targets_dir: Path, interval: str = SCRAPE_INTERVAL) -> dict:
    """Prometheus configuration: collectors by file discovery (one JSON file per
    testbed, written when it is attached), results from the Pushgateway."""
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": "15s"},
        "scrape_configs": [
            {"job_name": "vnetbench-collector",
             "file_sd_configs": [{"files": [str(targets_dir / "*.json")], "refresh_interval": "1s"}]},
            {"job_name": "vnetbench-results", "honor_labels": True,
             "static_configs": [{"targets": [f"127.0.0.1:{PUSHGATEWAY_PORT}"]}]},
        ],
    }


@dataclass(frozen=True)
class Monitor:
    run: Run

    @property
    def id(self) -> str:
        return self.run.run_id

    @property
    def ns(self) -> str:
        return f"vnb-{self.id}-mon"

    @property
    def targets_dir(self) -> Path:
        return self.run.dir / "targets"

    @property
    def data_dir(self) -> Path:
        return Path(self.run.meta()["data_dir"])

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """An instant PromQL query; the result vector."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at else {})}
        return nshttp.get_json(self.ns, PROMETHEUS_PORT, "/api/v1/query", params)["data"]["result"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step}
        return nshttp.get_json(self.ns, PROMETHEUS_PORT, "/api/v1/query_range", params)["data"]["result"]

    def argv(self, argv) -> list[str]:
        """ARGV run in the monitor's namespace (collectors: they reach Prometheus there)."""
        return proc.in_netns(self.ns, argv)

    def down(self) -> list[str]:
        return deployment.teardown(self.run, budget_s=30.0)


def attach(ref: str | None = None) -> Monitor:
    return Monitor(find_run(ref, kind=MONITOR))


def up(data_dir: Path | None = None, progress=lambda msg: None) -> Monitor:
    """Start a monitor; on any failure unwind it and raise BuildError."""
    for prog in PROGRAMS.values():
        if not shutil.which(prog):
            raise PrerequisiteError(f"{prog} not found; install the Debian package "
                                    f"'{prog}' (make install does)")
    rid = new_run_id()
    run = Run(rid, state_root())
    data = Path(data_dir or Path("results") / f"monitor-{rid}").resolve()
    run.create(kind=MONITOR, status="building", name=f"monitor-{rid}", created=time.time(),
               builder_pid=os.getpid(), data_dir=str(data))
    mon = Monitor(run)
    try:
        with signals.deferred():
            try:
                _build(mon, data, progress)
            except BaseException as exc:
                deployment.unwind(run, exc, f"monitor {rid}")
    finally:
        run.unlock()
    return mon


def _build(mon: Monitor, data: Path, progress) -> None:
    run = mon.run
    run.record("netns", name=mon.ns)
    nsops.create(mon.ns)
    with nsops.rtnl(mon.ns) as ns:
        links.up(ns, "lo")
    data.mkdir(parents=True, exist_ok=True)
    mon.targets_dir.mkdir()
    cfg = run.dir / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config(mon.targets_dir), sort_keys=False))
    _daemon(mon, "pushgateway", [f"--web.listen-address=127.0.0.1:{PUSHGATEWAY_PORT}"],
            mark=f"--persistence.file={run.dir / 'pushgateway.db'}", log=data / "pushgateway.log")
    _daemon(mon, "prometheus", [f"--storage.tsdb.path={data / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
                                "--storage.tsdb.retention.time=365d"],
            mark=f"--config.file={cfg}", log=data / "prometheus.log")
    for port, path in ((PUSHGATEWAY_PORT, "/-/ready"), (PROMETHEUS_PORT, "/-/ready")):
        _wait_ready(mon, port, path)
    run.write_meta(status="up", namespace=mon.ns, prometheus=f"127.0.0.1:{PROMETHEUS_PORT}",
                   pushgateway=f"127.0.0.1:{PUSHGATEWAY_PORT}")
    progress(f"monitor {mon.id}: Prometheus and Pushgateway up in namespace {mon.ns}, data in {data}")


def _daemon(mon: Monitor, name: str, args: list, mark: str, log: Path) -> None:
    """Journal by a run-unique argument, start in the monitor namespace, write its pidfile."""
    pidfile = mon.run.dir / f"{name}.pid"
    mon.run.record("daemon", name=name, pidfile=str(pidfile), argmark=mark, grace_s=10.0)
    with open(log, "ab") as out:
        p = subprocess.Popen(proc.in_netns(mon.ns, [PROGRAMS[name], mark, *args]),
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    pidfile.write_text(f"{p.pid}\n")


def _wait_ready(mon: Monitor, port: int, path: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            status, body = nshttp.request(mon.ns, port, "GET", path, timeout=2)
            if status == 200:
                return
            last = f"HTTP {status}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.1)
    raise BuildError(f"127.0.0.1:{port} in {mon.ns} not ready after {timeout:.0f} s ({last}); "
                     f"see the logs in {mon.data_dir}")


def pid_alive(mon: Monitor, name: str) -> bool:
    try:
        pid = int((mon.run.dir / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return False
    return os.path.exists(f"/proc/{pid}") and str(mon.run.dir) in proc.cmdline(pid)
