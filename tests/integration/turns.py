"""The lanes take turns with the machine (vnetbench.machinelock): a test whose verdict rests
on a CPU share, a rate or a pause (``@pytest.mark.whole_machine``) runs with the other
lane's work paused at its next boundary, never beside it.

What one turn spans is what keeps running between a lane's tests:

- netns lane: one test (its module's testbeds idle between tests); the whole-machine
  tests run first, as one block and one turn: the other lane pauses once, not at each;
- guests lane: one module (its QEMU guests run from the module's first test to its last),
  and the all-in-one cloud's modules as one (the cloud runs through all of them); the
  turn is exclusive when any test of the module is marked.

``make test`` names the lock file (``VNETBENCH_MACHINE_LOCK``) for both lanes and for the
guests lane's ``vnetbench functional --quick``, whose rate and pause rows take the machine
the same way, its other rows one share per testbed (vnetbench.functional.plugin). Without
the variable nothing is held (one session alone).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vnetbench import machinelock

OPENSTACK = Path(__file__).resolve().parent / "openstack"
BLOCK = "the netns lane's whole-machine tests"


def whole_machine(item) -> bool:
    return item.get_closest_marker("whole_machine") is not None


def first_whole_machine(items) -> list:
    """The netns lane's order: its whole-machine tests first, in one block (stable
    otherwise), while the guests lane works in short turns (the functional matrix's
    testbeds) rather than waiting out its guests' modules and the cloud. A module's
    fixtures are set up again for its other tests later: seconds, against a pause of the
    other lane per test."""
    return sorted(items, key=lambda item: not whole_machine(item))


def unit_of(lane: str | None):
    def netns(item):
        return BLOCK if whole_machine(item) else item.nodeid

    def guests(item):
        return "the all-in-one cloud's modules" if OPENSTACK in item.path.parents else str(item.path)
    return guests if lane == "guests" else netns


class Turns:
    """pytest plugin: the lane's turns (see the module doc)."""

    def __init__(self, lane: str | None):
        self.turns = machinelock.Turns(unit_of(lane), whole_machine)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.turns.enter(item, item.session.items)
        try:
            yield
        finally:
            self.turns.leave(nextitem)

    def pytest_sessionfinish(self, session):
        self.turns.release()
