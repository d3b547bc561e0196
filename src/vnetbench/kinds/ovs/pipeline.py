"""The OpenFlow pipeline Neutron's OVS agent lays out when its firewall is the
``openvswitch`` driver, as ovs-ofctl flow strings: pure (names and numbers in, flows out).

Why it exists: without security groups the ``ovs`` kind is one bridge per host whose
``NORMAL`` action does everything (VM ports tagged with the vnet's local VLAN, tunnel
ports keyed per vnet). Neutron's OVS firewall driver cannot filter on that bridge: its
ingress flows (table 60, ``TRANSIENT_TABLE``) match the local VLAN a packet carries when
it enters the integration bridge from ``patch-tun``, and a tunnel port that is an access
port hands the pipeline an untagged packet. So with port security on, a tunnel network
is wired as the agent wires it: the integration bridge (VM ports, ``patch-tun``) and a
tunnel bridge (``patch-int``, one tunnel port per peer host whose key is set by flows).

The flows follow Neutron 21 (Zed, Debian's python3-neutron), native OpenFlow interface,
table numbers from ``neutron_lib.plugins.ml2.ovs_constants``:

- ``br_int.OVSIntegrationBridge.setup_default_table``: table 0 goes to 59
  (``PACKET_RATE_LIMIT``) and on to 60 (``TRANSIENT_TABLE``), whose lowest flow is
  ``NORMAL`` (the firewall's flows sit above it); the dead VLAN 4095 dropped; the canary
  (23), ARP-spoof (24) and local-IP (30, 31) defaults.
- ``br_tun.OVSTunnelBridge.setup_default_table``, ``setup_tunnel_port``,
  ``provision_local_vlan``, ``install_flood_to_tun``: from ``patch-int`` to 2, unicast
  to 20 (learned remote MACs, else flood), broadcast to 22 (one flow per local VLAN:
  pop the VLAN, set the tunnel id, out of every tunnel port); from a tunnel to its type's
  table (3 GRE, 4 VXLAN, 6 Geneve: tunnel id -> local VLAN), then 10, which learns the
  sender into 20 and outputs to ``patch-int``.

The firewall's own flows (tables 60, 71-94) are not here: Neutron's driver writes them
(``vnetbench.kinds.neutron.sg_agent``).
"""

from __future__ import annotations

from dataclasses import dataclass

LOCAL_SWITCHING = 0
PACKET_RATE_LIMIT = 59
TRANSIENT_TABLE = 60
TRANSIENT_EGRESS_TABLE = 62
CANARY_TABLE = 23
ARP_SPOOF_TABLE = 24
LOCAL_EGRESS_TABLE = 30
LOCAL_IP_TABLE = 31
DEAD_VLAN_TAG = 4095
PATCH_LV_TO_TUN = 2
LEARN_FROM_TUN = 10
UCAST_TO_TUN = 20
FLOOD_TO_TUN = 22
TUN_TABLE = {"gre": 3, "vxlan": 4, "geneve": 6}
OFPVID_PRESENT = 0x1000
LEARN_HARD_TIMEOUT_S = 300


@dataclass(frozen=True)
class TunnelNet:
    """One network on a host's tunnel bridge: its local VLAN and segmentation id, and the
    tunnel ports (names) towards the hosts that carry it."""
    lvid: int
    segmentation_id: int
    tunnels: tuple[str, ...]


def integration_defaults() -> list[str]:
    """br_int ``setup_default_table`` (no OpenFlow DHCP)."""
    goto = lambda table, dest: f"table={table},priority=0,actions=goto_table:{dest}"  # noqa: E731
    return [
        f"table={CANARY_TABLE},priority=0,actions=drop",
        goto(LOCAL_SWITCHING, PACKET_RATE_LIMIT),
        goto(PACKET_RATE_LIMIT, TRANSIENT_TABLE),
        f"table={TRANSIENT_TABLE},priority=3,actions=NORMAL",
        f"table={ARP_SPOOF_TABLE},priority=0,actions=drop",
        f"table={LOCAL_SWITCHING},priority=65535,vlan_tci=0x{OFPVID_PRESENT | DEAD_VLAN_TAG:04x}/0x1fff,"
        "actions=drop",
        f"table={TRANSIENT_EGRESS_TABLE},priority=3,actions=NORMAL",
        goto(LOCAL_EGRESS_TABLE, PACKET_RATE_LIMIT),
        goto(LOCAL_IP_TABLE, PACKET_RATE_LIMIT),
    ]


def tunnel_defaults(patch_int: str) -> list[str]:
    """br_tun ``setup_default_table`` (no ARP responder: the embedded testbed has no l2pop)."""
    learn = ("learn(table={t},priority=1,hard_timeout={h},NXM_OF_VLAN_TCI[0..11],"
             "NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:0->NXM_OF_VLAN_TCI[],"
             "load:NXM_NX_TUN_ID[]->NXM_NX_TUN_ID[],output:OXM_OF_IN_PORT[])"
             ).format(t=UCAST_TO_TUN, h=LEARN_HARD_TIMEOUT_S)
    flows = [
        f"table=0,priority=1,in_port={patch_int},actions=goto_table:{PATCH_LV_TO_TUN}",
        "table=0,priority=0,actions=drop",
        f"table={PATCH_LV_TO_TUN},priority=0,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00,"
        f"actions=goto_table:{UCAST_TO_TUN}",
        f"table={PATCH_LV_TO_TUN},priority=0,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,"
        f"actions=goto_table:{FLOOD_TO_TUN}",
    ]
    flows += [f"table={t},priority=0,actions=drop" for t in sorted(TUN_TABLE.values())]
    return flows + [
        f"table={LEARN_FROM_TUN},priority=1,actions={learn},output:{patch_int}",
        f"table={UCAST_TO_TUN},priority=0,actions=goto_table:{FLOOD_TO_TUN}",
        f"table={FLOOD_TO_TUN},priority=0,actions=drop",
    ]


def tunnel_port(network_type: str, port: str) -> str:
    """br_tun ``setup_tunnel_port``: what arrives on PORT goes to its type's table."""
    return f"table=0,priority=1,in_port={port},actions=goto_table:{TUN_TABLE[network_type]}"


def tunnel_network(network_type: str, net: TunnelNet) -> list[str]:
    """br_tun ``provision_local_vlan`` and ``install_flood_to_tun`` for one network."""
    outputs = ",".join(f"output:{p}" for p in net.tunnels)
    flows = [f"table={TUN_TABLE[network_type]},priority=1,tun_id=0x{net.segmentation_id:x},"
             f"actions=push_vlan:0x8100,set_field:{net.lvid | OFPVID_PRESENT}->vlan_vid,"
             f"goto_table:{LEARN_FROM_TUN}"]
    if net.tunnels:
        flows.append(f"table={FLOOD_TO_TUN},priority=1,dl_vlan={net.lvid},"
                     f"actions=pop_vlan,set_field:0x{net.segmentation_id:x}->tun_id,{outputs}")
    return flows


def tunnel_bridge(network_type: str, patch_int: str, ports: list[str],
                  nets: list[TunnelNet]) -> list[str]:
    """Every flow of a host's tunnel bridge."""
    flows = tunnel_defaults(patch_int)
    flows += [tunnel_port(network_type, p) for p in ports]
    for net in nets:
        flows += tunnel_network(network_type, net)
    return flows
