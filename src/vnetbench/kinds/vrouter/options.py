"""Options of the OpenContrail vRouter model: the ``vswitch.vrouter:`` block of a testbed file, as data
(the dataclass the model carries) and as JSON Schema (merged into the published schema)."""

from __future__ import annotations

from dataclasses import dataclass

KEY = "vrouter"


@dataclass(frozen=True)
class VRouter:
    """Options of ``vrouter``: the OpenContrail vRouter agent and control node
    (docs/sdn.md gives the source of each default)."""
    headless: bool = False               # keep learned routes when the control node is lost
    hold_time: float = 90.0              # s without a message before the control node counts as lost
    flow_setup: str = "datapath"         # who sets a flow up: the datapath (conntrack) or the agent
    flow_setup_rate: int = 1000          # new flows/s the agent sets up; 0 = no limit
    flow_hold_packets: int = 3           # packets queued per flow awaiting set-up
    flow_idle_timeout: int = 180         # s; Contrail's flow aging
    dhcp: bool = True                    # the agent answers DHCP for its VMs


SCHEMA = {
    "description": "vrouter only: the OpenContrail vRouter agent (one per host) and control node (MPLS over GRE; network type gre). See docs/sdn.md.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "headless": {
            "type": "boolean",
            "default": False,
            "description": "Agents keep the routes they learned when the control node is lost (Contrail headless mode); otherwise they flush them and cross-host forwarding stops."
        },
        "hold_time": {
            "type": "number",
            "minimum": 0.3,
            "maximum": 3600,
            "default": 90,
            "description": "Seconds without a message (keepalives every third of it) after which an agent counts the control node as lost (XMPP hold time, Contrail default 90)."
        },
        "flow_setup": {
            "enum": ["datapath", "agent"],
            "default": "datapath",
            "description": "Who sets up a new flow between ports without port security: the datapath itself (OVS's connection tracker, one zone per VRF, aged by flow_idle_timeout: set-up as fast as this machine's OVS goes, as the seed's compiled agent did) or the Python agent over packet-ins, at flow_setup_rate with flow_hold_packets held (the model's set-up queue). Flows of ports with port security are always the agent's: it evaluates the rules."
        },
        "flow_setup_rate": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000000,
            "default": 1000,
            "description": "New flows per second each agent sets up (flow_setup: agent, and flows of ports with port security); 0 = as fast as it can."
        },
        "flow_hold_packets": {
            "type": "integer",
            "minimum": 0,
            "maximum": 64,
            "default": 3,
            "description": "Packets of a new flow held while it waits for set-up (Contrail: 3); the rest are dropped."
        },
        "flow_idle_timeout": {
            "type": "integer",
            "minimum": 0,
            "maximum": 65535,
            "default": 180,
            "description": "Seconds an idle flow stays in the flow table (Contrail flow aging: 180)."
        },
        "dhcp": {
            "type": "boolean",
            "default": True,
            "description": "The agent answers its VMs' DHCP requests."
        }
    }
}
