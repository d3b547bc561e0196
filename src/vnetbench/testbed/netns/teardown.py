"""Unwind a run from its journal: reverse order, bounded, past failures, idempotent.

Teardown holds the run's lock (``Run.locked``): a run that another live process
is still building is left alone (RunBusyError), never half-removed under it.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pyroute2 import netns

from vnetbench import signals
from vnetbench.errors import BuildError, Interrupted, VnetbenchError
from vnetbench.inputs import excerpt
from vnetbench.linux import proc
from vnetbench.state import Run


def teardown(run: Run, budget_s: float = 20.0) -> list[str]:
    """Remove everything the run journaled; returns the failures (empty when clean).

    The run directory goes last, and only when every step succeeded, so that a
    later ``cleanup`` can retry whatever could not be removed now.
    """
    with run.locked(), signals.deferred():      # an interrupt waits for the (bounded) end
        errors = []
        deadline = time.monotonic() + budget_s
        sweep = _NetnsSweep()
        for group in _groups(reversed(run.entries())):
            if time.monotonic() > deadline:
                errors.append(f"teardown budget of {budget_s:.0f} s exhausted at {_label(group[0])}")
                break
            if len(group) > 1:
                errors += _undo_daemons(run, group)
                continue
            entry = group[0]
            try:
                if entry["kind"] == "netns":
                    sweep.remove(run, entry)
                else:
                    _undo(entry["kind"])(run, entry)
            except Exception as exc:  # keep unwinding: one stuck object must not strand the rest
                errors.append(_failed(entry, exc))
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


def _failed(entry, exc) -> str:
    return f"{excerpt(entry['kind'])} {_label(entry)}: {excerpt(str(exc), 200)}"


def _groups(entries):
    """The journal's entries in teardown order, consecutive daemons in one group: they are
    stopped together (each host's ovs-vswitchd takes ~0.5 s to exit with 128 ports; one
    after another, 8 hosts took 4.3 s of a 4.8 s teardown, issue 24)."""
    group: list = []
    for entry in entries:
        if entry.get("kind") == "daemon":
            group.append(entry)
            continue
        if group:
            yield group
            group = []
        yield [entry]
    if group:
        yield group


def _undo_daemons(run: Run, entries) -> list[str]:
    """Stop ENTRIES' daemons on threads, each as ``_undo_daemon`` does; their failures."""
    def one(entry):
        try:
            _undo_daemon(run, entry)
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


def _label(entry):
    return excerpt(str(entry.get("name") or entry.get("pidfile") or entry.get("pid")
                       or entry.get("state") or ""), 80)


def _undo_netns(run: Run, entry):
    """One namespace alone (the teardown loop sweeps its namespaces together)."""
    sweep = _NetnsSweep()
    sweep.remove(run, entry)
    errors = sweep.finish()
    if errors:
        raise RuntimeError(errors[0])


class _NetnsSweep:
    """A teardown's namespaces: the processes inside them found by one scan of /proc
    (taken at the first namespace: the daemons journaled after it are gone by then), each
    stopped, the namespace unmounted; ``finish`` scans once more for a process that
    entered one meanwhile. A scan per namespace made teardown quadratic (1,024 VMs:
    1,033 scans of every process, issue 24)."""

    def __init__(self):
        self.members = None
        self.removed: dict[str, tuple[int, int]] = {}

    def remove(self, run: Run, entry) -> None:
        name = entry["name"]
        if not isinstance(name, str) or not name.startswith(f"vnb-{run.run_id}-") or "/" in name:
            raise ValueError(f"journal names foreign namespace {excerpt(name)}; left alone")
        path = os.path.join(netns.NETNS_RUN_DIR, name)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return
        if self.members is None:
            self.members = proc.netns_members()
        key = (st.st_dev, st.st_ino)
        for pid in self.members.get(key, ()):   # inside our namespace: ours (e.g. a VM's iperf3)
            proc.stop(pid, lambda p: _netns_of(p) == key, grace=0.2)   # still it, not a reused pid
        netns.remove(name)
        self.removed[name] = key

    def finish(self) -> list[str]:
        """Stop what is still inside a namespace just removed; name what would not stop."""
        keys = {key: name for name, key in self.removed.items()}
        if not keys:
            return []
        errors = []
        for key, pids in proc.netns_members().items():
            for pid in pids if key in keys else ():
                proc.stop(pid, lambda p: _netns_of(p) == key, grace=0.2)
                if _netns_of(pid) == key:
                    errors.append(f"netns {keys[key]}: pid {pid} still inside after it was removed")
        return errors


def _netns_of(pid: int):
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return st.st_dev, st.st_ino


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


def _undo_nothing(run: Run, entry):
    """A change that created nothing (a vnet deprovisioned while the run was up)."""


def _undo(kind: str):
    """The undo step of KIND: here, or in the backend that journals it (imported when met,
    so 'cleanup' removes every backend's objects)."""
    if kind in _UNDO:
        return _UNDO[kind]
    if kind not in _ELSEWHERE:
        raise ValueError(f"unknown journal entry kind {excerpt(kind)}")
    module, func = _ELSEWHERE[kind].split(":")
    import importlib
    return getattr(importlib.import_module(module), func)


# kinds other backends journal on top of the netns ones
_ELSEWHERE = {"domain": "vnetbench.testbed.libvirt.undo:undo_domain",
              "tap": "vnetbench.testbed.libvirt.undo:undo_tap",
              "muxdir": "vnetbench.testbed.libvirt.undo:undo_muxdir",
              "remote_dir": "vnetbench.testbed.libvirt.undo:undo_remote_dir",
              "remote_bridge": "vnetbench.testbed.libvirt.undo:undo_remote_bridge",
              "remote_process": "vnetbench.testbed.libvirt.undo:undo_remote_process",
              "stack": "vnetbench.testbed.openstack.undo:undo_stack",
              # an all-in-one cloud's registration: the AIO's own `down`
              "aio": "vnetbench.aio.registry:undo_aio",
              # the partial root of an interrupted root build: its processes, its tree
              "aio_root": "vnetbench.aio.rootbuild:undo_root_build"}

_UNDO = {
    "netns": _undo_netns,
    "daemon": _undo_daemon,
    "process": _undo_process,
    "file": _undo_file,
    "deprovision": _undo_nothing,
    "router_interface_removed": _undo_nothing,
}
