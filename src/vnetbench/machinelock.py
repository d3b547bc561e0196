"""Turns on one machine: measurements that need its CPUs to themselves, beside work that can wait.

Two vnetbench sessions on one machine (the test command's two lanes, or two engineers'
runs) share its CPUs: a data-plane CPU share, a rate or a pause measured while the other
session works is partly the other's, and its verdict is then the neighbour's. With
``VNETBENCH_MACHINE_LOCK`` naming a lock file, every unit of work (a test, a functional
row) holds the lock *shared* and a measurement that needs the whole machine holds it
*exclusive*: it waits until the running units end, and new ones wait for it.

flock(2) alone would let a stream of shared holders starve an exclusive one (each unit
re-takes the lock the moment the previous ends), so a turnstile file comes first: the
exclusive holder keeps it while it waits and works, and a shared holder passes through
it (takes it and lets go) before taking the lock. The kernel drops both when a holder
dies, however it dies.

Holding is not nested: while a process holds a turn, ``VNETBENCH_MACHINE_LOCK_HELD`` is
set in its environment, and it and its children (a ``vnetbench functional`` a test runs)
take no turn of their own: the outer holder's mode decides.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time

from vnetbench.errors import VnetbenchError

ENV = "VNETBENCH_MACHINE_LOCK"
HELD = "VNETBENCH_MACHINE_LOCK_HELD"
POLL_S = 0.2
NOTE_AFTER_S = 1.0        # a shorter wait is not worth a line
DEFAULT_TIMEOUT_S = 3600.0


class MachineBusyError(VnetbenchError):
    """The lock was not granted in time: another session held the machine too long."""


def _take(fd: int, mode: int, deadline: float, path: str, holder_file: str) -> None:
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise MachineBusyError(f"{path}: not granted within the time-out (held by "
                                       f"{_read(holder_file) or 'work holding a share'}); "
                                       f"see what that session runs, or unset {ENV}") from None
            time.sleep(POLL_S)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read(300).strip()
    except OSError:
        return ""


def _write(path: str, text: str) -> None:
    """Who holds the machine, for the time-out message of whoever waits for it."""
    with contextlib.suppress(OSError), open(path, "w") as f:
        f.write(text)


def _open(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


@contextlib.contextmanager
def turn(exclusive: bool, who: str, path: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
    """Hold the machine (``exclusive``) or a share of it while the body runs; yields the
    seconds waited. Without ``path`` or ``VNETBENCH_MACHINE_LOCK``, or inside another
    turn, it holds nothing and yields 0."""
    path = path or os.environ.get(ENV)
    if not path or os.environ.get(HELD):
        yield 0.0
        return
    start, deadline = time.monotonic(), time.monotonic() + timeout_s
    lock, gate = _open(path), _open(path + ".turnstile")
    holder_file = path + ".holder"
    try:
        _take(gate, fcntl.LOCK_EX, deadline, path, holder_file)
        if exclusive:
            _take(lock, fcntl.LOCK_EX, deadline, path, holder_file)
        else:
            try:
                _take(lock, fcntl.LOCK_SH, deadline, path, holder_file)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
        waited = time.monotonic() - start
        if exclusive:
            _write(holder_file, f"pid {os.getpid()}: {who}\n")
        if waited >= NOTE_AFTER_S:
            print(f"machine lock: {who} waited {waited:.1f} s for "
                  f"{'the whole machine' if exclusive else 'its share'}", file=sys.stderr, flush=True)
        os.environ[HELD] = "exclusive" if exclusive else "shared"
        try:
            yield waited
        finally:
            os.environ.pop(HELD, None)
            if exclusive:
                _write(holder_file, "")
    finally:
        os.close(lock)        # closing drops the flock
        os.close(gate)


class Turns:
    """Turns for a sequence of work items (a pytest session's tests): consecutive items of
    one unit (``unit_of(item)``: a testbed's lifetime, a test, a block of whole-machine
    tests) share one turn, exclusive when any item of the unit needs the whole machine
    (``whole(item)``). What runs between a unit's items (its testbed, its guests) then
    never runs beside another session's whole-machine measurement."""

    def __init__(self, unit_of, whole):
        self.unit_of, self.whole = unit_of, whole
        self.unit, self.held = None, contextlib.ExitStack()

    def enter(self, item, items) -> None:
        """Before ``item`` runs (``items``: the whole sequence, to see its unit whole)."""
        unit = self.unit_of(item)
        if unit == self.unit:
            return
        self.release()
        exclusive = any(self.whole(i) for i in items if self.unit_of(i) == unit)
        who = unit if isinstance(unit, str) else " ".join(str(u) for u in unit if u is not None)
        self.held.enter_context(turn(exclusive, who))
        self.unit = unit

    def leave(self, next_item) -> None:
        """After an item: the turn ends with its unit."""
        if next_item is None or self.unit_of(next_item) != self.unit:
            self.release()

    def release(self) -> None:
        self.held.close()
        self.unit = None
