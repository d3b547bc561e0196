"""Every unit test leaves the process's signal handling as it found it: a handler or a
blocked signal left behind is inherited by whatever the next test of the worker runs (a
child started with SIGINT blocked never sees Ctrl-C)."""

from __future__ import annotations

import signal

import pytest

WATCHED = (signal.SIGINT, signal.SIGTERM)


def _signal_state():
    return ({s: signal.getsignal(s) for s in WATCHED},
            frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])))


@pytest.fixture(autouse=True)
def signals_restored():
    before = _signal_state()
    yield
    after = _signal_state()
    if after != before:
        for s, h in before[0].items():
            signal.signal(s, h)
        signal.pthread_sigmask(signal.SIG_SETMASK, before[1])
        pytest.fail(f"the test changed signal handling and left it so: {before} -> {after}")
