"""Options of the reactive OpenFlow controller (Floodlight v0.90 model): the ``vswitch.openflow:`` block of a testbed file, as data
(the dataclass the model carries) and as JSON Schema (merged into the published schema)."""

from __future__ import annotations

from dataclasses import dataclass

KEY = "openflow"


@dataclass(frozen=True)
class OpenFlow:
    """Options of ``ovs-openflow``: Floodlight v0.90 Forwarding + VirtualNetworkFilter
    behind IVS's packet-in limit (docs/sdn.md gives the source of each default)."""
    fail_mode: str = "secure"            # OVS bridge fail_mode: secure | standalone
    controllers: int = 1                 # controller instances every bridge connects to
    match: str = "host-pair"             # v0.90: L2 + IPv4 pair; "connection": v1.x 5-tuple
    idle_timeout: int = 5                # Floodlight FLOWMOD_DEFAULT_IDLE_TIMEOUT
    hard_timeout: int = 0                # Floodlight FLOWMOD_DEFAULT_HARD_TIMEOUT
    broadcast_isolation: bool = False    # Floodlight's VNF lets broadcast through
    packet_in_rate: int = 200            # per ingress port, packets/s (IVS); 0 = no limit
    packet_in_burst: int = 32            # IVS burst
    packet_in_global_rate: int = 333     # per switch, packets/s (IVS PKTIN_INTERVAL 3000 us); 0 = none
    packet_in_global_burst: int = 32     # IVS PKTIN_BURST_SIZE
    inactivity_probe_ms: int = 5000      # OVS Controller inactivity_probe


SCHEMA = {
    "description": "ovs-openflow only: the reactive controller (Floodlight v0.90 Forwarding + VirtualNetworkFilter) and IVS's packet-in limit. See docs/sdn.md.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "fail_mode": {
            "enum": [
                "secure",
                "standalone"
            ],
            "default": "secure",
            "description": "OVS bridge fail_mode when the controller is lost: secure keeps the installed flows and sets up no new ones; standalone turns the bridge into a learning switch."
        },
        "controllers": {
            "type": "integer",
            "minimum": 1,
            "maximum": 4,
            "default": 1,
            "description": "Controller instances every bridge connects to (one master, the others take over when it dies)."
        },
        "match": {
            "enum": [
                "host-pair",
                "connection"
            ],
            "default": "host-pair",
            "description": "host-pair: Floodlight v0.90 match (in_port, VLAN, MACs, IPv4 addresses; one flow per host pair); connection: v1.x 5-tuple (one packet-in per new connection)."
        },
        "idle_timeout": {
            "type": "integer",
            "minimum": 0,
            "maximum": 65535,
            "default": 5
        },
        "hard_timeout": {
            "type": "integer",
            "minimum": 0,
            "maximum": 65535,
            "default": 0
        },
        "broadcast_isolation": {
            "type": "boolean",
            "default": False,
            "description": "Flood broadcast/multicast only within the sender's vnet (Floodlight does not)."
        },
        "packet_in_rate": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000000,
            "default": 200,
            "description": "Packet-ins per second per ingress port (IVS: 200), as an OpenFlow 1.3 meter; 0 turns the limit off."
        },
        "packet_in_burst": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100000,
            "default": 32
        },
        "packet_in_global_rate": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000000,
            "default": 333,
            "description": "Packet-ins per second per switch, all ports together (IVS: PKTIN_INTERVAL 3000 us, ~333/s), as a bridge-wide OpenFlow 1.3 meter after the per-port one; 0 turns it off."
        },
        "packet_in_global_burst": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100000,
            "default": 32
        },
        "inactivity_probe_ms": {
            "type": "integer",
            "minimum": 1000,
            "maximum": 3600000,
            "default": 5000,
            "description": "OVS Controller inactivity_probe: how fast a lost controller is noticed."
        }
    }
}
