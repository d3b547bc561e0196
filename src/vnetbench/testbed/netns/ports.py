"""Ports without a VM on a running netns testbed (the ``port_ready`` family, issue 48).

A port is what os-vif leaves on a hypervisor when Nova plugs a VM's NIC, without the
VM: a namespace of the run (``vnb-<run>-p-<i>``) holding one veth end (``eth0``, its
MAC and address, up), the other end in the host's namespace plugged into the host's
vSwitch exactly as the kind plugs a VM's NIC (``NetnsDriver.plug``: ovs, an access port
with the vnet's local VLAN; ovn, an OVS port with ``external_ids:iface-id`` after the
logical switch port is created in the NB database, as Neutron does first; linuxbridge,
a port of the vnet's bridge). Nothing runs inside: the kernel answers the probe. On
OVS's userspace datapath the port is an AF_PACKET one, where the VMs' may be AF_XDP.

Each namespace is journaled before it exists (teardown and ``cleanup`` remove it, and
with it the veth pair); the vSwitch's port and the logical port live in the run's own
OVS and NB database, which teardown removes whole. The run's meta lists the ports
(``ports``), so a later attach sees them.
"""

from __future__ import annotations

import ipaddress
import os
import threading

from vnetbench import kinds
from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.linux import nlbatch, nsops
from vnetbench.testbed.model import Nic, Vm
from vnetbench.testbed.netns.undo import undo_netns

NIC = "eth0"
_META = threading.Lock()          # ports are added from several threads: one meta writer


def ns_name(run_id: str, index: int) -> str:
    return f"vnb-{run_id}-p-{index}"


def port_name(index: int) -> str:
    """The port's name, its Vm stand-in's, and (with ``-eth0``) its logical port's."""
    return f"p{index}"


def host_end(run_id: str, index: int) -> str:
    name = f"pp{run_id}-{index}"
    if len(name) > 15:
        raise VnetbenchError(f"port index {index} is too large for an interface name")
    return name


def free_addresses(testbed, vnet: str, taken) -> list:
    """The vnet's host addresses no VM NIC, router port or added port holds (the first,
    the gateway by custom, is left out)."""
    net = testbed.vnet(vnet).cidr
    used = {str(n.ip) for v in testbed.vms for n in v.nics} | set(taken)
    used |= {str(p.ip) for r in testbed.routers for p in r.ports if p.vnet == vnet}
    used |= kinds.netns_driver(testbed).port_reserved(testbed, vnet)
    return [a for a in list(net.hosts())[1:] if str(a) not in used]


def check(dep) -> None:
    if not kinds.of(dep.testbed).port_ready_signal:
        able = ", ".join(k.name for k in kinds.all_kinds() if k.port_ready_signal)
        raise UnsupportedError(f"adding ports to a running {dep.testbed.vswitch.kind.value} testbed "
                               f"is not implemented (kinds: {able})")
    if dep.testbed.port_security:
        raise UnsupportedError("adding ports to a testbed with security groups is not implemented "
                               "(the agents' filters are built from the testbed's VMs)")


def add(dep, host: str, vnet: str) -> dict:
    """Plug a new port on HOST's vSwitch on VNET; its record (name, host, vnet, ip, mac,
    namespace). Journaled before anything exists."""
    check(dep)
    tb = dep.testbed
    h, v = tb.host(host), tb.vnet(vnet)
    with _META:
        meta = dep.run.meta()
        ports, index = meta.get("ports", {}), meta.get("ports_next", 0)
        free = free_addresses(tb, v.name, (p["ip"] for p in ports.values()))
        if not free:
            raise VnetbenchError(f"vnet {vnet!r} ({v.cidr}) has no free address for another port")
        name, ns, end = port_name(index), ns_name(dep.run_id, index), host_end(dep.run_id, index)
        mac = "02:%02x:%02x:%02x:%02x:%02x" % (0xfe, *(index + 1).to_bytes(4, "big"))
        port = {"name": name, "host": h.name, "vnet": v.name, "ip": str(free[0]), "mac": mac,
                "netns": ns, "host_end": end, "index": index}
        dep.run.write_meta(ports={**ports, name: port}, ports_next=index + 1)
        dep.run.record("netns", name=ns)          # journaled before it exists
    _namespace(dep, port, v.cidr.prefixlen)
    kinds.netns_driver(tb).port_plug(dep, h, end, stand_in(port))
    return port


def stand_in(port: dict) -> Vm:
    """The VM the port stands for, as the kinds' plug takes one."""
    nic = Nic(vnet=port["vnet"], ip=ipaddress.IPv4Address(port["ip"]), mac=port["mac"])
    return Vm(name=port["name"], host=port["host"], cpus=(), nics=(nic,))


def _namespace(dep, port: dict, prefixlen: int) -> None:
    """The namespace with lo and eth0 (MAC, address, up), the host end born in the host's
    namespace, up: one netlink batch from inside, as the builder makes a VM's."""
    mtu = dep.testbed.network.tenant_mtu
    fd = os.open(nsops.path(dep.names.host_ns(port["host"])), os.O_RDONLY | os.O_CLOEXEC)
    try:
        idx = nlbatch.VM_NIC_INDEX
        inside = (nlbatch.Batch(port["netns"]).set("lo up", index=1, up=True)
                  .veth(f"veth {NIC} (host end {port['host_end']})", idx, NIC, mtu, port["mac"],
                        port["host_end"], fd)
                  .address(f"address {port['ip']} on {NIC}", idx, port["ip"], prefixlen))
        nsops.create(port["netns"], then=inside.send_here)
    finally:
        os.close(fd)


def remove(dep, name: str) -> None:
    """Unplug the port as the kind unplugs a VM's, delete its logical port, remove its
    namespace (the veth pair goes with it); the meta forgets it."""
    ports = dep.run.meta().get("ports", {})
    if name not in ports:
        raise VnetbenchError(f"run {dep.run_id} has no added port {name!r}")
    port = ports[name]
    tb = dep.testbed
    kinds.netns_driver(tb).port_unplug(dep, tb.host(port["host"]), port["host_end"], name)
    undo_netns(dep.run, {"name": port["netns"]})
    with _META:
        rest = dict(dep.run.meta().get("ports", {}))
        rest.pop(name, None)
        dep.run.write_meta(ports=rest)


def ready(dep, host: str, names) -> dict:
    """Of HOST's added ports NAMES, those its kind says are programmed, with the time it
    says so (or None): one query of the host's vSwitch per call (vnetbench.testbed.readiness)."""
    ports = dep.run.meta().get("ports", {})
    ends = {ports[n]["host_end"]: n for n in names}
    found = kinds.netns_driver(dep.testbed).ports_ready(dep, dep.testbed.host(host), ends)
    return {ends[e]: at for e, at in found.items()}


def ns_argv(dep, name: str, argv) -> list[str]:
    """ARGV run in the added port's namespace (``ip netns exec``)."""
    port = dep.run.meta().get("ports", {}).get(name)
    if port is None:
        raise VnetbenchError(f"run {dep.run_id} has no added port {name!r}")
    return ["ip", "netns", "exec", port["netns"], *map(str, argv)]
