"""Emulation-bound measurements: where this machine, not the system compared, set the number.

The embedded testbed runs in user space what the modelled systems run in the kernel or in
compiled code: OVS's datapath (here the userspace ``netdev`` datapath on AF_PACKET ports,
since this kernel has no OVS module), the vRouter's flow setup (here a Python agent), the
Floodlight controller's packet-in handling (here an os-ken app in Python). When such a
component sat at its CPU ceiling during a measurement, the number says how fast the
emulation runs on this machine, not how the system behaves, and a ranking of columns on
that row is not the systems' ranking (issue 22: every OVS-based column at 0.6-0.9 Gbit/s
against Linux bridge's 15 for exactly this reason).

The rule reads the measurement's own CPU split by component and thread class (each
repetition's window, ``extra.repetitions[*].cpu.components``, vnetbench.cpu.describe): a
component that EMULATES what the modelled system does elsewhere and used at least
CEILING_PCT of one CPU in some repetition marks the cell. It names components and thread
classes, never vSwitch kinds: the same ovs-vswitchd main thread on a real cloud's kernel
datapath is not emulation (the record's ``ovs_datapath`` says which), and a saturated
guest iperf3 is the workload, not a component at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

#: the share of one CPU at which a single-threaded component counts as saturated: the
#: netdev datapath's main thread polls every non-PMD port in one thread, and the Python
#: models are bound by one interpreter lock, so one CPU is their ceiling
CEILING_PCT = 90.0


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


EMULATED = (
    Emulated("ovs-vswitchd", "main",
             "OVS's userspace datapath on AF_PACKET ports (no OVS kernel module here); "
             "the modelled OVS forwards in its kernel module",
             lambda prov: prov.get("ovs_datapath") == "netdev"),
    Emulated("contrail-vrouter-agent", "",
             "the vRouter model's agent (Python) sets up each flow; the real vRouter does "
             "it in its kernel module and its C++ agent"),
    Emulated("osken-", "",
             "the Floodlight model (an os-ken app, Python) handles every packet-in; "
             "Floodlight is compiled Java"),
    Emulated("contrail-control", "",
             "the control-node model (Python); the real control node is C++"),
)


@dataclass(frozen=True)
class Bound:
    """One saturated emulating component of one measurement."""
    component: str            # "ovs-vswitchd/main"
    peak_pct: float           # its highest CPU% of one CPU over the repetitions
    stands_for: str

    def text(self) -> str:
        return f"{self.component} at {self.peak_pct:.0f}% of a CPU ({self.stands_for})"


def peaks(record) -> dict[tuple[str, str], float]:
    """{(component, thread class): highest CPU% over the repetitions' windows}, from the
    split 'part/component/class' -> % that every window records; the parts (the
    component's own runtime, the interrupts that ran in its context) add up, as they are
    disjoint and all the thread's time."""
    out: dict[tuple[str, str], float] = {}
    for rep in (record.extra or {}).get("repetitions") or []:
        per: dict[tuple[str, str], float] = {}
        for key, pct in ((rep or {}).get("cpu") or {}).get("components", {}).items():
            part, _, rest = key.partition("/")
            component, _, thread_class = rest.rpartition("/")
            if part in ("vswitch", "controller", "softirq_in_vswitch", "hardirq") and component:
                per[(component, thread_class)] = per.get((component, thread_class), 0.0) + pct
        for k, v in per.items():
            out[k] = max(out.get(k, 0.0), v)
    return out


def bound(record, ceiling_pct: float = CEILING_PCT) -> list[Bound]:
    """The emulating components that sat at their ceiling during RECORD's measurement."""
    if record is None:
        return []
    prov = record.provenance or {}
    found = []
    for (component, thread_class), pct in sorted(peaks(record).items()):
        rule = next((e for e in EMULATED if e.matches(component, thread_class)), None)
        if rule and rule.applies(prov) and pct >= ceiling_pct:
            found.append(Bound(f"{component}/{thread_class}", pct, rule.stands_for))
    return found


MARK = "‡"
NOTE = (f"{MARK}: emulation-bound: a component that stands in for what the modelled system does in "
        f"the kernel or in compiled code (the netdev datapath's thread, a Python agent or "
        f"controller) used >= {CEILING_PCT:.0f}% of a CPU during the measurement, so the value is "
        "this machine's emulation speed, not the system's (vnetbench.results.bound)")
