"""The testbed as pure, frozen data: what to build, never how.

Mininet's Topo/Net split: this module describes hosts, vnets and VMs; a backend
(``vnetbench.testbed.netns``) realises them. Nothing here touches the system.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field


class VSwitchKind(str, enum.Enum):
    LINUXBRIDGE = "linuxbridge"
    OVS = "ovs"
    OVS_OPENFLOW = "ovs-openflow"   # reactive OpenFlow controller (Floodlight/IVS-like)
    OVN = "ovn"
    VROUTER = "vrouter"             # Contrail-like L3, MPLS over GRE

    def __str__(self):
        return self.value


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

# Where a vSwitch kind adds more than the plain header: OVN's Geneve carries an
# 8-byte option (the logical ports), so 58 bytes (REFERENCE §3).
KIND_OVERHEAD = {(VSwitchKind.OVN, NetType.GENEVE): 58,
                 # vrouter's gre is MPLS over GRE: outer IP 20 + GRE 4 + MPLS 4, no inner
                 # Ethernet (an L3 overlay)
                 (VSwitchKind.VROUTER, NetType.GRE): 28}


def encap_overhead(kind, ntype: NetType) -> int:
    """Bytes in front of the tenant IP packet for ``kind`` over ``ntype``."""
    return KIND_OVERHEAD.get((VSwitchKind(kind), ntype), ENCAP_OVERHEAD[ntype])


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


@dataclass(frozen=True)
class VRouter:
    """Options of ``vrouter``: the OpenContrail vRouter agent and control node
    (docs/sdn.md gives the source of each default)."""
    headless: bool = False               # keep learned routes when the control node is lost
    hold_time: float = 90.0              # s without a message before the control node counts as lost
    flow_setup_rate: int = 1000          # new flows/s the agent sets up; 0 = no limit
    flow_hold_packets: int = 3           # packets queued per flow awaiting set-up
    flow_idle_timeout: int = 180         # s; Contrail's flow aging
    dhcp: bool = True                    # the agent answers DHCP for its VMs


@dataclass(frozen=True)
class Ovn:
    """Options of ``ovn``: its central control plane (docs/sdn.md)."""
    northd: int = 1                      # ovn-northd instances: one active (SB lock), the others standby


@dataclass(frozen=True)
class VSwitch:
    kind: VSwitchKind
    datapath: str = "auto"   # ovs: "system" (kernel module), "netdev" (userspace), "auto"
    openflow: OpenFlow | None = None     # only for ovs-openflow
    vrouter: VRouter | None = None       # only for vrouter
    ovn: Ovn | None = None               # only for ovn


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
    """An emulated hypervisor: it runs one vSwitch instance on its CPU set."""
    name: str
    cpus: tuple[int, ...]
    underlay_ip: ipaddress.IPv4Address


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
class Nic:
    vnet: str
    ip: ipaddress.IPv4Address
    mac: str
    qos: Qos | None = None


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
    """Two VMs on one vnet, placed on the same host or across hosts."""
    name: str
    placement: str
    vnet: str
    vms: tuple[str, str]


@dataclass(frozen=True)
class Testbed:
    name: str
    vswitch: VSwitch
    network: Network
    hosts: tuple[Host, ...]
    vnets: tuple[Vnet, ...]
    vms: tuple[Vm, ...]
    pairs: tuple[Pair, ...] = ()
    source: str = field(default="<memory>", compare=False)

    def host(self, name: str) -> Host:
        return _by_name(self.hosts, name, "host")

    def vnet(self, name: str) -> Vnet:
        return _by_name(self.vnets, name, "vnet")

    def vm(self, name: str) -> Vm:
        return _by_name(self.vms, name, "VM")

    def pair(self, name: str) -> Pair:
        return _by_name(self.pairs, name, "pair")

    def vms_on(self, host: str) -> tuple[Vm, ...]:
        return tuple(vm for vm in self.vms if vm.host == host)

    def vnets_on(self, host: str) -> tuple[Vnet, ...]:
        used = {nic.vnet for vm in self.vms_on(host) for nic in vm.nics}
        return tuple(v for v in self.vnets if v.name in used)


def _by_name(items, name, what):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}")
