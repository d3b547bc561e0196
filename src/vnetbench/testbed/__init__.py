"""Testbed: the declared topology (pure data) and the backends that realise it."""

from vnetbench.testbed.model import (  # noqa: F401
    Host, Network, NetType, Nic, Testbed, Vm, Vnet, VSwitch, VSwitchKind,
)
