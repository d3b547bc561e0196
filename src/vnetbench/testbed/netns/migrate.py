"""VM migration between emulated hosts, keeping the VM's MAC, IP and processes: the netns
backend's ``Deployment.migrate_vm`` (the fault API measures around it: faults/migrate.py).

A VM is a namespace; its NIC is a veth whose other end is a port of its host's
vSwitch. Migration moves that end: detach it from the old host's vSwitch, move it
into the new host's namespace, attach it to that vSwitch the way the kind plugs a
VM (ovs: access port with the vnet's local tag; ovs-openflow: a plain port, the
controller sees port-status and, from the VM's announcement, the new attachment
point; ovn: iface-id, ovn-controller claims the logical port; linuxbridge: the
vnet's bridge: ``NetnsDriver.plug``). Then the VM announces itself as QEMU does after a live migration:
RARP broadcasts from its MAC, so learning switches and controllers find it.

* live: the VM keeps running (its namespace and processes never stop);
* cold: the guest's NICs go down first (shut down), come up on the new host (boot).

The testbed in the run's state is updated (the VM's host and CPUs), so later
commands run the VM on its new host's CPUs.
"""

from __future__ import annotations

import subprocess
import sys
import time

from vnetbench import kinds
from vnetbench.errors import VnetbenchError
from vnetbench.linux import links, nsops

RARP = 0x8035
ANNOUNCE_DELAYS_S = (0.0, 0.05, 0.15)       # QEMU announce-initial 50 ms, step 100 ms


def check(dep, vm: str, to_host: str):
    tb = dep.testbed
    v, dst = tb.vm(vm), tb.host(to_host)
    if v.host == dst.name:
        raise VnetbenchError(f"VM {vm} is already on host {to_host}")
    missing = [n.vnet for n in v.nics if n.vnet not in _built_vnets(dep)[dst.name]]
    if missing:
        raise VnetbenchError(f"host {to_host} carries no vnet {missing[0]!r} (no tunnel or physnet "
                             f"for it was built); migrate to a host that has a VM on it")
    return v, dst


def migrate(dep, vm: str, to_host: str, live: bool) -> dict:
    """Live: re-plug and announce; cold: NICs down, re-plug, NICs up, announce."""
    check(dep, vm, to_host)
    t0 = time.time()
    if not live:
        set_nics(dep, vm, up=False)
    move(dep, vm, to_host)
    if not live:
        set_nics(dep, vm, up=True)
    announce(dep, vm)
    return {"move_s": time.time() - t0}


def _built_vnets(dep) -> dict:
    """host -> vnets its vSwitch was wired for at bring-up (tunnels, physnets): kept in
    the run's state, since migrations change where VMs are but not what was built."""
    meta = dep.run.meta()
    if "built_vnets_on" not in meta:
        tb = dep.testbed
        meta = dep.run.write_meta(built_vnets_on={h.name: [v.name for v in tb.vnets_on(h.name)]
                                                  for h in tb.hosts})
    return meta["built_vnets_on"]


def move(dep, vm: str, to_host: str) -> None:
    """Re-plug every NIC of ``vm`` into ``to_host``'s vSwitch and record the new host."""
    v, dst = check(dep, vm, to_host)
    _built_vnets(dep)
    tb, n = dep.testbed, dep.names
    vm_i = tb.vms.index(v)
    for k, nic in enumerate(v.nics):
        port = n.vm_port(vm_i, k)
        _detach(dep, tb.host(v.host), port)
        with nsops.rtnl(n.host_ns(v.host)) as old:
            old.link("set", index=links.index(old, port), net_ns_fd=n.host_ns(dst.name))
        _attach(dep, dst, port, v, k, nic)
    dep.vm_moved(vm, dst.name)


def _detach(dep, host, port) -> None:
    kinds.netns_driver(dep).unplug(dep, host, port)


def _attach(dep, host, port, vm, k, nic) -> None:
    kinds.netns_driver(dep).plug(dep, host, port, vm, k, nic)


def set_nics(dep, vm: str, up: bool) -> None:
    """The guest's side: NICs down (shut down) or up (booted)."""
    v = dep.testbed.vm(vm)
    with nsops.rtnl(dep.names.vm_ns(v.name)) as ns:
        for k in range(len(v.nics)):
            ns.link("set", index=links.index(ns, dep.names.vm_nic(k)), state="up" if up else "down")


def announce(dep, vm: str) -> None:
    """RARP broadcasts from every NIC of the VM (QEMU's self-announce after migration)."""
    v = dep.testbed.vm(vm)
    frames = {dep.names.vm_nic(k): rarp(nic.mac) for k, nic in enumerate(v.nics)}
    code = ("import socket,sys,time\n"
            f"frames={ {k: f.hex() for k, f in frames.items()} !r}\n"
            "s={d: socket.socket(socket.AF_PACKET, socket.SOCK_RAW) for d in frames}\n"
            "[s[d].bind((d, 0)) for d in frames]\n"
            f"for delay in {list(ANNOUNCE_DELAYS_S)!r}:\n"
            "    time.sleep(delay)\n"
            "    [s[d].send(bytes.fromhex(f)) for d, f in frames.items()]\n")
    done = subprocess.run(dep.vm_argv(vm, [sys.executable, "-c", code]), capture_output=True,
                          text=True, timeout=10)
    if done.returncode != 0:
        raise VnetbenchError(f"announce from {vm} failed: {done.stderr.strip()[-200:]}")


def rarp(mac: str) -> bytes:
    """A RARP 'request reverse' broadcast from ``mac``, as QEMU sends it."""
    m = bytes.fromhex(mac.replace(":", ""))
    eth = b"\xff" * 6 + m + RARP.to_bytes(2, "big")
    body = (1).to_bytes(2, "big") + (0x0800).to_bytes(2, "big") + bytes([6, 4]) + \
        (3).to_bytes(2, "big") + m + b"\0" * 4 + m + b"\0" * 4
    return (eth + body).ljust(60, b"\0")
