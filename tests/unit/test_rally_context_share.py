"""The testbed context's sharing (``share``/``keep``) without testbeds: the first workload
of a key builds, the next ones reuse while ``keep``, the first without it tears down; a
changed configuration gets a testbed of its own; the process's end downs what is left."""

import os
import signal
import time

import pytest

from vnetbench.rally_plugins import context as ctx


@pytest.fixture
def fake(monkeypatch):
    built, downed = [], []
    monkeypatch.setattr(ctx, "_unwind_on_interrupts", lambda: None)   # this process's handlers stay
    monkeypatch.setattr(ctx, "_INTERRUPTED", [])

    def build(self, cfg):
        built.append(len(built))
        self.context["vnetbench"] = {"run_id": f"r{len(built)}", "results": cfg["results"]}
    monkeypatch.setattr(ctx.VnetbenchTestbed, "_build", build)
    monkeypatch.setattr(ctx, "_down", lambda info: downed.append(info["run_id"]))
    monkeypatch.setattr(ctx, "_settle", lambda info: None)
    monkeypatch.setattr(ctx, "_SHARED", {})
    return built, downed


def workload(**cfg):
    c = ctx.VnetbenchTestbed.__new__(ctx.VnetbenchTestbed)
    c.config = {"vswitch": "ovs", "network": "vxlan", "results": "r.jsonl", **cfg}
    c.context = {}
    c.setup()
    return c


def test_the_first_builds_the_next_reuse_the_last_tears_down(fake):
    built, downed = fake
    runs = []
    for keep in (True, True, False):
        w = workload(share="ovs/vxlan", keep=keep)
        runs.append(w.context["vnetbench"]["run_id"])
        w.cleanup()
    assert runs == ["r1"] * 3 and len(built) == 1 and downed == ["r1"]


def test_without_share_every_workload_has_its_own(fake):
    built, downed = fake
    for _ in range(2):
        workload().cleanup()
    assert len(built) == 2 and downed == ["r1", "r2"]


def test_a_changed_configuration_is_not_shared(fake):
    built, downed = fake
    workload(share="k", keep=True).cleanup()
    w = workload(share="k", keep=True, network="geneve")
    assert w.context["vnetbench"]["run_id"] == "r2" and downed == ["r1"]


def test_a_task_that_stops_early_downs_the_kept_testbed_at_exit(fake):
    built, downed = fake
    workload(share="k", keep=True).cleanup()
    assert downed == []
    ctx._down_shared()
    assert downed == ["r1"] and not ctx._SHARED


def test_an_interrupted_task_downs_the_kept_testbed_at_once(fake, monkeypatch):
    """Ctrl-C (or SIGTERM) inside a workload: its cleanup downs the shared testbed now, no
    next workload will come, and without waiting for a last scrape."""
    built, downed = fake
    monkeypatch.setattr(ctx, "_down", lambda info, settle=True: downed.append((info["run_id"], settle)))
    w = workload(share="k", keep=True)
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        w.cleanup()
    assert downed == [("r1", False)] and not ctx._SHARED


@pytest.fixture
def rally_process(monkeypatch):
    """This process as a Rally process is: SIGTERM and SIGINT at their defaults, the
    context's handlers installed, no interrupt seen yet; the test's handlers back after."""
    monkeypatch.setattr(ctx, "_INTERRUPTED", [])
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ctx._unwind_on_interrupts()
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _interrupted_by(sig) -> None:
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), sig)
        time.sleep(5)


def test_sigterm_unwinds_a_rally_task_as_ctrl_c_does(rally_process):
    """In a Rally process (SIGTERM at its default: the process would end, testbeds up) the
    context makes SIGTERM a KeyboardInterrupt, so the contexts unwind; an interrupt is
    remembered, and the next workload refuses to start."""
    _interrupted_by(signal.SIGTERM)
    assert ctx._INTERRUPTED == [signal.SIGTERM]
    with pytest.raises(KeyboardInterrupt):
        workload(share="k", keep=True)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)      # a handler someone chose stays
    ctx._unwind_on_interrupts()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_a_second_interrupt_cannot_cut_the_unwinding_short(rally_process):
    """SIGKILL of ``vnetbench compare`` delivers Rally's parent-death SIGINT once per thread
    of compare that exits after the one that started Rally: the first unwinds, the next
    ones land in the unwinding (the shared testbed's teardown at exit) and must not raise."""
    _interrupted_by(signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)         # the unwinding goes on
    time.sleep(0.05)
    assert ctx._INTERRUPTED == [signal.SIGINT, signal.SIGINT]
