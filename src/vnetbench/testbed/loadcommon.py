"""What the testbed loader's parts share: the defaults of a testbed file, the names and
addresses they hand out (MACs, tenant addresses per vnet), Neutron's defaults (its
'default' security group, a QoS policy's burst), and the wording of a fix."""

from __future__ import annotations

import ipaddress

from vnetbench import inputs
from vnetbench.testbed.model import DEFAULT_SG, NetType, Qos, SecurityGroup, SgRule

DEFAULT_UNDERLAY = "198.18.0.0/24"
DEFAULT_TENANT = "198.19.{}.0/24"          # vnet i (1-based) -> 198.19.i.0/24
DEFAULT_EXTERNAL = "198.18.128.0/24"       # the external network's default (inside 198.18.0.0/15)
DEFAULT_EXTERNAL_HOST = "outside"
MAX_DEFAULT_TENANTS = 255
MAX_FILE_BYTES = 128 * 1024                # parsed in pure Python with a depth limit
DEFAULT_SEGMENT_BASE = {NetType.VLAN: 100, NetType.VXLAN: 1000,
                        NetType.GENEVE: 1000, NetType.GRE: 1000}

short = inputs.excerpt


def neutron_default_group() -> SecurityGroup:
    """Neutron's 'default' group of every project (IPv4 rules): egress to anywhere,
    ingress from the group's own members."""
    return SecurityGroup(DEFAULT_SG, (SgRule("ingress", remote_group=DEFAULT_SG), SgRule("egress")))


def qos(raw) -> Qos | None:
    """Neutron's default burst: 80% of the rate, in kbit."""
    if raw is None:
        return None
    return Qos(max_kbps=raw["max_kbps"],
               max_burst_kbits=raw.get("max_burst_kbits", max(1, raw["max_kbps"] * 8 // 10)),
               direction=raw.get("direction", "ingress"))


class IpAllocator:
    """Hands out tenant addresses per vnet: explicit ones first come, then in order.

    Explicit addresses are reserved up front so that an automatic one given to
    an earlier VM never steals an address a later VM asked for.
    """

    def __init__(self, vnets, specs=()):
        self.used = {v.name: set() for v in vnets}
        self.free = {v.name: iter(v.cidr.hosts()) for v in vnets}
        self.reserved = {v.name: set() for v in vnets}
        self.owner = {}             # (vnet, ip) -> who holds it, where not a VM
        for spec in specs:
            for ref in spec.get("vnets") or []:
                if isinstance(ref, dict) and "ip" in ref and ref["name"] in self.reserved:
                    self.reserved[ref["name"]].add(ipaddress.IPv4Address(ref["ip"]))

    def take(self, vnet, explicit, fail):
        used = self.used[vnet.name]
        if explicit is not None:
            ip = ipaddress.IPv4Address(explicit)
            if ip not in vnet.cidr or ip in (vnet.cidr.network_address, vnet.cidr.broadcast_address):
                fail(f"{ip} is not a host address of vnet {vnet.name!r} ({vnet.cidr})",
                     "pick an address inside the vnet's CIDR")
            if ip in used:
                held = self.owner.get((vnet.name, ip))
                fail(f"{ip} is already taken on vnet {vnet.name!r}" + (f" ({held})" if held else ""),
                     "give every NIC its own address")
        else:
            skip = used | self.reserved[vnet.name]
            ip = next((a for a in self.free[vnet.name] if a not in skip), None)
            if ip is None:
                fail(f"vnet {vnet.name!r} ({vnet.cidr}) has no free address left",
                     "use a larger CIDR")
        used.add(ip)
        return ip


def one_of(objects) -> str:
    names = [o.name for o in objects]
    return "use one of: " + ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")


def outside_fix(underlay) -> str:
    """A tenant CIDR that really is outside the underlay, or: shrink the underlay."""
    for text in ("198.19.1.0/24", "198.18.1.0/24", "198.19.255.0/24", "10.0.1.0/24"):
        if not ipaddress.IPv4Network(text).overlaps(underlay):
            return f"pick a tenant CIDR outside the underlay, e.g. {text}"
    return f"shrink network.underlay_cidr (e.g. {DEFAULT_UNDERLAY}) to leave room for tenant CIDRs"


def mac(vm_index: int, nic: int) -> str:
    """Locally administered, unique per VM and NIC within a testbed."""
    return "02:76:6e:{:02x}:{:02x}:{:02x}".format(vm_index >> 8 & 0xff, vm_index & 0xff, nic)
