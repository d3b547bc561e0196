"""The vRouter agent's in-built DHCP server: answers a VM's DISCOVER/REQUEST with the
address its interface was given (the agent knows it, as Contrail's agent knows the
port's IPAM address). Pure: packet bytes in, packet bytes out (os-ken's packet lib)."""

from __future__ import annotations

import ipaddress

from os_ken.lib.packet import dhcp, ethernet, ipv4, packet, udp

from vnetbench.kinds.vrouter.logic import VROUTER_MAC, Iface

LEASE_S = 86400
REPLY = {dhcp.DHCP_DISCOVER: dhcp.DHCP_OFFER, dhcp.DHCP_REQUEST: dhcp.DHCP_ACK}


def server_ip(iface: Iface) -> str:
    """The service address of the vnet: its last usable address (.254 of a /24)."""
    net = ipaddress.IPv4Network(f"{iface.ip}/{iface.prefixlen}", strict=False)
    return str(net.broadcast_address - 1)


def _message_type(req) -> int | None:
    for opt in (req.options.option_list if req.options else []):
        if opt.tag == dhcp.DHCP_MESSAGE_TYPE_OPT:
            return opt.value[0]
    return None


def reply(data: bytes, iface: Iface, mtu: int, router: str | None = None) -> bytes | None:
    """The OFFER or ACK for a DISCOVER or REQUEST from ``iface``'s MAC; None otherwise.
    ``router``: the vnet's router interface address, offered as the default gateway
    (option 3, as Contrail's DHCP offers the subnet's gateway)."""
    pkt = packet.Packet(data)
    req = pkt.get_protocol(dhcp.dhcp)
    if req is None or req.chaddr.lower() != iface.mac.lower():
        return None
    kind = REPLY.get(_message_type(req))
    if kind is None:
        return None
    server = server_ip(iface)
    mask = str(ipaddress.IPv4Network(f"0.0.0.0/{iface.prefixlen}").netmask)
    opts = [dhcp.option(dhcp.DHCP_MESSAGE_TYPE_OPT, bytes([kind])),
            dhcp.option(dhcp.DHCP_SERVER_IDENTIFIER_OPT, ipaddress.IPv4Address(server).packed),
            dhcp.option(dhcp.DHCP_SUBNET_MASK_OPT, ipaddress.IPv4Address(mask).packed),
            dhcp.option(dhcp.DHCP_IP_ADDR_LEASE_TIME_OPT, LEASE_S.to_bytes(4, "big")),
            dhcp.option(dhcp.DHCP_INTERFACE_MTU_OPT, mtu.to_bytes(2, "big"))]
    if router:
        opts.append(dhcp.option(dhcp.DHCP_GATEWAY_ADDR_OPT, ipaddress.IPv4Address(router).packed))
    ans = dhcp.dhcp(op=dhcp.DHCP_BOOT_REPLY, chaddr=iface.mac, xid=req.xid, flags=req.flags,
                    yiaddr=iface.ip, siaddr=server, hlen=6,
                    options=dhcp.options(option_list=opts))
    out = packet.Packet()
    out.add_protocol(ethernet.ethernet(dst=iface.mac, src=VROUTER_MAC, ethertype=0x0800))
    out.add_protocol(ipv4.ipv4(src=server, dst=iface.ip, proto=17, ttl=64))
    out.add_protocol(udp.udp(src_port=67, dst_port=68))
    out.add_protocol(ans)
    out.serialize()
    return bytes(out.data)
