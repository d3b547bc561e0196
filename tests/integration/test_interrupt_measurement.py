"""An interrupted measurement unwinds what it built before the command returns (issue 51).

``vnetbench compare`` on the smoke profile with one column (ovs/vxlan, same-host pairs) is
interrupted once its first figure is printed (the testbed up, the battery running in
Rally; at once, between two workloads, or 1.5 s later, inside the next one): by SIGINT to
its process group, as Ctrl-C sends it (with the monitor: Prometheus must go too), and by
SIGTERM to the main process only, as ``timeout``, CI runners and service managers send it.
Likewise ``reproduce 002`` by SIGTERM inside its RFC 2544 search, and ``rally task start``
run by hand by SIGTERM to Rally. Each must exit within ``BOUND`` seconds (130 for vnetbench)
and leave nothing -- before any ``vnetbench cleanup``: no namespace, process or journal of
its runs, no Rally or Prometheus process.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interrupts import _interactive, _Lines, cleanup_here, leftovers
from leaks import processes_mentioning

REPO = Path(__file__).resolve().parents[2]
FIRST_FIGURE = "vnetbench: ovs/vxlan "        # a progress line of a measured figure
BOUND = 40.0          # s from the signal to the exit: Rally's grace (compare.GRACE, 10 s) + teardowns


COMPARE = ["compare", "--profile", "smoke", "--vswitch", "ovs", "--network", "vxlan", "--placement",
           "same-host"]


def _interrupt(mode: str, state_dir: Path, tmp_path: Path, monitor: bool, delay: float,
               command=COMPARE, figure=FIRST_FIGURE) -> None:
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "vnetbench", *command, "--results", str(results)]
    p = subprocess.Popen(argv + ([] if monitor else ["--no-monitor"]), env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         preexec_fn=_interactive)
    out, err = _Lines(p.stdout), _Lines(p.stderr)
    out.start(), err.start()
    rids = set()
    try:
        deadline = time.monotonic() + 240
        while not _ready(err, figure, state_dir) and p.poll() is None and time.monotonic() < deadline:
            if state_dir.is_dir():
                rids |= {d.name for d in state_dir.iterdir() if re.fullmatch(r"[0-9a-f]{6}", d.name)}
            time.sleep(0.2)
        assert p.poll() is None, f"compare ended before the signal (exit {p.returncode}): {err.text()[-600:]}"
        assert _ready(err, figure, state_dir), f"not measuring after 240 s: {err.text()[-600:]}"
        rids |= {d.name for d in state_dir.iterdir() if re.fullmatch(r"[0-9a-f]{6}", d.name)}
        assert rids, "no run in the state root while measuring"
        time.sleep(delay)           # 0: between two workloads; 1.5 s: inside the next one
        sent = time.monotonic()
        if mode == "sigint-group":
            os.killpg(p.pid, signal.SIGINT)
        elif mode == "sigkill":
            p.send_signal(signal.SIGKILL)
        else:
            p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            rc = None
        if mode == "sigkill":       # it is gone at once: its Rally unwinds on its own
            while processes_mentioning(str(results)) and time.monotonic() < sent + BOUND:
                time.sleep(0.2)
        seconds = time.monotonic() - sent
        out.join(5), err.join(5)
        text = err.text()
        # before any cleanup: nothing of the runs, no Rally, no Prometheus of the results dir
        left = leftovers(state_dir, rids)
        stray = processes_mentioning(str(results)) + processes_mentioning(str(state_dir))
        print(f"{mode}: exit {rc} {seconds:.1f} s after the signal; runs {sorted(rids)}")
        print("".join(line for t, line in err.lines if t >= sent)[-1500:])
        if mode == "sigkill":
            assert rc == -signal.SIGKILL and seconds < BOUND, f"Rally still running {seconds:.0f} s on"
        else:
            assert rc == 130, f"{mode}: exit {rc} after {seconds:.1f} s: {text[-800:]}"
            assert "vnetbench: interrupted" in text
        assert "Traceback" not in text, text[text.index("Traceback"):][:800]
        assert left == {} and stray == [], f"left after {mode}: {left} {stray}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        cleanup_here(state_dir)          # whatever a failure left; nothing when it passed


def _ready(err, figure, state_dir: Path) -> bool:
    """FIGURE printed, or (FIGURE None) a testbed of the state root up: measuring."""
    if figure is not None:
        return err.first(figure) is not None
    return any(json.loads((d / "meta.json").read_text() or "{}").get("status") == "up"
               for d in state_dir.glob("[0-9a-f]" * 6) if (d / "meta.json").is_file())


@pytest.fixture
def ovs_vxlan(caps):
    from vnetbench.testbed.model import NetType, VSwitchKind
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))


def test_ctrl_c_to_the_group_unwinds_the_measurement_and_the_monitor(ovs_vxlan, state_dir, tmp_path):
    _interrupt("sigint-group", state_dir, tmp_path, monitor=True, delay=1.5)


def test_sigterm_to_the_main_process_unwinds_the_measurement(ovs_vxlan, state_dir, tmp_path):
    _interrupt("sigterm", state_dir, tmp_path, monitor=False, delay=1.5)


def test_sigkill_of_compare_leaves_rally_to_unwind_by_itself(ovs_vxlan, state_dir, tmp_path):
    """Killed outright, compare cannot unwind anything: its Rally task gets SIGINT from the
    kernel (parent-death signal) and unwinds its contexts itself."""
    _interrupt("sigkill", state_dir, tmp_path, monitor=False, delay=1.5)


def test_timeout_of_reproduce_unwinds_the_measurement(caps, state_dir, tmp_path):
    """The issue's own case: ``timeout`` (SIGTERM to the main process) of ``vnetbench
    reproduce 002 --placement same-host --no-monitor`` left its testbeds up. Signalled 3 s
    after its testbed is up: inside the RFC 2544 search (its first figure comes after it)."""
    from vnetbench.testbed.model import NetType, VSwitchKind
    if caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.FLAT):
        pytest.skip(caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.FLAT))
    _interrupt("sigterm", state_dir, tmp_path, monitor=False, delay=3.0,     # its RFC 2544 search
               command=["reproduce", "002", "--profile", "smoke", "--placement", "same-host",
                        "--seed-systems-only"], figure=None)


def test_sigterm_to_a_rally_task_unwinds_its_contexts(ovs_vxlan, state_dir, tmp_path):
    """``rally task start`` run by hand (a scale task, the comparison task): SIGTERM to
    Rally alone, as ``timeout`` sends it, unwinds its contexts as Ctrl-C does -- by
    default it would end Rally at once, every testbed up."""
    _signal_rally([signal.SIGTERM], state_dir, tmp_path)


def test_a_second_sigint_lands_in_rallys_unwinding(ovs_vxlan, state_dir, tmp_path):
    """The parent-death signal of a SIGKILLed compare comes once per thread of compare
    exiting after the one that started Rally: here two SIGINTs 3 ms apart, the second
    inside the unwinding the first began. The unwinding still runs to its end."""
    _signal_rally([signal.SIGINT, signal.SIGINT], state_dir, tmp_path)


def _signal_rally(sigs, state_dir: Path, tmp_path: Path) -> None:
    from vnetbench import compare
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir), "PYTHONPATH": str(REPO / "src")}
    rally = compare.Rally(tmp_path / "rally")
    rally.ensure()
    args = {"profile": "smoke", "columns": ["ovs/vxlan"], "placements": ["same-host"],
            "results": str(tmp_path / "records.jsonl")}
    p = subprocess.Popen([rally.exe, "--config-file", str(rally.conf), "task", "start", "--env", "vnetbench",
                          str(compare.TASK), "--task-args", json.dumps(args)], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                         preexec_fn=_interactive)
    out = _Lines(p.stdout)
    out.start()
    try:
        deadline = time.monotonic() + 240
        while out.first(FIRST_FIGURE) is None and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert p.poll() is None and out.first(FIRST_FIGURE), out.text()[-600:]
        rids = {d.name for d in state_dir.iterdir() if re.fullmatch(r"[0-9a-f]{6}", d.name)}
        time.sleep(1.5)
        sent = time.monotonic()
        for i, sig in enumerate(sigs):
            time.sleep(0.003 if i else 0)
            p.send_signal(sig)
        try:
            rc = p.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            rc = None
        seconds = time.monotonic() - sent
        names = "+".join(signal.Signals(s).name for s in sigs)
        print(f"rally {names}: exit {rc} {seconds:.1f} s after the signal; runs {sorted(rids)}")
        assert rc is not None, f"Rally still running {BOUND:.0f} s after {names}"
        assert rc != -sigs[-1], f"Rally died of the {names}: nothing unwound"
        assert leftovers(state_dir, rids) == {}, leftovers(state_dir, rids)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        cleanup_here(state_dir)
