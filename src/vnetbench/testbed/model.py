"""The testbed as pure, frozen data: what to build, never how.

Mininet's Topo/Net split: this module describes hosts, vnets and VMs; a backend
(``vnetbench.testbed.netns``) realises them. Nothing here touches the system.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
from dataclasses import dataclass, field

from vnetbench.kinds.registry import REGISTRY, ROUTERS


class _Kind(str, enum.Enum):
    def __str__(self):
        return self.value


# The vSwitch kinds are those registered in vnetbench.kinds (one package each); the model
# only names them. Members: LINUXBRIDGE, OVS, OVS_OPENFLOW, ...
VSwitchKind = _Kind("VSwitchKind", [(n.upper().replace("-", "_"), n) for n in REGISTRY])


class NetType(str, enum.Enum):
    FLAT = "flat"
    VLAN = "vlan"
    VXLAN = "vxlan"
    GRE = "gre"
    GENEVE = "geneve"

    def __str__(self):
        return self.value

    @property
    def is_tunnel(self) -> bool:
        return self in (NetType.VXLAN, NetType.GRE, NetType.GENEVE)


# Bytes the encapsulation adds in front of the inner IP packet on an IPv4
# underlay (REFERENCE §3): outer IP + UDP/GRE header + inner Ethernet.
ENCAP_OVERHEAD = {
    NetType.FLAT: 0,
    NetType.VLAN: 0,      # the 802.1q tag grows the frame, not the IP MTU
    NetType.VXLAN: 50,
    NetType.GRE: 42,      # GRE with key
    NetType.GENEVE: 50,   # no options
}


# Valid segmentation ids per type (flat networks have none).
SEGMENTATION_RANGE = {
    NetType.VLAN: (1, 4094),
    NetType.VXLAN: (1, 2**24 - 1),
    NetType.GENEVE: (1, 2**24 - 1),
    NetType.GRE: (1, 2**32 - 1),
}

MIN_TENANT_MTU = 576     # the IPv4 datagram every host must accept (RFC 791)

SAME_HOST = "same-host"
CROSS_HOST = "cross-host"
#: what lies between a pair's VMs: one vnet's switching, or a router between two vnets
L2 = "l2"
EAST_WEST = "l3-east-west"
NORTH_SOUTH = "north-south"       # a VM to an external host, out through its router's NAT
FLOATING_IP = "floating-ip"       # an external host to a VM's floating IP, in through DNAT
PATHS = (L2, EAST_WEST, NORTH_SOUTH, FLOATING_IP)
#: ``Router.routing``: the kind's own tenant router, or seed 000's inter-VLAN testbeds
ROUTER, SVI, STICK = "router", "svi", "stick"
#: the routings that are seed 000's inter-VLAN testbeds (a comparison column of their own)
SWITCH_ROUTINGS = (SVI, STICK)


@dataclass(frozen=True)
class VSwitch:
    kind: VSwitchKind
    datapath: str = "auto"   # ovs: "system" (kernel module), "netdev" (userspace), "auto"
    ports: str = "auto"      # ovs netdev: "afxdp" (AF_XDP, PMD-polled), "afpacket", "auto"
    options: object | None = None        # the kind's options dataclass (kinds.get(kind).options)


@dataclass(frozen=True)
class Network:
    type: NetType
    underlay_mtu: int
    tenant_mtu: int
    underlay_cidr: ipaddress.IPv4Network

    @property
    def overhead(self) -> int:
        return ENCAP_OVERHEAD[self.type]


@dataclass(frozen=True)
class Host:
    """An emulated hypervisor: it runs one vSwitch instance on its CPU set. A ``light``
    one (the testbed's ``chassis:`` block) holds no VM and reads its ports through
    AF_PACKET only (no PMD thread): tens of them cost little while idle."""
    name: str
    cpus: tuple[int, ...]
    underlay_ip: ipaddress.IPv4Address
    light: bool = False


@dataclass(frozen=True)
class Vnet:
    """A tenant network; CIDRs may overlap between vnets, segmentation ids may not."""
    name: str
    cidr: ipaddress.IPv4Network
    segmentation_id: int | None


@dataclass(frozen=True)
class Qos:
    """A Neutron-style bandwidth limit on a VM's port; each vSwitch kind realises it its
    own way. Direction as Neutron's: 'ingress' = delivered to the VM, 'egress' = sent by it."""
    max_kbps: int
    max_burst_kbits: int     # token bucket depth; Neutron's default is 80% of max_kbps
    direction: str = "ingress"

    @property
    def egress(self) -> bool:
        return self.direction == "egress"


@dataclass(frozen=True)
class SgRule:
    """One Neutron security-group rule (IPv4). ``protocol`` None matches any protocol;
    the port range is TCP/UDP destination ports, or for ICMP the type (min) and code
    (max), as Neutron overloads them. At most one of ``remote_ip_prefix`` and
    ``remote_group`` (Neutron refuses both); neither matches any remote address."""
    direction: str                      # "ingress": to the port; "egress": from it
    protocol: str | None = None         # "tcp", "udp", "icmp"; None: any
    port_range_min: int | None = None
    port_range_max: int | None = None
    remote_ip_prefix: ipaddress.IPv4Network | None = None
    remote_group: str | None = None


@dataclass(frozen=True)
class SecurityGroup:
    """A named set of allow rules; a port's traffic passes if any rule of any of its
    groups allows it, and the replies of an allowed connection pass (stateful)."""
    name: str
    rules: tuple[SgRule, ...]


DEFAULT_SG = "default"


@dataclass(frozen=True)
class Nic:
    vnet: str
    ip: ipaddress.IPv4Address
    mac: str
    qos: Qos | None = None
    # Neutron's port security: on, the port's security groups filter its traffic (none:
    # everything dropped) and only its own MAC and IP may leave it; off, nothing is filtered
    port_security: bool = False
    security_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Vm:
    """A guest pinned to ``cpus`` of its host; ``nics[i]`` is its eth<i>."""
    name: str
    host: str
    cpus: tuple[int, ...]
    nics: tuple[Nic, ...]

    def nic(self, vnet: str) -> Nic:
        for nic in self.nics:
            if nic.vnet == vnet:
                return nic
        raise KeyError(f"VM {self.name!r} has no NIC on vnet {vnet!r}")


@dataclass(frozen=True)
class Pair:
    """Two VMs placed on the same host or across hosts: on one vnet (``path`` l2), or
    the second on ``peer_vnet``, a router between them (``path`` l3-east-west); or a VM
    and an external host (``path`` north-south: ``vms[1]`` is the external host, the VM
    on its router's host or on another one), through the router's SNAT; or the other way,
    to the VM's floating IP (``path`` floating-ip: ``vms[0]`` is the external host, DNAT at
    the router)."""
    name: str
    placement: str
    vnet: str
    vms: tuple[str, str]
    path: str = L2
    peer_vnet: str | None = None


@dataclass(frozen=True)
class RouterPort:
    """A router's interface on a vnet (Neutron's router interface port): the vnet's
    gateway address, the VMs' default route."""
    vnet: str
    ip: ipaddress.IPv4Address
    mac: str


@dataclass(frozen=True)
class Router:
    """A tenant router on ``host`` (the network node of Neutron's legacy L3 agent; kinds
    that route elsewhere say so): east-west between its vnets; with ``gateway`` (its
    address on the external network) north-south, with SNAT for VMs without a floating
    IP when ``snat``. ``routing`` SVI or STICK makes it one of seed 000's inter-VLAN
    testbeds instead of the kind's router: an interface per vnet on the vSwitch of
    ``host`` (the L3 switch), or a router namespace on one trunk port of it (router on a
    stick); both east-west only."""
    name: str
    host: str
    ports: tuple[RouterPort, ...]
    gateway: ipaddress.IPv4Address | None = None
    gateway_mac: str | None = None
    snat: bool = True
    #: how it is made: ROUTER (the kind's tenant router), SVI or STICK (seed 000's testbeds)
    routing: str = ROUTER

    def port(self, vnet: str) -> RouterPort:
        for p in self.ports:
            if p.vnet == vnet:
                return p
        raise KeyError(f"router {self.name!r} has no interface on vnet {vnet!r}")


@dataclass(frozen=True)
class External:
    """The external (provider) network routers take their gateway from; ``gateway`` is
    its upstream router's address (the routers' default route)."""
    cidr: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address


@dataclass(frozen=True)
class ExternalHost:
    """A machine outside the cloud, on the external network: north-south's far end."""
    name: str
    ip: ipaddress.IPv4Address
    mac: str


@dataclass(frozen=True)
class FloatingIp:
    """A VM NIC's public address: DNAT in, SNAT out, at the router of its vnet."""
    vm: str
    vnet: str
    ip: ipaddress.IPv4Address


@dataclass(frozen=True)
class Testbed:
    name: str
    vswitch: VSwitch
    network: Network
    hosts: tuple[Host, ...]
    vnets: tuple[Vnet, ...]
    vms: tuple[Vm, ...]
    pairs: tuple[Pair, ...] = ()
    security_groups: tuple[SecurityGroup, ...] = ()
    routers: tuple[Router, ...] = ()
    external: External | None = None
    external_hosts: tuple[ExternalHost, ...] = ()
    floating_ips: tuple[FloatingIp, ...] = ()
    source: str = field(default="<memory>", compare=False)

    @property
    def port_security(self) -> bool:
        """Some port is filtered: the kind must realise security groups."""
        return any(nic.port_security for vm in self.vms for nic in vm.nics)

    def host(self, name: str) -> Host:
        return _by_name(self.hosts, name, "host")

    def vnet(self, name: str) -> Vnet:
        return _by_name(self.vnets, name, "vnet")

    def vm(self, name: str) -> Vm:
        return _by_name(self.vms, name, "VM")

    def pair(self, name: str) -> Pair:
        return _by_name(self.pairs, name, "pair")

    def security_group(self, name: str) -> SecurityGroup:
        return _by_name(self.security_groups, name, "security group")

    def router(self, name: str) -> Router:
        return _by_name(self.routers, name, "router")

    def router_of(self, vnet: str) -> Router | None:
        """The router with an interface on VNET (the loader allows one), or None."""
        return next((r for r in self.routers if any(p.vnet == vnet for p in r.ports)), None)

    def floating_ips_of(self, router: Router) -> tuple[FloatingIp, ...]:
        """The floating IPs ROUTER carries: those of its vnets."""
        return tuple(f for f in self.floating_ips if self.router_of(f.vnet) == router)

    def external_host(self, name: str) -> ExternalHost | None:
        """The external host NAME (a machine outside the cloud), or None: a VM or router."""
        return next((h for h in self.external_hosts if h.name == name), None)

    def floating_ip(self, vm: str, vnet: str) -> FloatingIp | None:
        return next((f for f in self.floating_ips if f.vm == vm and f.vnet == vnet), None)

    def vms_on(self, host: str) -> tuple[Vm, ...]:
        return tuple(vm for vm in self.vms if vm.host == host)

    @functools.cached_property
    def attached(self) -> tuple[Vm, ...]:
        """Everything whose NICs are ports of the vSwitches: the VMs, then, where the kind
        routes in a namespace (``registry.ROUTERS`` in NAMESPACE_ROUTERS), each router as its
        namespace holding one port per interface (Neutron's legacy L3 agent plugs a
        router's qr- ports as a VM's; an OVN logical router has no port of its own), and
        each router on a stick (its subinterfaces; the kind puts them behind its trunk).
        Positions are the VMs' first, so a VM's index is the same in ``vms`` and here."""
        in_ns = ROUTERS.get(str(self.vswitch.kind)) in NAMESPACE_ROUTERS
        return self.vms + tuple(router_holder(r) for r in self.routers
                                if r.routing == STICK or (r.routing == ROUTER and in_ns))

    def attached_on(self, host: str) -> tuple[Vm, ...]:
        return tuple(vm for vm in self.attached if vm.host == host)

    def gateway_hosts(self) -> list[str]:
        """Hosts with a router's gateway, in host order: they get a link to the external
        network (its ``br-ex``)."""
        return [h.name for h in self.hosts if any(r.host == h.name and r.gateway for r in self.routers)]

    def vnets_on(self, host: str) -> tuple[Vnet, ...]:
        used = {nic.vnet for vm in self.attached_on(host) for nic in vm.nics}
        used |= {p.vnet for r in self.routers if r.routing == SVI and r.host == host for p in r.ports}
        return tuple(v for v in self.vnets if v.name in used)


#: the external network's MTU (Neutron's physical-network default): its links and br-ex
EXTERNAL_MTU = 1500

#: how kinds route (``Kind.routers``) whose routers are namespaces with ports on the vSwitch
NAMESPACE_ROUTERS = ("l3-agent", "external")


def router_holder(r: Router) -> Vm:
    """Router R as what holds its ports: a namespace on its host with one NIC per
    interface (no CPU of its own: it forwards on its host's)."""
    return Vm(name=r.name, host=r.host, cpus=(),
              nics=tuple(Nic(vnet=p.vnet, ip=p.ip, mac=p.mac) for p in r.ports))


def _by_name(items, name, what):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}")
