"""The all-in-one cloud as a run of vnetbench's state root, so `vnetbench cleanup` knows it.

`aio up` makes a run directory of kind ``aio`` in the state root (``vnetbench.state``,
``$VNETBENCH_STATE_DIR``), under the AIO's own run id (the one its names carry), before
the AIO's first resource exists; its journal holds one entry, the AIO's state dir. The
run stays locked while `up` or `down` works on it, so a concurrent `cleanup` leaves it
alone ("in use"), and the lock goes when that process dies, however it dies. The AIO's
meta.json names the run directory, so `aio down` finds it whatever the environment and
removes it last. `vnetbench cleanup` unwinds the run like any other: the journal entry's
undo step (``undo_aio``) is the AIO's own `down`.

An AIO is its state dir's only while that dir's journal lists something and its meta.json
names the same run id (``vnetbench.aio.cloud.owned_meta``): a registration whose state dir
is gone, holds nothing, or holds another AIO is dropped and nothing else is touched.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from vnetbench.aio.cloud import Aio, owned_meta
from vnetbench.state import AIO, RUN_ID_RE, Run, state_root


def register(aio: Aio) -> Run:
    """The run of AIO (its run id, in the state root), journaled and locked by this
    process, before anything of the AIO is made."""
    run = Run(aio.lay.run_id, state_root())
    run.create(kind=AIO, name=f"aio-{run.run_id}", status="building", state=str(aio.state),
               builder_pid=os.getpid(), created=time.time())
    run.record(AIO, state=str(aio.state))
    return run


def registration(aio: Aio) -> Run | None:
    """AIO's run, from the path its meta.json names (None: an AIO from before registration,
    or its run is gone)."""
    path = aio.registration
    if path is None or not RUN_ID_RE.match(path.name) or path.name != aio.lay.run_id:
        return None
    run = Run(path.name, path.parent)
    return run if run.dir.is_dir() and run.meta().get("state") == str(aio.state) else None


def _held(run: Run | None):
    """RUN's lock for the block (RunBusyError if another live process holds it)."""
    return run.locked() if run is not None else contextlib.nullcontext()


def up(aio: Aio, image: Path, progress=print) -> Path:
    """``aio.up`` with its registration: made first for a new AIO (and removed again if
    `up` fails before the AIO's journal is its own: nothing of it was made), held while
    `up` runs. An AIO already in the state dir keeps the registration it has."""
    if aio.journal.entries():           # up already, or partly: `up` says which
        with _held(registration(aio)):
            return aio.up(image, progress)
    run = register(aio)
    progress(f"aio: run {run.run_id}, registered in {run.root} ('vnetbench cleanup --run "
             f"{run.run_id}' removes it, also after a crash)")
    try:
        path = aio.up(image, progress, registration=run.dir)
        run.write_meta(status="up", clouds=str(path))
        return path
    except BaseException:
        if owned_meta(aio.state).get("run_id") != run.run_id:
            run.remove()
        raise
    finally:
        run.unlock()


def down(aio: Aio, progress=print) -> list[str]:
    """``aio.down`` holding its registration, which goes last, once nothing is left."""
    run = registration(aio)
    with _held(run):
        problems = aio.down(progress)
        if run is not None:
            if problems:
                run.write_meta(status="teardown-failed", errors=problems)
            else:
                run.remove()
    return problems


def gone(run: Run, state: Path) -> str:
    """Why RUN registers no AIO any more ('' when its AIO is in STATE): the state dir
    is gone, holds no AIO, or holds another one."""
    if not state.is_dir():
        return f"its AIO's state dir {state} is gone"
    claimed = owned_meta(state).get("run_id")
    if claimed is None:
        return f"{state} holds no AIO (its journal lists nothing)"
    if claimed != run.run_id:
        return f"{state} holds another AIO (run {claimed})"
    return ""


def is_aio(run: Run) -> bool:
    """RUN registers an AIO: by its meta, or by its journal if the meta is damaged (so a
    `cleanup --backend netns` never takes an AIO for a testbed of that backend)."""
    return run.meta().get("kind") == AIO or any(e["kind"] == AIO for e in run.entries())


def _entry_state(entry: dict) -> Path | None:
    """The absolute state dir a journal entry names, or None."""
    state = entry.get("state")
    return Path(state) if isinstance(state, str) and os.path.isabs(state) else None


def state_of(run: Run) -> Path | None:
    """The state dir RUN's journal registers."""
    return next((s for e in run.entries() if e["kind"] == AIO and (s := _entry_state(e))), None)


def fate(run: Run) -> str:
    """What `cleanup` removes of RUN, said before it does: its AIO, or only the
    registration (and why)."""
    state = state_of(run)
    if state is None:
        return "the registration of an AIO (its journal names no state dir)"
    reason = gone(run, state)
    return f"the registration only: {reason}" if reason else f"the AIO in {state}"


def undo_aio(run: Run, entry: dict) -> None:
    """The teardown step of a journaled AIO (``vnetbench cleanup``): its own `down`, if
    the state dir still holds this run's AIO; nothing otherwise."""
    state = _entry_state(entry)
    if state is None:
        raise ValueError(f"journal names no absolute state dir ({entry.get('state')!r}); left alone")
    if gone(run, state):
        return
    problems = Aio(state).down(progress=lambda msg: None)
    if problems:
        raise RuntimeError("; ".join(problems))
