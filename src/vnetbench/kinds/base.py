"""The interface every vSwitch kind implements, and the check the registry runs on it.

Class attributes and methods describe the kind: what the rest of the suite may ask without
building anything. How a backend realises it is its driver's (``vnetbench.kinds.driver``,
the kind's ``driver.py``); a description imports no backend. A default here is what a
kind without that feature does (no per-flow state, no routers, no options), so a kind
states only what is its own. ``check`` refuses a kind that lacks a member the suite asks
for, naming it, when the registry first loads it.
"""

from __future__ import annotations

from vnetbench.kinds.registry import ROUTERS
from vnetbench.testbed.model import NetType

COMMON_PROGRAMS = ("ip", "taskset", "ping")
#: tenant traffic on the wire per network type (the functional ``encapsulation`` row)
WIRE = {"flat": "none", "vlan": "VLAN", "vxlan": "VXLAN", "gre": "GRE", "geneve": "Geneve"}


class Kind:
    #: the registry name, the testbed's ``vswitch.kind``
    name: str = ""
    #: one line for people: what this kind models
    summary: str = ""
    #: ovs-vswitchd and ovsdb-server run on every emulated host
    uses_ovs: bool = False
    #: its control plane runs in the controller namespace, over the management network
    controlled: bool = False
    #: it routes tenant traffic: every peer's MAC is the vSwitch's and it answers ARP
    l3: bool = False
    #: per-host daemons whose pidfiles the netns backend reads (CPU attribution)
    host_daemons: tuple[str, ...] = ()
    #: programs the netns backend needs on PATH
    programs: tuple[str, ...] = COMMON_PROGRAMS
    #: the testbed key of its options (``vswitch.<options_key>``), their dataclass and
    #: JSON Schema; None: the kind has no options
    options_key: str | None = None
    options: type | None = None
    options_schema: dict | None = None
    #: options that give two controller instances (the multi-controller fault); None: one only
    redundant_options: dict | None = None
    #: bytes of encapsulation where the kind adds more than the plain header
    overhead: dict = {}
    #: network type -> what the kind puts on the wire, where not ``WIRE``'s
    wire: dict = {}
    #: the network type it is tested on when one per kind runs
    preferred_network: NetType = NetType.VXLAN
    #: its datapath's lookup counters (hit/missed/lost) are readable with dpctl/show
    dpctl_counters: bool = False
    #: the Heat environment (heat-templates/env/<name>.yaml) of a cloud with this kind as
    #: its SDN back-end; None: no cloud of this kind is built (say why in ``no_cloud``)
    openstack_environment: str | None = None
    no_cloud: str = ""
    #: its components the embedded testbed runs in user space or Python where the modelled
    #: system runs kernel or compiled code (``results.bound.Emulated``): a measurement they
    #: saturated is marked emulation-bound
    emulated: tuple = ()
    #: how a remote libvirt hypervisor realises it: "ovs-vlan" (one OVS bridge, an access
    #: port tagged per vnet), "linux-per-vnet" (a Linux bridge per vnet); None: it cannot
    remote_bridges: str | None = None
    #: what enforces security groups when a port has port security on (provenance)
    firewall: str = ""
    no_routers: str = ""
    #: why its routers cannot have an external gateway or floating IPs (north-south);
    #: "": they can (where ``routers`` is set)
    no_north_south: str = ""
    #: seed 000's inter-VLAN testbeds it realises (``Router.routing``: "svi", "stick")
    switch_routing: tuple = ()
    #: brought up by ``vnetbench demo`` (no controller to wait for, or a fast one)
    demo: bool = False
    #: takes the testbed's ``chassis:`` block (light hosts without VMs: what its
    #: controller registers, e.g. OVN's chassis)
    light_chassis: bool = False

    # -- what it supports ---------------------------------------------------------------

    def why_not(self, caps, ntype: NetType, datapath: str) -> str | None:
        """Why this kind cannot carry NTYPE here (beyond programs and veth/bridge
        support, which ``capabilities`` checks for every kind); None when it can."""
        return None

    def why_not_egress(self, caps) -> str | None:
        """Why an egress (from the VM) bandwidth limit cannot be realised here; None: it can."""
        return None

    def why_not_security_groups(self, caps) -> str | None:
        """Why security groups (ports with port security on) cannot be enforced here;
        None: they can. A kind that does not enforce them must refuse the testbed, never
        build it unfiltered and let a measurement pass for a filtered one."""
        return f"{self.name} does not enforce security groups on the embedded testbed yet"

    def datapath(self, requested: str, caps) -> str | None:
        """The OVS datapath the kind runs on ('system' | 'netdev'); None: not OVS."""
        return None

    def ports(self, testbed, caps) -> str | None:
        """How OVS's userspace datapath reads its veth ports ('afxdp' | 'afpacket'); None:
        not OVS's userspace datapath."""
        return None

    def flow_layers(self, testbed) -> tuple:
        """The per-flow state (``flowstate.FlowState``) a packet may wait for, with the
        modelled system's idle timeouts; a kernel bridge keeps none."""
        return ()

    # -- routers ---------------------------------------------------------------------

    @property
    def routers(self) -> str:
        """How it routes between vnets and to the external network: its line of
        ``registry.ROUTERS`` (plain data the model reads too)."""
        return ROUTERS.get(self.name, "")

    def why_not_north_south(self, testbed) -> str | None:
        """Why TESTBED's external gateways, external network or floating IPs cannot be
        realised by this kind's routers; None when they can."""
        return self.no_north_south or None

    def why_not_switch_routing(self, caps, routing: str) -> str | None:
        """Why this kind cannot be seed 000's L3 switch ("svi") or carry its router on a
        stick ("stick"); None when it can."""
        if routing in self.switch_routing:
            return None
        return (f"routing: {routing} (seed 000's inter-VLAN testbeds) is not realised on {self.name}; "
                "leave routing out for its own router")

    #: what tells that a port added without a VM is programmed (the port_ready family:
    #: the real system's own signal); "" when the kind adds no such ports
    port_ready_signal: str = ""

    def expected_verdicts(self) -> dict[str, str]:
        """{matrix row id: verdict} the kind's documentation gives (the ``expected.yaml`` of
        its package); the functional matrix shows a measured cell that differs, and why."""
        import yaml
        from importlib import resources
        text = resources.files(type(self).__module__).joinpath("expected.yaml").read_text()
        return yaml.safe_load(text) or {}

    def __repr__(self):
        return f"<vSwitch kind {self.name}>"


#: what every kind must define itself (the rest has a default above)
REQUIRED = ("name", "summary")


class KindError(TypeError):
    pass


def check(kind, registered_as: str) -> None:
    """Refuse a kind that lacks what the suite calls, naming the member."""
    where = f"vSwitch kind {registered_as!r} ({type(kind).__module__})"
    if not isinstance(kind, Kind):
        raise KindError(f"{where}: KIND is not a vnetbench.kinds.base.Kind")
    if kind.name != registered_as:
        raise KindError(f"{where}: its name is {kind.name!r}, not the registered {registered_as!r}")
    for attr in REQUIRED:
        if not getattr(kind, attr):
            raise KindError(f"{where}: missing {attr}")
    if not (kind.openstack_environment or kind.no_cloud):
        raise KindError(f"{where}: missing openstack_environment (or no_cloud: why there is none)")
    if (kind.options is None) != (kind.options_key is None) or \
            (kind.options is None) != (kind.options_schema is None):
        raise KindError(f"{where}: options, options_key and options_schema go together")
