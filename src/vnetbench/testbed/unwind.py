"""The one unwinder: undo a run's journal, whatever backend wrote it, in reverse order,
bounded, past failures, idempotent.

Each backend registers the undo steps of the entries it journals: its ``undo`` module
holds ``STEPS``, a ``Step`` per kind of entry (``netns`` for namespaces, ``domain`` for
libvirt's guests, ``stack`` for Heat, ``aio`` for an all-in-one cloud's registration).
The unwinder reads those modules lazily, in ``UNDO_MODULES`` order and only as far as a
journal needs (a netns run's teardown never imports libvirt or openstacksdk), so
``vnetbench cleanup`` removes any backend's objects after a crash. What every backend
journals through ``state.Run`` (a daemon, a process, a file) is undone here.

Teardown holds the run's lock (``Run.locked``): a run that another live process is still
building is left alone (RunBusyError), never half-removed under it.
"""

from __future__ import annotations

import importlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from vnetbench import signals
from vnetbench.errors import BuildError, Interrupted, VnetbenchError
from vnetbench.inputs import excerpt
from vnetbench.linux import proc
from vnetbench.state import Run

# each backend's module of undo steps (its STEPS), read in this order until a kind is found
UNDO_MODULES = ("vnetbench.testbed.netns.undo", "vnetbench.testbed.libvirt.undo",
                "vnetbench.testbed.openstack.undo", "vnetbench.aio.undo")


@dataclass(frozen=True)
class Step:
    """How one kind of journal entry is undone.

    ``undo(run, entry)`` removes one entry's object. ``parallel``: consecutive entries of
    the kind are undone together on threads (each host's ovs-vswitchd takes ~0.5 s to
    exit with 128 ports; one after another, 8 hosts took 4.3 s of a 4.8 s teardown).
    ``sweep``: a class made once per teardown whose ``remove(run, entry)`` takes each entry
    and whose ``finish()`` returns the errors left at the end (namespaces: one scan of
    /proc for all of them instead of one per namespace)."""

    undo: Callable[[Run, dict], None] | None = None
    parallel: bool = False
    sweep: type | None = None


def teardown(run: Run, budget_s: float = 20.0) -> list[str]:
    """Remove everything the run journaled; returns the failures (empty when clean).

    The run directory goes last, and only when every step succeeded, so that a
    later ``cleanup`` can retry whatever could not be removed now.
    """
    with run.locked(), signals.deferred():      # an interrupt waits for the (bounded) end
        errors = []
        deadline = time.monotonic() + budget_s
        sweeps: dict[str, object] = {}
        for group in _groups(reversed(run.entries())):
            if time.monotonic() > deadline:
                errors.append(f"teardown budget of {budget_s:.0f} s exhausted at {_label(group[0])}")
                break
            errors += _undo_group(run, group, sweeps)
        for sweep in sweeps.values():
            errors += sweep.finish()
        if not errors:
            errors = _stray_processes(run)
        if errors:
            run.write_meta(status="teardown-failed", errors=errors)
        else:
            run.remove()
        return errors


def unwind(run: Run, exc: BaseException, source: str) -> None:
    """Tear a failed or interrupted bring-up down, then raise what the caller should
    see. An interrupt while unwinding stops it; the journal stays for cleanup."""
    try:
        errors = teardown(run)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while unwinding run {run.run_id}; remove the rest "
                          f"with 'vnetbench cleanup --run {run.run_id}'") from None
    left = f"; teardown also failed, run 'vnetbench cleanup --run {run.run_id}': {errors[0]}" \
        if errors else ""
    if signals.pending() and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
        exc = KeyboardInterrupt()      # Ctrl-C also killed the step's child: report the interrupt
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        if errors:
            raise Interrupted(f"interrupted; run {run.run_id} only partly unwound{left}") from None
        raise exc
    detail = str(exc) if isinstance(exc, VnetbenchError) else f"{type(exc).__name__}: {exc}"
    raise BuildError(f"{source}: bring-up of run {run.run_id} failed and was "
                     f"unwound: {detail}{left}") from exc


def remove_stale(dirs) -> list[Path]:
    """Delete half-made run directories whose creator died before publishing them
    (nothing is ever built in one); a locked one is still being made."""
    removed = []
    for path in dirs:
        run = Run(path.name, path.parent)      # Run.dir is then exactly ``path``
        try:
            with run.locked():
                run.remove()
            removed.append(path)
        except VnetbenchError:
            continue
    return removed


def step(kind) -> Step:
    """The registered step of KIND; ValueError for a kind no backend journals (naming a
    backend whose undo steps could not be loaded: the entry may be its)."""
    unloaded = []
    if isinstance(kind, str):
        if kind in _CORE:
            return _CORE[kind]
        for name in UNDO_MODULES:
            try:
                steps = _steps_of(name)
            except ImportError as exc:
                unloaded.append(f"{name} could not be loaded: {excerpt(str(exc), 120)}")
                continue
            if kind in steps:
                return steps[kind]
    raise ValueError(f"unknown journal entry kind {excerpt(str(kind))}"
                     + (f" ({'; '.join(unloaded)})" if unloaded else ""))


def _steps_of(module: str) -> dict:
    if module not in _LOADED:
        _LOADED[module] = dict(importlib.import_module(module).STEPS)
    return _LOADED[module]


_LOADED: dict[str, dict] = {}


def _undo_group(run: Run, group, sweeps) -> list[str]:
    """One entry, or consecutive entries of a parallel kind; the failures."""
    kind = group[0]["kind"]
    try:
        how = step(kind)
    except ValueError as exc:
        return [_failed(entry, exc) for entry in group]
    if how.parallel and len(group) > 1:
        return _undo_together(run, how, group)
    entry = group[0]
    try:
        if how.sweep is not None:
            if kind not in sweeps:
                sweeps[kind] = how.sweep()
            sweeps[kind].remove(run, entry)
        else:
            how.undo(run, entry)
    except Exception as exc:  # keep unwinding: one stuck object must not strand the rest
        return [_failed(entry, exc)]
    return []


def _groups(entries):
    """The journal's entries in teardown order; consecutive entries of a parallel kind in
    one group, every other entry alone."""
    group: list = []
    for entry in entries:
        if group and entry.get("kind") == group[0].get("kind"):
            group.append(entry)
            continue
        if group:
            yield group
        group = [entry]
        if not _parallel(entry.get("kind")):
            yield group
            group = []
    if group:
        yield group


def _parallel(kind) -> bool:
    try:
        return step(kind).parallel
    except ValueError:
        return False


def _undo_together(run: Run, how: Step, entries) -> list[str]:
    """Undo ENTRIES on threads; their failures."""
    def one(entry):
        try:
            how.undo(run, entry)
        except Exception as exc:
            return _failed(entry, exc)
        return None
    with ThreadPoolExecutor(max_workers=min(16, len(entries))) as pool:
        return [e for e in pool.map(one, entries) if e]


def _stray_processes(run: Run) -> list[str]:
    """Commands the builder was running when it died (e.g. an ovs-vsctl waiting on
    the run's database): ours because an argument names the run's own directory."""
    mark = f"{run.dir}/"
    for pid in proc.pids_naming(mark):
        proc.stop(pid, lambda p: any(mark in a for a in proc.argv(p)), grace=0.5)
    left = proc.pids_naming(mark)
    return [f"pid {pid} ({excerpt(' '.join(proc.argv(pid)), 80)}) did not exit" for pid in left]


def _failed(entry, exc) -> str:
    return f"{excerpt(str(entry.get('kind')))} {_label(entry)}: {excerpt(str(exc), 200)}"


def _label(entry):
    return excerpt(str(entry.get("name") or entry.get("pidfile") or entry.get("pid")
                       or entry.get("state") or ""), 80)


# --- what every backend journals through state.Run --------------------------------

def _undo_daemon(run: Run, entry):
    """A daemon that detached itself: its pid is in its pidfile, or (if it died
    before writing it) found by the run-unique ``--pidfile=`` argument."""
    pidfile, mark = Path(entry["pidfile"]), entry["argmark"]
    if not isinstance(mark, str) or str(run.dir) not in mark:
        raise ValueError(f"journal names a foreign daemon mark {excerpt(mark)}; left alone")
    try:
        first = {int(pidfile.read_text().strip())}
    except (OSError, ValueError):
        first = set()
    for _ in range(3):     # a daemon detaching itself may fork once while we look
        pids = first | set(proc.pids_with_arg(mark))
        first = set()
        if not pids:
            return
        for pid in pids:
            if not proc.stop(pid, lambda p: mark in proc.argv(p), grace=entry.get("grace_s", 1.0)):
                if mark in proc.argv(pid):
                    raise RuntimeError(f"pid {pid} did not exit")


def _undo_process(run: Run, entry):
    pid, start = entry["pid"], entry["starttime"]
    if not proc.stop(pid, lambda p: proc.starttime(p) == start):
        if proc.starttime(pid) == start:
            raise RuntimeError(f"pid {pid} did not exit")


def _undo_file(run: Run, entry):
    """A file the run wrote outside its own directory (e.g. a scrape target list)."""
    Path(entry["path"]).unlink(missing_ok=True)


_CORE = {"daemon": Step(_undo_daemon, parallel=True),
         "process": Step(_undo_process),
         "file": Step(_undo_file)}
