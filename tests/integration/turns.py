"""The lanes take turns with the machine (vnetbench.machinelock): a test whose verdict rests
on a CPU share, a rate or a pause (``@pytest.mark.whole_machine``) runs with the other
lane's work paused at its next boundary, never beside it.

What one turn spans is what keeps running between a lane's tests:

- netns lane: one test (its module's testbeds idle between tests: a few daemons asleep);
- guests lane: one module (its QEMU guests run from the module's first test to its last),
  and the all-in-one cloud's modules as one (the cloud runs through all of them).

A turn is exclusive when any test it spans is marked. ``make test`` names the lock file
(``VNETBENCH_MACHINE_LOCK``) for both lanes and for the guests lane's ``vnetbench
functional --quick``, whose rate and pause rows take the machine the same way
(vnetbench.functional.plugin). Without the variable nothing is held (one session alone).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from vnetbench import machinelock

OPENSTACK = Path(__file__).resolve().parent / "openstack"
MARK = "whole_machine"


def whole_machine(item) -> bool:
    return item.get_closest_marker(MARK) is not None


def first_whole_machine(items) -> list:
    """The netns lane's order: the modules holding a whole-machine test first (stable
    otherwise), so they run while the guests lane still works row by row (the functional
    matrix: short turns) rather than waiting out the guests' modules and the cloud."""
    marked = {item.path for item in items if whole_machine(item)}
    return sorted(items, key=lambda item: item.path not in marked)


class Turns:
    """pytest plugin: one machine-lock turn per unit of the lane (see the module doc)."""

    def __init__(self, lane: str | None):
        self.lane = lane
        self.unit, self.held = None, contextlib.ExitStack()

    def _unit_of(self, item) -> str:
        if self.lane != "guests":
            return item.nodeid
        return "the all-in-one cloud's modules" if OPENSTACK in item.path.parents else str(item.path)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        unit = self._unit_of(item)
        if unit != self.unit:
            self.held.close()
            exclusive = any(whole_machine(i) for i in item.session.items if self._unit_of(i) == unit)
            self.held.enter_context(machinelock.turn(exclusive, f"{self.lane} lane: {unit}"))
            self.unit = unit
        try:
            yield
        finally:
            if nextitem is None or self._unit_of(nextitem) != unit:
                self.held.close()
                self.unit = None

    def pytest_sessionfinish(self, session):
        self.held.close()
