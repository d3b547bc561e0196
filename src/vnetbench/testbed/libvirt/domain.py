"""Names, addresses and domain XML of the libvirt backend: pure, no system access."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from xml.sax.saxutils import escape

from vnetbench.testbed.model import Testbed, Vm

METADATA_NS = "https://vnetbench.dev/xmlns/libvirt/1"   # the run a domain belongs to
MGMT_BRIDGE = "vmbr"


@dataclass(frozen=True)
class Names:
    rid: str

    def domain(self, vm: str) -> str:
        return f"vnb-{self.rid}-{vm}"

    def tap(self, vm_i: int, nic: int) -> str:           # <= 15 characters (IFNAMSIZ)
        return f"vt{self.rid}-{vm_i}-{nic}"

    def mgmt_tap(self, vm_i: int) -> str:
        return f"vm{self.rid}-{vm_i}"

    @property
    def mgmt_ns(self) -> str:
        return f"vnb-{self.rid}-vmmgmt"

    def alias(self, what: str) -> str:
        return f"vnetbench run={self.rid} {what}"


def mgmt_mac(rid: str, vm_i: int) -> str:
    """Locally administered, unique per run and VM."""
    b = bytes.fromhex(rid)
    return "0a:%02x:%02x:%02x:%02x:%02x" % (b[0], b[1], b[2], vm_i >> 8, vm_i & 0xFF)


def link_local(mac: str) -> str:
    """The IPv6 link-local address a Linux guest derives from MAC (EUI-64)."""
    o = [int(x, 16) for x in mac.split(":")]
    eui = bytes([o[0] ^ 0x02, o[1], o[2], 0xFF, 0xFE, o[3], o[4], o[5]])
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + eui))


def guest_nics(testbed: Testbed, vm: Vm):
    """(index, cidr, mtu) of the VM's tenant NICs, as the netns VM had them."""
    for i, nic in enumerate(vm.nics):
        vnet = next(v for v in testbed.vnets if v.name == nic.vnet)
        yield i, f"{nic.ip}/{vnet.cidr.prefixlen}", testbed.network.tenant_mtu


@dataclass(frozen=True)
class Guest:
    """What a domain is made of: no defaults hidden in the XML."""
    name: str
    run_id: str
    vcpus: tuple[int, ...]        # host CPUs, one pinned vCPU each
    memory_mib: int
    kernel: str
    initrd: str
    cmdline: str
    # (tap, mac) or (tap, mac, Plug) in guest order; the last is management
    nics: tuple[tuple, ...]
    console: str
    domain_type: str = "qemu"             # "kvm" where the host can run the guest


@dataclass(frozen=True)
class Plug:
    """A NIC that libvirt plugs itself (a remote hypervisor's own bridge): into an OVS
    bridge on an access VLAN, or into a Linux bridge (ovs False, vlan None)."""
    bridge: str
    ovs: bool = False
    vlan: int | None = None


def nic_xml(tap: str, mac: str, plug: Plug | None = None) -> str:
    """A tap made beforehand (ethernet, managed='no'), or one libvirt makes and plugs."""
    if plug is None:
        return (f"<interface type='ethernet'><mac address='{mac}'/><target dev='{tap}' managed='no'/>"
                f"<model type='virtio'/></interface>")
    port = "<virtualport type='openvswitch'/>" if plug.ovs else ""
    vlan = f"<vlan><tag id='{plug.vlan}'/></vlan>" if plug.vlan is not None else ""
    return (f"<interface type='bridge'><mac address='{mac}'/><source bridge='{escape(plug.bridge)}'/>"
            f"{port}{vlan}<target dev='{tap}'/><model type='virtio'/></interface>")


def domain_xml(g: Guest) -> str:
    pins = "".join(f"<vcpupin vcpu='{i}' cpuset='{c}'/>" for i, c in enumerate(g.vcpus))
    cpuset = ",".join(map(str, g.vcpus))
    nics = "".join(nic_xml(*nic) for nic in g.nics)
    return (
        f"<domain type='{g.domain_type}'><name>{escape(g.name)}</name>"
        f"<metadata><vnb:run xmlns:vnb='{METADATA_NS}'>{g.run_id}</vnb:run></metadata>"
        f"<memory unit='MiB'>{g.memory_mib}</memory><vcpu placement='static'>{len(g.vcpus)}</vcpu>"
        f"<cputune>{pins}<emulatorpin cpuset='{cpuset}'/></cputune>"
        f"<os><type arch='x86_64' machine='pc'>hvm</type><kernel>{escape(g.kernel)}</kernel>"
        f"<initrd>{escape(g.initrd)}</initrd><cmdline>{escape(g.cmdline)}</cmdline></os>"
        # ACPI (its PM timer) and an HPET give the guest a clocksource finer than jiffies:
        # without them a TCG guest falls back to refined-jiffies (4 ms steps), its ping
        # reports RTTs of 0 or 4 ms and gives up on a reply after 2 x that
        f"<features><acpi/></features><clock offset='utc'><timer name='hpet' present='yes'/></clock>"
        f"<on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>"
        # QEMU as root, files left as they are: the image and console live in the run's
        # own directories (as every other process of the embedded testbed runs as root)
        f"<seclabel type='static' model='dac' relabel='no'><label>+0:+0</label></seclabel>"
        f"<devices>{nics}"
        f"<serial type='file'><source path='{escape(g.console)}'/><target port='0'/></serial>"
        f"<console type='file'><source path='{escape(g.console)}'/><target type='serial' port='0'/></console>"
        f"</devices></domain>")


def pinning(xml: str) -> dict[int, str]:
    """{vcpu: cpuset} as a live domain's XML reports it."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(xml)
    return {int(p.get("vcpu")): p.get("cpuset") for p in root.iterfind("./cputune/vcpupin")}


def run_of(xml: str) -> str | None:
    """The run id a domain's metadata names (None for a domain that is not ours)."""
    import xml.etree.ElementTree as ET
    node = ET.fromstring(xml).find(f"./metadata/{{{METADATA_NS}}}run")
    return node.text if node is not None else None
