"""How the netns backend realises a kind: the driver interface every kind's
``kinds/<kind>/driver.py`` implements (Neutron's split: the mechanism driver describes,
the agent realises on the host).

A kind's description (``kinds/<kind>/__init__.py``, ``kinds.base.Kind``) is what the
loader, capabilities, matrix, Rally and results ask without building anything; it imports
no backend. Its driver is what the netns backend calls to build, change and unwind the
kind's vSwitches; it imports the backend's pieces at the top of its module, and only the
backend (``vnetbench.testbed.netns``) loads it (``kinds.netns_driver``). A default here is
what a kind without that feature does (no controller, nothing to expire, nothing to
settle), so a driver states only what is its own. ``check`` refuses a driver that lacks a
member the backend calls, naming it, when it is first loaded.
"""

from __future__ import annotations

import contextlib

from vnetbench.errors import UnsupportedError
from vnetbench.kinds.neutron import l3agent


class NetnsDriver:
    def __init__(self, kind):
        #: the kind's description (``kinds.base.Kind``)
        self.kind = kind

    def start(self, ctx) -> None:
        """Start what can overlap the rest of bring-up (controller processes)."""

    def wire(self, ctx) -> None:
        """Build every host's vSwitch for the testbed (after namespaces, underlay, VMs)."""
        raise NotImplementedError

    def settle(self, dep, timeout: float) -> float:
        """Wait until nothing queued by the last load is still being worked on (a
        reactive agent's set-ups); the seconds waited. A kernel datapath queues nothing
        that outlives its load."""
        return 0.0

    def routers(self, ctx) -> None:
        """Realise the testbed's routers (after its vSwitches; the external network's
        links exist): the router namespaces of Neutron's legacy L3 agent, for a kind
        whose ``routers`` is "l3-agent" or "external"."""
        l3agent.namespace_routers(ctx)

    def svi(self, ctx, ri: int, router) -> None:
        """Make the vSwitch of ROUTER's host an L3 switch for its vnets (``l3agent.svi``
        with the kind's per-vnet interfaces)."""
        raise NotImplementedError

    def remove_router_interface(self, dep, router, vnet: str) -> None:
        """Remove ROUTER's interface on VNET as the kind's cloud does."""
        l3agent.remove_interface(self, dep, router, vnet)

    def update_security_groups(self, dep, ctx, groups) -> None:
        """Apply the new rules of ``groups`` (names) on every host, as the kind's agent
        does on the cloud's notification; return once applied."""
        raise UnsupportedError(self.kind.why_not_security_groups(None) or
                               f"{self.kind.name} cannot change security-group rules on a "
                               "running testbed")

    def expire(self, dep, layers: set) -> None:
        """Empty the flow state of LAYERS (``Kind.flow_layers``' names) on every host."""

    def remove_vnet(self, dep, ctx, vnet) -> None:
        """Deprovision VNET the way this kind's cloud does; its VMs stay, unplugged."""
        raise NotImplementedError

    def restart(self, dep, host) -> None:
        """Restart HOST's vSwitch as an operator would, back when it forwards again."""
        raise NotImplementedError

    def unplug(self, dep, host, port: str) -> None:
        """Take a VM port off HOST's vSwitch (a migration's source side)."""
        raise NotImplementedError

    def plug(self, dep, host, port: str, vm, k: int, nic) -> None:
        """Plug a VM's port into HOST's vSwitch (a migration's destination side)."""
        raise NotImplementedError

    def port_reserved(self, testbed, vnet: str) -> set[str]:
        """Addresses of VNET the kind's own services hold (beside VMs and routers): a new
        port gets none of them."""
        return set()

    def port_plug(self, dep, host, port: str, vm) -> None:
        """Plug a port without a VM (VM: its stand-in) as the kind's agent or os-vif plugs a
        VM's NIC, the kind's API call first where it has one (Neutron's port create)."""
        self.plug(dep, host, port, vm, 0, vm.nics[0])

    def port_unplug(self, dep, host, port: str, name: str) -> None:
        """The inverse of ``port_plug`` (NAME: the port's name)."""
        self.unplug(dep, host, port)

    def ports_ready(self, dep, host, ends) -> dict:
        """Of HOST's port host ends ENDS, those the kind says are programmed: end -> the
        time it says so (or None), from one query of its vSwitch (``Kind.port_ready_signal``)."""
        raise NotImplementedError

    def kernel_egress(self, dep, host, port: str):
        """Context manager yielding (host name, port): what the vSwitch sends out of PORT
        passes the host kernel's qdiscs for the block (a kernel bridge always does)."""
        return contextlib.nullcontext((host.name, port))

    def control(self) -> dict | None:
        """Controller fault operations: {"components": f(dep), "stop": f(dep, name,
        graceful), "start": f(dep, name)[, "active": f(dep), "sync": f(dep, timeout)]};
        None: the kind has no controller (``Kind.controlled``)."""
        return None

    def __repr__(self):
        return f"<netns driver of {self.kind.name}>"


#: what a driver must override (the base's raise)
REALISED = ("wire", "remove_vnet", "restart", "unplug", "plug")


class DriverError(TypeError):
    pass


def check(driver, kind) -> None:
    """Refuse a driver that lacks what the netns backend calls, naming the member."""
    where = f"vSwitch kind {kind.name!r}'s netns driver ({type(driver).__module__})"
    if not isinstance(driver, NetnsDriver):
        raise DriverError(f"{where}: Driver is not a vnetbench.kinds.driver.NetnsDriver")
    for meth in REALISED:
        if getattr(type(driver), meth) is getattr(NetnsDriver, meth):
            raise DriverError(f"{where}: missing {meth} (the netns backend calls it)")
    if kind.controlled != (driver.control() is not None):
        raise DriverError(f"{where}: the kind says controlled={kind.controlled}, its driver's "
                          "control() disagrees")
