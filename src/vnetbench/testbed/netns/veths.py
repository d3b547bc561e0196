"""The veths of an emulated host and where their other ends are: the one place that
knows the wiring the builder makes (``builder._underlay``, ``builder._vms``).

Whoever must act on a host's link from its far side (a capture that has to see what
an AF_XDP port sends, an offload to turn off on the peer) or count a host's ports
asks here, instead of rebuilding the map from names and indices."""

from __future__ import annotations

from dataclasses import dataclass

from vnetbench.testbed.model import Testbed
from vnetbench.testbed.netns.names import Names
from vnetbench.testbed.wiring import PHYSNET, TRUNK, UPLINK, VM_NIC, Wire, wires  # noqa: F401 (the roles)


@dataclass(frozen=True)
class HostVeth:
    """A veth of a host: its name in the host's namespace and its other end."""
    role: str
    name: str
    peer_ns: str
    peer: str


def host_veths(testbed: Testbed, names: Names, host: str) -> list[HostVeth]:
    """HOST's veths with their names and far ends (the fabric's end of the uplink and of
    a physnet, the VM's NIC in its namespace)."""
    hi = [h.name for h in testbed.hosts].index(host)
    out = []
    for w in wires(testbed, host):
        if w.role == UPLINK:
            out.append(HostVeth(w.role, names.uplink, names.fabric_ns, names.fabric_uplink(hi)))
        elif w.role == PHYSNET:
            (vi,) = w.index
            out.append(HostVeth(w.role, names.physnet(vi), names.fabric_ns, names.fabric_physnet(hi, vi)))
        elif w.role == TRUNK:
            (ri,) = w.index
            out.append(HostVeth(w.role, names.trunk(ri), names.host_ns(host), names.trunk_nic(ri)))
        else:
            vm_i, k = w.index
            out.append(HostVeth(w.role, names.vm_port(vm_i, k), names.vm_ns(testbed.attached[vm_i].name),
                                names.vm_nic(k)))
    return out
