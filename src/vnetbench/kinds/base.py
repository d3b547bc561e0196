"""The interface every vSwitch kind implements, and the check the registry runs on it.

Class attributes describe the kind (what the rest of the suite may ask without building
anything); methods realise it on the netns backend or answer for it. A default here is
what a kind without that feature does (no controller, no per-flow state, nothing to do
on an expiry), so a kind states only what is its own. ``check`` refuses a kind that
lacks a member the suite calls, naming it, when the registry first loads it.
"""

from __future__ import annotations

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
    #: how it routes between vnets and to the external network (``kinds.l3``): "l3-agent"
    #: (Neutron's legacy L3 agent: a router namespace on the network node, its ports plugged
    #: as VM ports, NAT by iptables there), "external" (the vSwitch has no L3: a router
    #: outside it, on a port, the same namespace), "ovn" (logical routers), "vrouter" (routes
    #: leaked between the router's VRFs, every host routes); "": none yet (``no_routers`` says why)
    routers: str = ""
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

    def netns_update_security_groups(self, dep, ctx, groups) -> None:
        """Apply the new rules of ``groups`` (names) on every host, as the kind's agent
        does on the cloud's notification; return once applied."""
        from vnetbench.errors import UnsupportedError
        raise UnsupportedError(self.why_not_security_groups(None) or f"{self.name} cannot change "
                               "security-group rules on a running testbed")

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

    # -- the netns backend --------------------------------------------------------------

    def netns_start(self, ctx) -> None:
        """Start what can overlap the rest of bring-up (controller processes)."""

    def netns_wire(self, ctx) -> None:
        """Build every host's vSwitch for the testbed (after namespaces, underlay, VMs)."""
        raise NotImplementedError

    def netns_settle(self, dep, timeout: float) -> float:
        """Wait until nothing queued by the last load is still being worked on (a
        reactive agent's set-ups); the seconds waited. A kernel datapath queues nothing
        that outlives its load."""
        return 0.0

    def netns_routers(self, ctx) -> None:
        """Realise the testbed's routers (after its vSwitches; the external network's
        links exist): the router namespaces of Neutron's legacy L3 agent, for a kind
        whose ``routers`` is "l3-agent" or "external"."""
        from vnetbench.kinds import l3agent
        l3agent.namespace_routers(ctx)

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

    def netns_svi(self, ctx, ri: int, router) -> None:
        """Make the vSwitch of ROUTER's host an L3 switch for its vnets (``l3agent.svi``
        with the kind's per-vnet interfaces)."""
        raise NotImplementedError

    def netns_remove_router_interface(self, dep, router, vnet: str) -> None:
        """Remove ROUTER's interface on VNET as the kind's cloud does."""
        from vnetbench.kinds import l3agent
        l3agent.remove_interface(self, dep, router, vnet)

    def netns_expire(self, dep, layers: set) -> None:
        """Empty the flow state of LAYERS (``flow_layers``' names) on every host."""

    def netns_remove_vnet(self, dep, ctx, vnet) -> None:
        """Deprovision VNET the way this kind's cloud does; its VMs stay, unplugged."""
        raise NotImplementedError

    def netns_restart(self, dep, host) -> None:
        """Restart HOST's vSwitch as an operator would, back when it forwards again."""
        raise NotImplementedError

    def netns_unplug(self, dep, host, port: str) -> None:
        """Take a VM port off HOST's vSwitch (a migration's source side)."""
        raise NotImplementedError

    def netns_plug(self, dep, host, port: str, vm, k: int, nic) -> None:
        """Plug a VM's port into HOST's vSwitch (a migration's destination side)."""
        raise NotImplementedError

    #: what tells that a port added without a VM is programmed (the port_ready family:
    #: the real system's own signal); "" when the kind adds no such ports
    port_ready_signal: str = ""

    def netns_port_reserved(self, testbed, vnet: str) -> set[str]:
        """Addresses of VNET the kind's own services hold (beside VMs and routers): a new
        port gets none of them."""
        return set()

    def netns_port_plug(self, dep, host, port: str, vm) -> None:
        """Plug a port without a VM (VM: its stand-in) as the kind's agent or os-vif plugs a
        VM's NIC, the kind's API call first where it has one (Neutron's port create)."""
        self.netns_plug(dep, host, port, vm, 0, vm.nics[0])

    def netns_port_unplug(self, dep, host, port: str, name: str) -> None:
        """The inverse of ``netns_port_plug`` (NAME: the port's name)."""
        self.netns_unplug(dep, host, port)

    def netns_ports_ready(self, dep, host, ends) -> dict:
        """Of HOST's port host ends ENDS, those the kind says are programmed: end -> the
        time it says so (or None), from one query of its vSwitch."""
        raise NotImplementedError

    def netns_kernel_egress(self, dep, host, port: str):
        """Context manager yielding (host name, port): what the vSwitch sends out of PORT
        passes the host kernel's qdiscs for the block (a kernel bridge always does)."""
        import contextlib
        return contextlib.nullcontext((host.name, port))

    #: controller fault operations: {"components": f(dep), "stop": f(dep, name, graceful),
    #: "start": f(dep, name)[, "active": f(dep), "sync": f(dep, timeout)]}; None: none
    def control(self) -> dict | None:
        return None

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
#: what a kind must override (the base's raises)
REALISED = ("netns_wire", "netns_remove_vnet", "netns_restart", "netns_unplug", "netns_plug")


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
    for meth in REALISED:
        if getattr(type(kind), meth) is getattr(Kind, meth):
            raise KindError(f"{where}: missing {meth} (the netns backend calls it)")
    if not (kind.openstack_environment or kind.no_cloud):
        raise KindError(f"{where}: missing openstack_environment (or no_cloud: why there is none)")
    if (kind.options is None) != (kind.options_key is None) or \
            (kind.options is None) != (kind.options_schema is None):
        raise KindError(f"{where}: options, options_key and options_schema go together")
