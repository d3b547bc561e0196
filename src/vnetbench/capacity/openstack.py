"""The capacity profile handed to OpenStack, in Neutron's and Placement's own terms (Zed):
what each compute host's OVS agent reports, and the QoS policies the workload's ports
need, so that Nova refuses a host whose measured vSwitch capacity is taken.

Zed has two Placement inventories an OVS agent reports (``neutron/conf/plugins/ml2/
drivers/ovs_conf.py``):

- ``[ovs] resource_provider_bandwidths = <bridge>:<egress kbps>:<ingress kbps>``: the
  ``NET_BW_EGR_KILOBIT_PER_SEC`` / ``NET_BW_IGR_KILOBIT_PER_SEC`` of a *physical* bridge
  of ``bridge_mappings``; a port's ``minimum_bandwidth`` rule draws from it only on a
  physnet-backed network (flat, VLAN): in Zed a tunnelled network (VXLAN, GRE, Geneve)
  has no bandwidth resource provider. Egress and ingress are the VM's view: egress is
  what the host sends (the profile's ``tx`` role), ingress what it receives (``rx``).
- ``[ovs] resource_provider_packet_processing_without_direction = <hypervisor>:<kpps>``:
  the packet rate the OVS backend itself can process (``NET_PACKET_RATE_KILOPACKET_PER_SEC``),
  whatever the network type; a port's ``minimum_packet_rate`` rule draws from it. This is
  the vSwitch's CPU-bound capacity, so it is the one that applies to tunnels.

Packet rates are derived from Gbit/s at full-size frames (tenant MTU + 14 bytes of
Ethernet header): the profile measures TCP streams, whose packets are that size on the
tenant wire.
"""

from __future__ import annotations

from vnetbench.capacity import place
from vnetbench.capacity.files import Hosts, Workload

PHYSNET_TYPES = ("flat", "vlan")
ETHERNET = 14


def handoff(profile: dict, hosts: Hosts, workload: Workload | None = None,
            bridge: str = "br-data") -> dict:
    """Per host the agent's configuration lines, per VM its QoS policy commands, and what
    does not apply to this network type (said, never silently left out)."""
    model = place.Model(profile, hosts)
    physnet = hosts.network in PHYSNET_TYPES
    out = {"network": hosts.network, "hosts": [], "ports": [], "notes": []}
    if not physnet:
        out["notes"].append(
            f"{hosts.network} is tunnelled: Zed's minimum-bandwidth guarantees exist only for "
            "physnet-backed (flat, VLAN) networks, so resource_provider_bandwidths is not "
            "given; the packet-processing inventory and minimum-packet-rate rules apply")
    for h in hosts.hosts:
        tx = model.capacity(h, hosts.network, "tx")
        rx = model.capacity(h, hosts.network, "rx")
        mtu = model.cells[(h.vswitch, hosts.network)].get("tenant_mtu") or 1500
        kpps = min(x for x in (tx, rx) if x is not None) if (tx or rx) else None
        kpps = None if kpps is None else int(kpps * 1e9 / (8 * (mtu + ETHERNET)) / 1000)
        lines = []
        if physnet and tx and rx:
            lines.append(f"resource_provider_bandwidths = {bridge}:{int(tx * 1e6)}:{int(rx * 1e6)}")
        if kpps:
            lines.append(f"resource_provider_packet_processing_without_direction = {h.name}:{kpps}")
        out["hosts"].append({"host": h.name, "ovs_agent": {"ovs": lines},
                             "egress_gbps": tx, "ingress_gbps": rx, "kpps": kpps})
    if workload is not None:
        mtu = next(iter(model.cells.values())).get("tenant_mtu") or 1500
        egress_of: dict[str, float] = {}
        ingress_of: dict[str, float] = {}
        for f in workload.flows:          # one pass: VMs x flows is minutes at the schema's maximum
            egress_of[f.src] = egress_of.get(f.src, 0.0) + f.gbps
            ingress_of[f.dst] = ingress_of.get(f.dst, 0.0) + f.gbps
        for vm in workload.vms:
            egress, ingress = egress_of.get(vm.name, 0.0), ingress_of.get(vm.name, 0.0)
            if not egress and not ingress:
                continue
            out["ports"].append({"vm": vm.name, "policy": f"vnb-min-{vm.name}",
                                 "commands": port_commands(vm.name, egress, ingress, mtu, physnet)})
    return out


def port_commands(vm: str, egress_gbps: float, ingress_gbps: float, mtu: int, physnet: bool) -> list[str]:
    """openstack CLI lines: one QoS policy per VM port with its guaranteed share."""
    policy = f"vnb-min-{vm}"
    out = [f"openstack network qos policy create {policy}"]
    if physnet:
        for direction, g in (("egress", egress_gbps), ("ingress", ingress_gbps)):
            if g:
                out.append(f"openstack network qos rule create --type minimum-bandwidth "
                           f"--min-kbps {int(g * 1e6)} --{direction} {policy}")
    kpps = int((egress_gbps + ingress_gbps) * 1e9 / (8 * (mtu + ETHERNET)) / 1000)
    if kpps:
        out.append(f"openstack network qos rule create --type minimum-packet-rate "
                   f"--min-kpps {kpps} --any {policy}")
    out.append(f"openstack port set --qos-policy {policy} <port of {vm}>")
    return out


def render(out: dict) -> str:
    lines = [f"# OpenStack hand-off ({out['network']})"] + [f"# {n}" for n in out["notes"]]
    for h in out["hosts"]:
        lines.append(f"\n# {h['host']}: /etc/neutron/plugins/ml2/openvswitch_agent.ini")
        lines.append("[ovs]")
        lines += h["ovs_agent"]["ovs"] or ["# no capacity known for this host's kind"]
    if out["ports"]:
        lines.append("\n# minimum guarantees of the workload's ports")
        for p in out["ports"]:
            lines += p["commands"]
    return "\n".join(lines) + "\n"
