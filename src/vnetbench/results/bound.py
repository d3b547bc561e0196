"""Emulation-bound measurements: where this machine, not the system compared, set the number.

The embedded testbed runs in user space what the modelled systems run in the kernel or in
compiled code: OVS's datapath (here the userspace ``netdev`` datapath on AF_PACKET ports,
since this kernel has no OVS module), the vRouter's flow setup (here a Python agent), the
Floodlight controller's packet-in handling (here an os-ken app in Python). When such a
component sat at its CPU ceiling during a measurement, the number says how fast the
emulation runs on this machine, not how the system behaves, and a ranking of columns on
that row is not the systems' ranking (issue 22: every OVS-based column at 0.6-0.9 Gbit/s
against Linux bridge's 15 for exactly this reason).

The rule reads the measurement's own CPU split by component and thread class, per host
(each repetition's window, ``extra.repetitions[*].cpu.hosts[*].components``, vnetbench.cpu;
a testbed-wide sum would add two hosts' half-busy threads into one "saturated" one): a
component that EMULATES what the modelled system does elsewhere marks the cell when, in
some repetition, it used at least CEILING_PCT of one CPU, or its host's CPUs were
saturated (SATURATED_PCT busy with anything: guests included) and it took at least
DOMINANT of that -- on a host whose one CPU the guests share, the emulated datapath never
reaches 90% and still is what the CPU ran out on. It names components and thread
classes; each kind lists its own (``Kind.emulated``): an os-ken controller is the
Floodlight model's emulation but Faucet itself, and the same ovs-vswitchd main thread on
a real cloud's kernel datapath is not emulation (the record's ``ovs_datapath`` says which).
A saturated guest iperf3 is the workload, not a component at all.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass
from typing import Callable

#: the share of one CPU at which a single-threaded component counts as saturated: the
#: netdev datapath's main thread polls every non-PMD port in one thread, and the Python
#: models are bound by one interpreter lock, so one CPU is their ceiling
CEILING_PCT = 90.0
#: a host's CPUs count as saturated at this share busy (% of its CPUs), and a component
#: as what they ran out on when it took at least this fraction of that busy time
SATURATED_PCT = 90.0
DOMINANT = 0.5


@dataclass(frozen=True)
class Emulated:
    """A component (process name, or a prefix of it ending in '-') and thread class
    ("" = every class) that stands in for something the modelled system does in the
    kernel or in compiled code; ``applies`` tells from a record's provenance whether it
    does in that record."""
    component: str
    thread_class: str
    stands_for: str
    applies: Callable[[dict], bool] = lambda provenance: True

    def matches(self, component: str, thread_class: str) -> bool:
        name = component == self.component or (self.component.endswith("-")
                                               and component.startswith(self.component))
        return name and self.thread_class in ("", thread_class)


@functools.lru_cache(maxsize=256)
def rules(vswitch: str | None) -> tuple[Emulated, ...]:
    """The emulating components of a record's vSwitch kind (``Kind.emulated``: the same
    process is an emulation in one kind and the real thing in another, e.g. an os-ken
    controller); every kind's rules for a label no kind is registered as."""
    from vnetbench import kinds
    try:
        return kinds.get(vswitch).emulated
    except kinds.UnknownKind:
        return tuple(dict.fromkeys(e for k in kinds.all_kinds() for e in k.emulated))


@dataclass(frozen=True)
class Bound:
    """One saturated emulating component of one measurement."""
    component: str            # "ovs-vswitchd/main", or "h1: ovs-vswitchd/main"
    peak_pct: float           # its CPU% of one CPU in the repetition that marked it
    stands_for: str
    busy_pct: float | None = None   # its host's CPUs busy then, when that decided it

    def text(self) -> str:
        busy = f" of a saturated host ({self.busy_pct:.0f}% busy)" if self.busy_pct is not None else ""
        return f"{self.component} at {self.peak_pct:.0f}% of a CPU{busy} ({self.stands_for})"


def _components(comps: dict) -> dict[tuple[str, str], float]:
    """{(component, thread class): %} from a split's 'part/component/class' -> %: the
    component's own runtime and the interrupts in its context add up (disjoint parts,
    all the thread's time)."""
    out: dict[tuple[str, str], float] = {}
    for key, pct in comps.items():
        part, _, rest = key.partition("/")
        component, _, thread_class = rest.rpartition("/")
        if part in ("vswitch", "controller", "softirq_in_vswitch", "hardirq") and component:
            out[(component, thread_class)] = out.get((component, thread_class), 0.0) + pct
    return out


def _scopes(window: dict):
    """(host or "", components, busy % or None, CPUs) per host of a window; records from
    before the per-host split give their testbed-wide components (busy unknown)."""
    hosts = {h: v for h, v in (window.get("hosts") or {}).items() if isinstance(v, dict) and "components" in v}
    if not hosts:
        yield "", _components(window.get("components") or {}), None, 0
        return
    for host, v in hosts.items():
        yield host, _components(v["components"]), v.get("busy_pct"), v.get("cpus") or 0


def bound(record, ceiling_pct: float = CEILING_PCT) -> list[Bound]:
    """The emulating components that sat at their ceiling during RECORD's measurement,
    each with its worst repetition."""
    if record is None:
        return []
    prov = record.provenance or {}
    emulated = rules((record.labels or {}).get("vswitch"))
    found: dict[str, Bound] = {}
    for rep in (record.extra or {}).get("repetitions") or []:
        for host, comps, busy, ncpus in _scopes((rep or {}).get("cpu") or {}):
            for (component, thread_class), pct in sorted(comps.items()):
                rule = next((e for e in emulated if e.matches(component, thread_class)), None)
                if not (rule and rule.applies(prov)):
                    continue
                saturated = busy is not None and ncpus and busy >= SATURATED_PCT * ncpus \
                    and pct >= DOMINANT * busy
                if pct >= ceiling_pct or saturated:
                    name = f"{host}: {component}/{thread_class}" if host else f"{component}/{thread_class}"
                    b = Bound(name, pct, rule.stands_for, None if pct >= ceiling_pct else busy)
                    if name not in found or pct > found[name].peak_pct:
                        found[name] = b
    return [found[k] for k in sorted(found)]


MARK = "‡"
NOTE = (f"{MARK}: emulation-bound: a component that stands in for what the modelled system does in "
        f"the kernel or in compiled code (the netdev datapath's thread, a Python agent or "
        f"controller) used >= {CEILING_PCT:.0f}% of a CPU during the measurement, or at least "
        f"{DOMINANT:.0%} of its host's CPUs when they were >= {SATURATED_PCT:.0f}% busy, so the value "
        "is this machine's emulation speed, not the system's (vnetbench.results.bound)")
