"""North-south on the vRouter model as Contrail does it: what the testbed's external
network, routers with a gateway and floating IPs become (pure: no system call).

- The external network is Contrail's **public virtual network**: one more VRF in every
  vRouter (``PUBLIC``). A floating IP is a route of that VRF, announced by the host of
  the VM that holds it, with a label of its own; that host's vRouter does the NAT in its
  flow table (DNAT in, SNAT out), as the agent's floating-IP flows (``pkt_flow_info.cc``)
  and the kernel's NAT flow actions (``vr_flow.c``) do.
- The **SDN gateway** between the fabric and the external network is Contrail's simple
  gateway (``vgw``): the vRouter of the host of the routers with a gateway (one host:
  ``gateway_host``) holds the public VRF's way out, the external link as a port of its
  bridge, and announces the public VRF's default route with the gateway's label; the
  external network reaches the public VRF's addresses through it (it answers their ARP),
  and a floating IP's traffic from outside crosses it and goes on by MPLSoGRE to the
  floating IP's host with the floating IP's label.
- **SNAT** without a floating IP is Contrail's SNAT service instance: a namespace on the
  router's host (``si_ifaces``: a left interface in the router's own internal VN
  ``left_vn``, a right one in the public VN with the router's gateway address;
  MASQUERADE out of the right one), whose left VN's default route the control node leaks
  into the router's VNs as a service chain's static route is.
"""

from __future__ import annotations

PUBLIC = "<public>"                  # the public VN's VRF (no testbed vnet can be named so)
DEFAULT = "0.0.0.0/0"
LEFT_DEV, RIGHT_DEV = "left", "right"      # the SNAT namespace's NICs (Contrail: int-, gw-)


def left_vn(router: str) -> str:
    """The SNAT service instance's left VN of ROUTER (Contrail: snat-si-left_<router>)."""
    return f"<snat-left:{router}>"


def snat_routers(tb) -> list:
    """(index, router) of the routers with a gateway and SNAT: each has a service instance."""
    return [(i, r) for i, r in enumerate(tb.routers) if r.gateway is not None and r.snat]


def gateway_host(tb) -> str | None:
    """The host whose vRouter is the SDN gateway: the (one) host of the routers with a
    gateway; None without an external network."""
    hosts = sorted(tb.gateway_hosts())
    if tb.external is None or not hosts:
        return None
    return hosts[0]


def why_not(tb) -> str | None:
    """Why this testbed's north-south cannot be realised on vrouter; None when it can."""
    hosts = sorted(tb.gateway_hosts())
    if len(hosts) > 1:
        return (f"vrouter has one SDN gateway (the simple gateway of one host's vRouter): the "
                f"routers with external_gateway are on {', '.join(hosts)}; put them on one host")
    return None


def vrf_names(tb) -> list[str]:
    """Every VRF an agent holds, in VRF-id order: the vnets', the public VN's, each SNAT
    service instance's left VN."""
    extra = ([PUBLIC] if tb.external is not None else []) + [left_vn(r.name) for _, r in snat_routers(tb)]
    return [v.name for v in tb.vnets] + extra


def cidrs(tb) -> dict:
    """The VRFs beyond the vnets and what their ports' proxy ARP answers: the external
    network's addresses on the public VN; everything on a left VN (the namespace's routes
    to the router's VNs are on-link, as the vRouter answers every ARP with its MAC)."""
    out = {PUBLIC: str(tb.external.cidr)} if tb.external is not None else {}
    out.update({left_vn(r.name): DEFAULT for _, r in snat_routers(tb)})
    return out


def si_ifaces(tb, names) -> list[dict]:
    """The SNAT service instances' interfaces as the agent gets them (a VM interface's
    fields; ``host``: the router's). The left one stands for the default route (its ``ip``
    the prefix the service chain gives it), the right one holds the router's gateway
    address on the public VN."""
    out = []
    for ri, r in snat_routers(tb):
        common = {"vm": r.name, "egress": None, "port_security": False, "groups": [], "host": r.host}
        out.append({**common, "port": names.si_port(ri, "l"), "vnet": left_vn(r.name), "mac": r.ports[0].mac,
                    "ip": DEFAULT, "prefixlen": 0})
        out.append({**common, "port": names.si_port(ri, "r"), "vnet": PUBLIC, "mac": r.gateway_mac,
                    "ip": str(r.gateway), "prefixlen": tb.external.cidr.prefixlen})
    return out


def floating_ips(tb, names) -> list[dict]:
    """Each floating IP as its VM's host's agent gets it: the VM port, its fixed and floating
    addresses."""
    out = []
    for f in tb.floating_ips:
        vm = tb.vm(f.vm)
        k = [n.vnet for n in vm.nics].index(f.vnet)
        out.append({"port": names.vm_port(tb.vms.index(vm), k), "fixed": str(vm.nics[k].ip),
                    "ip": str(f.ip)})
    return out


def gateway(tb, names, host: str) -> dict | None:
    """The SDN gateway's part of HOST's agent config (None on another host): its port on the
    external network, the external hosts as its neighbours (their MACs from the testbed, as
    an operator configures a gateway's next hops: no ARP resolution), the external network's
    gateway (the public VRF's default next hop, when an external host holds it) and the
    public addresses it answers ARP for on the external network (floating IPs, the SNAT
    service instances' right addresses)."""
    if gateway_host(tb) != host:
        return None
    return {"port": names.ext_uplink,
            "neighbours": {str(h.ip): h.mac for h in tb.external_hosts},
            "default": str(tb.external.gateway),
            "answers": sorted({str(f.ip) for f in tb.floating_ips}
                              | {str(r.gateway) for _, r in snat_routers(tb)})}


def announced(tb, host: str) -> list[tuple[str, str]]:
    """(kind, vnet) of each route HOST's agent announces beyond its VMs' and their VNs'
    broadcast routes: its SNAT service instances' interfaces (and their VNs' broadcast
    routes), the floating IPs of its VMs, the SDN gateway's default route."""
    si = [vnet for _, r in snat_routers(tb) if r.host == host for vnet in (left_vn(r.name), PUBLIC)]
    out = [("vm", vnet) for vnet in si]                 # si_ifaces' left and right interfaces
    out += [("bcast", v) for v in sorted(set(si))]
    out += [("vm", PUBLIC) for f in tb.floating_ips if tb.vm(f.vm).host == host]
    if gateway_host(tb) == host:
        out.append(("vm", PUBLIC))
    return out

