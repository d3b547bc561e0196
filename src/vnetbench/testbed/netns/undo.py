"""The netns backend's undo steps (``testbed.unwind`` reads ``STEPS``): its namespaces,
each with whatever runs inside it, and the changes that created nothing."""

from __future__ import annotations

import os

from pyroute2 import netns

from vnetbench.inputs import excerpt
from vnetbench.linux import proc
from vnetbench.state import Run
from vnetbench.testbed.unwind import Step


class NetnsSweep:
    """A teardown's namespaces: the processes inside them found by one scan of /proc
    (taken at the first namespace: the daemons journaled after it are gone by then), each
    stopped, the namespace unmounted; ``finish`` scans once more for a process that
    entered one meanwhile. A scan per namespace made teardown quadratic (1,024 VMs:
    1,033 scans of every process)."""

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
            proc.stop(pid, lambda p: proc.netns_of(p) == key, grace=0.2)   # still it, not a reused pid
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
                proc.stop(pid, lambda p: proc.netns_of(p) == key, grace=0.2)
                if proc.netns_of(pid) == key:
                    errors.append(f"netns {keys[key]}: pid {pid} still inside after it was removed")
        return errors


def undo_netns(run: Run, entry) -> None:
    """One namespace alone (a port removed from a running testbed)."""
    sweep = NetnsSweep()
    sweep.remove(run, entry)
    errors = sweep.finish()
    if errors:
        raise RuntimeError(errors[0])


def _nothing(run: Run, entry) -> None:
    """A change that created nothing (a vnet deprovisioned, a router interface removed
    while the run was up): journaled for the record, nothing to undo."""


STEPS = {"netns": Step(undo_netns, sweep=NetnsSweep),
         "deprovision": Step(_nothing),
         "router_interface_removed": Step(_nothing)}
