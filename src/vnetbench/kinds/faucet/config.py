"""Faucet's own configuration (faucet.yaml), generated from the testbed: pure data.

One VLAN per vnet (its segmentation id on a ``vlan`` network, a local id on ``flat``);
each emulated host's OVS bridge is a Faucet datapath (``dps``) whose interfaces are the
host's VM ports (untagged members of their vnet's VLAN) and its way to the other hosts:
on ``vlan`` the uplink, a trunk tagged with every VLAN the host carries, through the
fabric's bridge (the underlay as a VLAN trunk); on ``flat`` one physnet port per vnet,
untagged. Port numbers are fixed here and requested from OVS (``ofport_request``), since
Faucet names ports by number (docs/configuration.rst, "interfaces"). A router with
``routing: svi`` (seed 000's L3 switch) is Faucet's own inter-VLAN routing: each of its
VLANs gets the router's address as its ``faucet_vips`` (Faucet answers ARP and ICMP for
it, with ``faucet_mac``) and a ``routers`` entry joins them (docs/configuration.rst,
"routers").
"""

from __future__ import annotations

from vnetbench.testbed.model import SVI, NetType

#: Faucet's default cookie on every flow it installs (dp.py: 1524372928)
COOKIE = 0x5ADC15C0
#: how long Faucet keeps a learned host idle (dp ``timeout``, its default)
LEARN_TIMEOUT_S = 300
PHYSNET_PORT_BASE = 60000
UPLINK_PORT = 65000             # below OFPP_MAX (0xff00)


def dpid(host_i: int) -> int:
    return host_i + 1


def vid(testbed, vnet_i: int) -> int:
    vnet = testbed.vnets[vnet_i]
    return vnet.segmentation_id if testbed.network.type is NetType.VLAN else vnet_i + 1


def vm_port_number(testbed, vm_i: int, nic: int) -> int:
    """1 + the NIC's index among every VM NIC of the testbed: the same on every host, so a
    migrated VM keeps its port's number on its new datapath."""
    return 1 + sum(len(vm.nics) for vm in testbed.vms[:vm_i]) + nic


def vm_ports(testbed, names, host: str) -> list[tuple[int, str, str]]:
    """(OpenFlow port, port name, vnet) of every VM NIC on HOST."""
    return [(vm_port_number(testbed, vm_i, k), names.vm_port(vm_i, k), nic.vnet)
            for vm_i, vm in enumerate(testbed.vms) if vm.host == host
            for k, nic in enumerate(vm.nics)]


def built_vnets(testbed) -> dict[str, list[str]]:
    """host -> the vnets its bridge was built for (a trunk's VLANs, its physnets): what is
    on it at bring-up, which a migration later does not change."""
    return {h.name: [v.name for v in testbed.vnets_on(h.name)] for h in testbed.hosts}


def ports(testbed, names, host: str, built=None) -> list[tuple[int, str]]:
    """(OpenFlow port, port name) of everything HOST's bridge carries."""
    built = built or built_vnets(testbed)
    out = [(n, name) for n, name, _ in vm_ports(testbed, names, host)]
    if testbed.network.type is NetType.VLAN and built[host]:
        out.append((UPLINK_PORT, names.uplink))
    elif testbed.network.type is NetType.FLAT:
        out += [(PHYSNET_PORT_BASE + vi, names.physnet(vi)) for vi, v in enumerate(testbed.vnets)
                if v.name in built[host]]
    return out


def faucet_yaml(testbed, names, removed=(), built=None) -> dict:
    """The document Faucet reads; vnets in REMOVED are left out (deprovisioned). BUILT
    (``built_vnets``) keeps a host's trunk and physnets as they were built when its VMs
    have moved away; a datapath left with no interface is left out (Faucet refuses one)."""
    built = built or built_vnets(testbed)
    kept = [(vi, v) for vi, v in enumerate(testbed.vnets) if v.name not in removed]
    vlans = {v.name: {"vid": vid(testbed, vi), "description": f"vnet {v.name}"} for vi, v in kept}
    dps = {}
    for hi, host in enumerate(testbed.hosts):
        here = [v for v in built[host.name] if v in vlans]
        interfaces = {n: {"name": name, "native_vlan": vnet}
                      for n, name, vnet in vm_ports(testbed, names, host.name) if vnet in vlans}
        if testbed.network.type is NetType.VLAN and here:
            interfaces[UPLINK_PORT] = {"name": names.uplink, "tagged_vlans": here,
                                       "description": "trunk to the other hosts"}
        elif testbed.network.type is NetType.FLAT:
            for vi, v in kept:
                if v.name in here:
                    interfaces[PHYSNET_PORT_BASE + vi] = {"name": names.physnet(vi),
                                                          "native_vlan": v.name,
                                                          "description": f"physnet of {v.name}"}
        if interfaces:
            dps[host.name] = {"dp_id": dpid(hi), "hardware": "Open vSwitch",
                              "timeout": LEARN_TIMEOUT_S, "interfaces": interfaces}
    doc = {"vlans": vlans, "dps": dps}
    svis = [r for r in testbed.routers if r.routing == SVI and all(p.vnet in vlans for p in r.ports)]
    for r in svis:     # seed 000's L3 switch: Faucet routes between the VLANs itself
        for p in r.ports:
            vlans[p.vnet].update(faucet_vips=[f"{p.ip}/{testbed.vnet(p.vnet).cidr.prefixlen}"],
                                 faucet_mac=p.mac)
    if svis:
        doc["routers"] = {r.name: {"vlans": [p.vnet for p in r.ports]} for r in svis}
    return doc
