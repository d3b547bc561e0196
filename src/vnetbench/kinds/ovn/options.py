"""Options of OVN: the ``vswitch.ovn:`` block of a testbed file, as data
(the dataclass the model carries) and as JSON Schema (merged into the published schema)."""

from __future__ import annotations

from dataclasses import dataclass

KEY = "ovn"


@dataclass(frozen=True)
class Ovn:
    """Options of ``ovn``: its central control plane (docs/sdn.md)."""
    northd: int = 1                      # ovn-northd instances: one active (SB lock), the others standby


SCHEMA = {
    "description": "ovn only: its central control plane. See docs/sdn.md.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "northd": {
            "type": "integer",
            "minimum": 1,
            "maximum": 4,
            "default": 1,
            "description": "ovn-northd instances on the NB and SB databases: one holds the SB lock and works (active), the others wait for it (standby) and take over when it dies."
        }
    }
}
