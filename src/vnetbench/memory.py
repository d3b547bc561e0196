"""Resident memory of the control plane's daemons over a window (issue 48: what a step of
new ports costs the control plane in memory, beside what it costs in CPU).

Which processes: exactly those of vnetbench.cpu's window, from the run's pidfiles, never
found by name: each host's own daemons (``Deployment.vswitch_pids``: ovs-vswitchd, its
ovsdb-server, ovn-controller, an agent) and the controller namespace's
(``Deployment.controller_pids``: OVN's NB and SB ovsdb-servers and ovn-northd, an SDN
controller). They are named as the CPU split names them (``procfs.find_processes``: the
executable, an ovsdb-server qualified by its pidfile: ``ovsdb-server-nb``,
``ovsdb-server-sb``), and each belongs to the same part (``controller``: the controller
namespace's daemons and, on a host, ovn-controller and agents, ``attribution.role``;
``vswitch``: the rest).

Method: each process's ``Rss:`` from ``/proc/PID/smaps_rollup`` (the kernel walks the
page tables: exact at that instant), or ``VmRSS:`` from ``/proc/PID/status`` where
smaps_rollup cannot be read (a kernel before 4.14; a process this user may not
ptrace-read): the status counters are updated in batches, per thread or per CPU, so
they may lag by a few pages (proc(5) calls them inaccurate). Each window says which
(``method``: ``smaps_rollup``, ``status`` or ``mixed``).

Figures, in MiB (2^20 bytes; the kernel's "kB" are KiB), read once as the window opens
and once as it closes:

* ``rss_<component>_mib``: at the window's end, summed over that component's processes
  (``rss_ovn_controller_mib`` over every host and light chassis);
* ``rss_<component>_growth_mib``: its end minus its start over the same processes;
* ``rss_controller_mib``, ``rss_vswitch_mib`` and their ``_growth_mib``: the totals per
  part, as ``cpu_controller_pct`` and ``cpu_vswitch_pct`` are.

RSS counts the pages a process shares (the executable's text, libraries) in every
process that maps them: a sum over 50 ovn-controllers holds the binary's resident text
50 times, so it overstates their footprint on one machine; the growth is what the
processes touched during the window (their heap, their databases' rows) and is not
inflated. A component whose processes changed during the window (one restarted, one
gone) has no growth: the two sums would not be of the same processes (``changed``).
"""

from __future__ import annotations

import re
from pathlib import Path

from vnetbench import cpu
from vnetbench_collector import attribution, procfs

MIB = 1024.0                   # KiB per MiB
PARTS = attribution.TASK_PARTS            # ("vswitch", "controller")
SMAPS, STATUS, MIXED = "smaps_rollup", "status", "mixed"
_FIELD = re.compile(r"^(?:Rss|VmRSS):\s+(\d+)\s+kB\s*$", re.MULTILINE)


def rss_kib(text: str | None) -> int | None:
    """The resident set in KiB from a /proc/PID/smaps_rollup (``Rss:``) or
    /proc/PID/status (``VmRSS:``) text; None when it has none (a kernel thread, a
    zombie, a process gone while it was read)."""
    m = _FIELD.search(text or "")
    return int(m.group(1)) if m else None


def daemons(deployment, proc: Path = Path("/proc")) -> dict[int, tuple[str, str]]:
    """pid -> (part, component) of the window's daemons: the pidfiles' pids of every host
    and of the controller namespace (vnetbench.cpu's), named as the CPU split names them."""
    out: dict = {}
    for host in deployment.testbed.hosts:
        for pid, name in procfs.find_processes(proc, (), cpu.host_daemons(deployment, host)).items():
            out[pid] = (attribution.role(name), name)
    for pid, name in procfs.find_processes(proc, (), dict(cpu.controller_daemons(deployment))).items():
        out[pid] = (attribution.TASK_PARTS[1], name)
    return out


def read_one(proc: Path, pid: int) -> tuple[int | None, str]:
    """One process's RSS (KiB) and the file it came from (smaps_rollup, else status)."""
    kib = rss_kib(_text(proc / str(pid) / "smaps_rollup"))
    if kib is not None:
        return kib, SMAPS
    return rss_kib(_text(proc / str(pid) / "status")), STATUS


def _text(path: Path) -> str | None:
    """A /proc file's text, or None: the process is gone, or its smaps_rollup is not
    ours to read (EACCES) or not in this kernel."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def read(found: dict[int, tuple[str, str]], proc: Path = Path("/proc")) -> tuple[dict, set]:
    """{pid: (part, component, KiB)} of the daemons still there, and the methods used."""
    out, methods = {}, set()
    for pid, (part, component) in sorted(found.items()):
        kib, method = read_one(proc, pid)
        if kib is not None:
            out[pid] = (part, component, kib)
            methods.add(method)
    return out, methods


def metrics(start: dict, end: dict) -> tuple[dict, list[str]]:
    """The record's figures from two ``read``s (see the module's docstring), and the
    components without growth because their processes changed in between."""
    out, changed = {}, []
    # both parts whenever anything was read, as cpu_controller_pct and cpu_vswitch_pct
    # are: a kind without a controller holds 0 MiB there (no process), not an absent figure
    parts = {p: (set(), set(), 0, 0) for p in PARTS} if (start or end) else {}
    groups = {**_groups(start, end, by_part=False), **parts, **_groups(start, end, by_part=True)}
    for key, (pids_a, pids_b, kib_a, kib_b) in sorted(groups.items()):
        out[f"rss_{key}_mib"] = kib_b / MIB
        if pids_a == pids_b:
            out[f"rss_{key}_growth_mib"] = (kib_b - kib_a) / MIB
        else:
            changed.append(key)
    return out, changed


def _groups(start: dict, end: dict, by_part: bool) -> dict:
    """key -> (pids at start, pids at end, KiB at start, KiB at end); key: the part, or
    the component with "-" as "_" (a record metric's name, as cpu_<component>_pct)."""
    out: dict = {}
    for which, reading in ((0, start), (1, end)):
        for pid, (part, component, kib) in reading.items():
            key = part if by_part else component.replace("-", "_")
            g = out.setdefault(key, [set(), set(), 0, 0])
            g[which].add(pid)
            g[2 + which] += kib
    return {k: tuple(v) for k, v in out.items() if v[1]}


class Window:
    """The daemons' RSS over a with-block: ``with Window(dep) as w: ...; w.metrics()``;
    ``result`` says how it was measured, or why it was not (hosts on other machines)."""

    def __init__(self, deployment, proc: Path = Path("/proc")):
        self.proc, self.start, self.methods = proc, {}, set()
        self.remote = getattr(deployment, "cpu_source", None) is not None
        self.found = {} if self.remote else daemons(deployment, proc)
        self.figures: dict = {}
        self.result: dict = {}

    def __enter__(self):
        self.start, self.methods = read(self.found, self.proc)
        return self

    def __exit__(self, *exc):
        end, methods = read(self.found, self.proc)
        self.figures, changed = metrics(self.start, end)
        methods |= self.methods
        self.result = {"unit": "MiB", "processes": len(end),
                       "method": (methods.pop() if len(methods) == 1 else MIXED) if methods else None,
                       **({"changed": changed} if changed else {})}
        if self.remote:
            self.result = {"not_measured": "the hosts are other machines: their daemons' memory is "
                                           "their own collector's, not this machine's /proc"}
        return False

    def metrics(self) -> dict:
        return dict(self.figures)
