"""What elapsed time does to each modelled system's per-flow state (issue 22).

The battery's time-deferred echo asks: how long does a ping take after the path was idle
for DEFER_S seconds? The answer depends on which flow state the modelled system lets go
in that time, and that is the system's own timing, not one rule for every kind: Floodlight
drops its reactive flows after 5 s idle (seed 003 found 5 s; that is what made its
deferred RTT high), a kernel OVS datapath its cached flows after 10 s (max-idle), while
Contrail's vRouter ages flows after 180 s, so an echo seconds later meets an existing
flow. Each layer's idle timeout comes from the testbed (the kind's options, whose sources
docs/sdn.md gives) or from the datapath's documented default; the battery expires, before
each deferred echo, exactly the layers whose timeout DEFER_S reaches, and records which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vnetbench.testbed.model import Testbed

#: the idle time a time-deferred echo models: beyond Floodlight's 5 s and OVS's 10 s
#: datapath ageing, far below Contrail's 180 s flow aging
DEFER_S = 10.0
#: OVS datapath flows: Open_vSwitch other_config:max-idle, 10000 ms by default
#: (ovs-vswitchd.conf.db(5)); IVS ran on the OVS kernel module with the same ageing
OVS_MAX_IDLE_S = 10.0


@dataclass(frozen=True)
class FlowState:
    layer: str          # "datapath" (the vSwitch's flow cache), "controller", "agent"
    idle_s: float       # how long the modelled system keeps it idle (inf: never ages)
    source: str

    def label(self) -> str:
        idle = "never ages" if math.isinf(self.idle_s) else f"idle {self.idle_s:g} s"
        return f"{self.layer} ({idle})"


def layers(tb: Testbed) -> tuple[FlowState, ...]:
    """The per-flow state of TB's vSwitch, with the idle timeout of the modelled system
    (the kind's ``flow_layers``)."""
    from vnetbench import kinds
    return tuple(kinds.of(tb).flow_layers(tb))


def expiring(tb: Testbed, defer_s: float = DEFER_S) -> tuple[FlowState, ...]:
    """The layers DEFER_S seconds of idleness empties in the modelled system."""
    return tuple(s for s in layers(tb) if s.idle_s <= defer_s)
