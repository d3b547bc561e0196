"""The main job: the battery over vSwitch kinds x network types through Rally,
then a seed-style table (rows = test x point x placement, columns = configurations,
CPU% beside every value), the comparison report (HTML, Markdown, CSV; vnetbench.report),
the Rally HTML report and the JSON-lines records.

Interrupted (SIGINT to the group, as Ctrl-C sends it, or SIGTERM to this process only, as
``timeout`` and service managers send it), the command unwinds what it built before it
returns: Rally runs in a session of its own and gets the interrupt passed on once (its
contexts tear their testbeds down), at most ``GRACE`` seconds; then what is left of its
process group is killed and every run it created (marked ``VNETBENCH_OWNER``, state.py)
is torn down from its journal, as ``vnetbench cleanup`` would; the monitor goes last.
Killed outright, this process cannot: Rally then gets SIGINT as its parent-death signal."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from vnetbench import outfiles, signals
from vnetbench.errors import VnetbenchError
from vnetbench.report import table as model
from vnetbench.report import text, write
from vnetbench.results.load import Run
from vnetbench.results.store import ResultStore

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "rally-tasks" / "overlay-comparison.yaml"
# s an interrupted Rally task has to unwind its contexts before it is killed (it takes 1-3 s;
# a SIGINT that lands inside Rally's own bookkeeping can be lost: it then runs on)
GRACE = 10.0


class Rally:
    """Rally with its own database under the results directory (no global state)."""

    def __init__(self, home: Path):
        self.home = home
        self.exe = str(Path(sys.executable).parent / "rally")
        self.conf = home / "rally.conf"

    def __call__(self, *args, stream=False, env=None, check=True) -> str:
        argv = [self.exe, "--config-file", str(self.conf), *args]
        if stream:       # a long task: let the user watch Rally's progress
            out, code = _stream(argv, env)
        else:
            done = subprocess.run(argv, capture_output=True, text=True)
            out, code = done.stdout + done.stderr, done.returncode
        if code != 0 and not stream and check:
            raise VnetbenchError(f"rally {' '.join(args[:2])} failed: {out.strip().splitlines()[-1:]}")
        return out

    def ensure(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.conf.exists():
            self.conf.write_text(f"[database]\nconnection = sqlite:///{self.home.resolve()}/rally.sqlite\n")
            self("db", "create")
            self("env", "create", "--name", "vnetbench", "--no-use")


def _stream(argv, env) -> tuple[str, int]:
    """Run ARGV (Rally) in a session of its own, echoing its vnetbench lines; on an
    interrupt stop it and everything it built (``_unwind``), then re-raise."""
    owner = f"{os.getpid()}-{secrets.token_hex(4)}"
    env = {**(os.environ if env is None else env), "VNETBENCH_OWNER": owner}
    # this process killed outright (SIGKILL, the OOM killer): Rally gets SIGINT from the
    # kernel and unwinds its contexts by itself
    orphan = ["setpriv", "--pdeathsig", "INT"] if shutil.which("setpriv") else []
    p = subprocess.Popen(_int_heard() + orphan + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env, start_new_session=True)
    lines = []

    def read():          # a thread: the pipe is drained while Rally unwinds, too
        for line in p.stdout:
            lines.append(line)
            if line.startswith("vnetbench:") or "rally task report" in line:
                print(line.rstrip(), file=sys.stderr, flush=True)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        p.wait()
    except BaseException:
        with signals.deferred():     # a second signal must not cut the unwinding short
            _unwind(p, owner)
        raise
    reader.join()
    return "".join(lines), p.returncode


def _int_heard() -> list[str]:
    """A prefix that gives Rally SIGINT at its default when this process was started with
    it ignored (a background job of a script, ``nohup``): both ways Rally is stopped send
    SIGINT (``_unwind``, the parent-death signal), and an ignored one would leave it, and
    its testbeds, running. Rally's session is its own, so no terminal's Ctrl-C reaches it."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return []
    return ["env", "--default-signal=INT"]        # coreutils >= 8.31 (Debian 11 on)


def _unwind(p: subprocess.Popen, owner: str, grace: float = GRACE) -> None:
    """Stop the Rally process P (SIGINT, then SIGKILL to its group after GRACE s), then
    tear down every run created under OWNER that is still journaled."""
    from vnetbench.state import RunBusyError, owned_by
    from vnetbench.testbed.deployment import remove_stale, teardown
    say = lambda m: print(f"vnetbench: {m}", file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.monotonic()
    if p.poll() is None:
        say(f"interrupted: stopping the Rally task (pid {p.pid}, at most {grace:.0f} s)")
        _signal_group(p.pid, signal.SIGINT)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            say(f"Rally still running after {grace:.0f} s: killed")
    _signal_group(p.pid, signal.SIGKILL)      # and whatever of its group is left
    p.wait()
    runs, stale = owned_by(owner)
    for run in runs:
        try:
            errors = teardown(run)
        except RunBusyError as exc:
            errors = [str(exc)]
        say(f"run {run.run_id}: " + ("removed" if not errors else
                                     f"{errors[0]}; run 'vnetbench cleanup --run {run.run_id}'"))
    remove_stale(stale)
    say(f"interrupted: unwound in {time.monotonic() - t0:.1f} s")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(profile="quick", vswitches=None, networks=None, out_dir=Path("results"), task=TASK,
        monitor=True, testbed: dict | None = None, columns=None, name="comparison",
        tests=None, task_args: dict | None = None) -> dict:
    """With ``monitor``, a Prometheus (data in OUT/prometheus) watches every testbed of
    the matrix and receives the results, for the Grafana dashboards. ``testbed``: task
    arguments for every testbed of the matrix (backend, image, placements); ``columns``:
    these "vswitch/network" columns instead of the default ones or the grid; ``tests``: only
    these families (scenario names) of the battery; ``task_args``: more arguments of the
    comparison task (e.g. a seed's RFC 2544 measures, rally-tasks/overlay-comparison.yaml)."""
    outfiles.check_dir(out_dir, "--results")
    out = out_dir / time.strftime(f"{name}-{profile}-%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    extra = {k: v for k, v in (testbed or {}).items() if v}
    if columns:
        extra["columns"] = list(columns)
    if tests:
        extra["tests"] = list(tests)
    extra.update(task_args or {})
    if not monitor:
        return _run(profile, vswitches, networks, out_dir, task, out, None, extra)
    from vnetbench.monitor import server
    mon = server.up(out / "prometheus", progress=lambda m: print(m, file=sys.stderr, flush=True))
    try:
        return {**_run(profile, vswitches, networks, out_dir, task, out, mon, extra), "monitor": mon.id}
    finally:
        with signals.deferred():       # interrupted or not, the monitor goes down whole
            errors = mon.down()
        if errors:
            print(f"monitor {mon.id}: teardown incomplete: {errors[0]}; run 'vnetbench cleanup "
                  f"--run {mon.id}'", file=sys.stderr)


def _run(profile, vswitches, networks, out_dir, task, out, mon, extra) -> dict:
    rally = Rally(out_dir / "rally")
    rally.ensure()
    args = {"profile": profile, "results": str((out / "records.jsonl").resolve()), **extra}
    if vswitches:
        args["vswitches"] = list(vswitches)
    if networks:
        args["networks"] = list(networks)
    t0 = time.monotonic()
    env = {**os.environ, "VNETBENCH_MONITOR": mon.id} if mon else None
    log = rally("task", "start", "--env", "vnetbench", str(task), "--task-args", json.dumps(args),
                stream=True, env=env)
    outfiles.write_files(out, {"rally.log": log}, "--results")
    if "rally task report " not in log:
        raise VnetbenchError(f"rally task start did not run; see {out / 'rally.log'}")
    uuid = log.split("rally task report ")[1].split()[0]
    rally_report(rally, uuid, out / "rally-report.html")
    # exit 1 when an SLA fails: reported (cmd_compare exits 1), after the tables are written
    sla = json.loads(rally("task", "sla-check", uuid, "--json", check=False))
    records = list(ResultStore(out / "records.jsonl"))
    plain = table(records)
    # the table and the report: all or none
    write.write({"table.txt": plain, **write.render([Run(out.name, out / "records.jsonl", tuple(records))])},
                out, flag="--results")
    return {"dir": out, "uuid": uuid, "seconds": time.monotonic() - t0, "records": records,
            "table": plain, "sla_failed": [s for s in sla if s.get("status") != "PASS"]}


def rally_report(rally, uuid: str, path: Path) -> Path:
    """Rally's HTML report, self-contained (no CDN: it renders offline) and with every
    workload named by test and configuration (``vnetbench.rally_plugins.exporter``)."""
    rally("task", "export", uuid, "--type", "vnetbench-html", "--to", str(path))
    return path


def table(records) -> str:
    """Rows: test / variable / placement; columns: vswitch/network; cells: mean ±CI (CPU%)."""
    return text.plain(model.build([Run("", None, tuple(records))]))
