"""The packet rate the capacity hand-off gives the all-in-one cloud's OVS (issue 28)."""

from __future__ import annotations

import socket
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "capacity"


def handed_off_kpps() -> int:
    """From this machine's measured ovs/vxlan profile (tests/data/capacity) through
    vnetbench.capacity.openstack, for this host (the cloud's one compute node)."""
    from vnetbench.capacity import openstack, profile
    from vnetbench.capacity.files import HostSpec, Hosts
    from vnetbench.results.load import load
    records = [r for run in load([DATA]) for r in run.records]
    hosts = Hosts("vxlan", (HostSpec(socket.gethostname(), 2, 4096, "ovs"),))
    return openstack.handoff(profile.build(records), hosts)["hosts"][0]["kpps"]
