"""Routers the way Neutron's legacy L3 agent makes them, for kinds whose ``routers`` is
"l3-agent" (linuxbridge, ovs) or "external" (ovs-openflow: the same router, outside a
vSwitch that has no L3); ``NetnsDriver.routers`` calls it by default.

A router is a namespace on its host (``qrouter-<id>`` on Neutron's network node) whose
interface NICs the builder made and the kind plugged like a VM's (``Testbed.attached``;
Neutron's interface driver plugs a ``qr-`` port as a VM's tap). Here it gets:

- IP forwarding;
- with an external gateway, a ``qg`` NIC on the host's external bridge (Neutron's
  ``br-ex``; a Linux bridge here), the router's gateway address and each floating IP as
  a /32 on it (the agent adds them so the router answers ARP for them), a default route
  to the external network's gateway;
- the NAT Neutron's agent writes, written by Neutron's own code (``l3_nat.py``:
  ``RouterInfo`` and ``IptablesManager`` of python3-neutron) in the router's namespace:
  SNAT for its vnets, DNAT/SNAT per floating IP.

Everything lives in the run's namespaces (journaled at creation): deleting them removes
it, NAT rules included.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from vnetbench.errors import BuildError
from vnetbench.kinds.neutron import sg as neutron_sg
from vnetbench.linux import links, nsops, proc
from vnetbench.testbed.model import EXTERNAL_MTU, SVI

NAT_SCRIPT = Path(__file__).with_name("l3_nat.py")
GATEWAY_DEV = "qg"            # the router's external NIC (Neutron's qg-<port>)


def namespace_routers(ctx) -> None:
    """Each gateway host's external bridge (a Linux bridge holding its external link),
    then each router's namespace: what a kind whose ``routers`` is "l3-agent" or
    "external" builds (``NetnsDriver.routers``)."""
    tb, n = ctx.testbed, ctx.names
    for host in tb.gateway_hosts():
        with nsops.rtnl(n.host_ns(host)) as ns:
            links.bridge(ns, n.ext_bridge, EXTERNAL_MTU, n.alias("external bridge (br-ex)"))
            links.up(ns, n.ext_uplink, master=n.ext_bridge)
    for ri, router in enumerate(tb.routers):
        if router.routing == SVI:
            ctx.driver.svi(ctx, ri, router)
        else:               # the kind's router or a router on a stick: a namespace
            _router(ctx, ri, router)


def svi(ctx, router, devices) -> None:
    """Seed 000's L3 switch: ROUTER's addresses (and MACs) on the vSwitch host's own
    interfaces DEVICES, one per interface in order (the kind's: a Linux bridge per vnet, an
    OVS internal port per tag), and IP forwarding in that host: its kernel routes between
    its VLANs, as the seed's OVS and LiSA switches do (Figures 4 and 5)."""
    tb, hns = ctx.testbed, ctx.names.host_ns(router.host)
    nsops.sysctl(hns, "net/ipv4/ip_forward", "1")
    with nsops.rtnl(hns) as ns:
        for port, dev in zip(router.ports, devices, strict=True):
            ns.link("set", index=links.index(ns, dev), address=port.mac)
            links.stamp(ns, dev, ctx.names.alias(f"router={router.name} svi vnet={port.vnet}"))
            links.address(ns, dev, port.ip, tb.vnet(port.vnet).cidr.prefixlen)
            links.up(ns, dev)


def _router(ctx, ri: int, router) -> None:
    tb, n = ctx.testbed, ctx.names
    rns = n.vm_ns(router.name)
    nsops.sysctl(rns, "net/ipv4/ip_forward", "1")
    if router.gateway is None:
        return
    ext = tb.external
    port = n.router_gw_port(ri)
    with nsops.rtnl(n.host_ns(router.host)) as host:
        links.veth(host, port, GATEWAY_DEV, rns, EXTERNAL_MTU, n.alias(f"router={router.name} gateway"))
        links.up(host, port, master=n.ext_bridge)
    fips = tb.floating_ips_of(router)
    with nsops.rtnl(rns) as ns:
        idx = links.index(ns, GATEWAY_DEV)
        ns.link("set", index=idx, address=router.gateway_mac)
        links.stamp(ns, GATEWAY_DEV, n.alias(f"router={router.name} gateway"))
        links.address(ns, GATEWAY_DEV, router.gateway, ext.cidr.prefixlen)
        for f in fips:
            links.address(ns, GATEWAY_DEV, f.ip, 32)
        links.up(ns, GATEWAY_DEV)
        ns.route("add", dst="0.0.0.0/0", gateway=str(ext.gateway), oif=idx)
    apply_nat(rns, router, fips, tb)


def nat_spec(router, fips, tb) -> dict:
    """What Neutron's agent knows of the router when it writes its NAT (the script's input)."""
    return {"device": GATEWAY_DEV, "gateway": str(router.gateway), "snat": router.snat,
            "floating_ips": [[str(tb.vm(f.vm).nic(f.vnet).ip), str(f.ip)] for f in fips]}


def apply_nat(rns: str, router, fips, tb) -> str:
    """Neutron's own NAT for ROUTER in namespace RNS; the rules as iptables-save prints them."""
    argv = proc.in_netns(rns, [neutron_sg.SYSTEM_PYTHON, "-I", str(NAT_SCRIPT)])
    done = subprocess.run(argv, input=json.dumps(nat_spec(router, fips, tb)), capture_output=True,
                          text=True, timeout=60)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"router {router.name!r}: Neutron's L3 NAT (l3_nat.py with "
                         f"{neutron_sg.SYSTEM_PYTHON}) failed: {tail}; is python3-neutron installed "
                         "(make install)?")
    return done.stdout


def remove_interface(driver, dep, router, vnet: str) -> None:
    """Neutron's remove_router_interface on the legacy agent: the router's port on VNET
    leaves the vSwitch (the kind unplugs it, as the agent's interface driver does), then
    its device goes, and with it the router's address and route there."""
    tb, n = dep.testbed, dep.names
    k = [p.vnet for p in router.ports].index(vnet)
    port = n.vm_port([v.name for v in tb.attached].index(router.name), k)
    driver.unplug(dep, tb.host(router.host), port)
    with nsops.rtnl(n.vm_ns(router.name)) as ns:
        ns.link("del", index=links.index(ns, n.vm_nic(k)))
