"""Deprovisioning a vnet from a running testbed, the way each kind's cloud does it
(``NetnsDriver.remove_vnet``: linuxbridge removes the vnet's bridge, ovs its ports, OVN
deletes the logical switch, a controller forgets the network first). The VMs stay,
their NICs unplugged. Nothing is created, so there is nothing to undo.
"""

from __future__ import annotations

from vnetbench import kinds
from vnetbench.testbed.netns.context import context


def remove(dep, vnet) -> None:
    kinds.netns_driver(dep).remove_vnet(dep, context(dep), vnet)
