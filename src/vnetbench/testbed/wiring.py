"""Which veths a host of a testbed gets, by role and position: pure data of the model.

The netns backend names and makes them (``testbed.netns.veths``); a kind's description
counts them without a run (``Ovs.ports``: AF_XDP or AF_PACKET by the number of ports).
"""

from __future__ import annotations

from dataclasses import dataclass

from vnetbench.testbed.model import STICK, NetType, Testbed

UPLINK, PHYSNET, VM_NIC, TRUNK = "uplink", "physnet", "vm", "trunk"


@dataclass(frozen=True)
class Wire:
    """One veth of a host, by position: ``index`` is the vnet's (physnet) or the VM's
    and NIC's (vm) place in the testbed's tuples; the uplink has none."""
    role: str
    index: tuple = ()


def wires(testbed: Testbed, host: str) -> list[Wire]:
    """HOST's veths as the builder makes them: the uplink, one physnet per vnet on a
    flat network, one per VM NIC (routers' too), one trunk per router on a stick (both
    ends in the host: ``l3.trunk_links``). Pure: counts and choices need no run."""
    out = [Wire(UPLINK)]
    if testbed.network.type is NetType.FLAT:
        vnet_i = {v.name: i for i, v in enumerate(testbed.vnets)}
        out += [Wire(PHYSNET, (vnet_i[v.name],)) for v in testbed.vnets_on(host)]
    for vm_i, vm in enumerate(testbed.attached):
        if vm.host == host:
            out += [Wire(VM_NIC, (vm_i, k)) for k in range(len(vm.nics))]
    out += [Wire(TRUNK, (ri,)) for ri, r in enumerate(testbed.routers) if r.routing == STICK and r.host == host]
    return out
