"""OVN logical routers, the way Neutron's OVN driver writes them into the NB database
(``neutron/plugins/ml2/drivers/ovn/mech_driver/ovsdb/ovn_client.py``, Zed:
``create_router``, ``_create_lrouter_port``, ``_add_router_ext_gw``, ``update_nat_rules``,
``_create_or_update_floatingip``).

- a router is a ``Logical_Router``; an interface, a ``Logical_Router_Port`` with the
  interface's MAC and address, and on the vnet's switch a port of type ``router``
  (addresses ``router``, ``options:router-port``): routing is distributed, every chassis
  routes in its own pipeline (no namespace, no network node for east-west);
- the external network is a logical switch with a ``localnet`` port on physical network
  ``extnet``, mapped to a provider bridge on the gateway hosts (``ovn-bridge-mappings``);
- a gateway is a router port on it scheduled to a gateway chassis
  (``lrp-set-gateway-chassis``: the router's host, priority 1) -- SNAT and floating IPs
  are centralized there, as Neutron does unless ``enable_distributed_floating_ip`` --, a
  default route to the external gateway, one ``snat`` NAT per routed subnet when SNAT is
  on and one ``dnat_and_snat`` per floating IP.
"""

from __future__ import annotations

EXT_SWITCH = "ext_net"       # never a vnet's name: vnet names have no underscore
EXT_PHYSNET = "extnet"


def router_port(router: str, vnet: str) -> str:
    """The Logical_Router_Port of ROUTER on VNET (Neutron: lrp-<port id>)."""
    return f"lrp-{router}-{vnet}"


def switch_port(router: str, vnet: str) -> str:
    """Its peer on the vnet's logical switch, type router (Neutron: the port's id)."""
    return f"rp-{router}-{vnet}"


def chassis(run_id: str, host: str) -> str:
    """A host's chassis name: its OVS's system-id (``OvsHost._open_vswitch``)."""
    return f"{run_id}-{host}"


def transaction(tb, run_id: str) -> list[str]:
    """ovn-nbctl arguments (one transaction) for every router of TB and the external
    network's switch."""
    own = f"external_ids:vnetbench-run={run_id}"
    tx = []
    if tb.external is not None:
        ln = f"ln-{EXT_SWITCH}"
        tx += ["--", "ls-add", EXT_SWITCH, "--", "set", "Logical_Switch", EXT_SWITCH, own,
               "--", "lsp-add", EXT_SWITCH, ln, "--", "lsp-set-type", ln, "localnet",
               "--", "lsp-set-addresses", ln, "unknown",
               "--", "lsp-set-options", ln, f"network_name={EXT_PHYSNET}",
               "--", "set", "Logical_Switch_Port", ln, own]
    for r in tb.routers:
        tx += ["--", "lr-add", r.name, "--", "set", "Logical_Router", r.name, own]
        for p in r.ports:
            tx += _interface(r.name, p.vnet, p.mac, f"{p.ip}/{tb.vnet(p.vnet).cidr.prefixlen}", own)
        if r.gateway is None:
            continue
        gw = router_port(r.name, EXT_SWITCH)
        tx += _interface(r.name, EXT_SWITCH, r.gateway_mac, f"{r.gateway}/{tb.external.cidr.prefixlen}", own,
                         "nat-addresses=router")     # the gateway chassis announces the NAT addresses
        tx += ["--", "lrp-set-gateway-chassis", gw, chassis(run_id, r.host), "1",
               "--", "lr-route-add", r.name, "0.0.0.0/0", str(tb.external.gateway)]
        if r.snat:
            for p in r.ports:
                tx += ["--", "lr-nat-add", r.name, "snat", str(r.gateway), str(tb.vnet(p.vnet).cidr)]
        for f in tb.floating_ips_of(r):
            tx += ["--", "lr-nat-add", r.name, "dnat_and_snat", str(f.ip), str(tb.vm(f.vm).nic(f.vnet).ip)]
    return tx[1:]


def _interface(router: str, switch: str, mac: str, cidr: str, own: str, *options) -> list[str]:
    lrp, lsp = router_port(router, switch), switch_port(router, switch)
    return ["--", "lrp-add", router, lrp, mac, cidr,
            "--", "set", "Logical_Router_Port", lrp, own,
            "--", "lsp-add", switch, lsp, "--", "lsp-set-type", lsp, "router",
            "--", "lsp-set-addresses", lsp, "router",
            "--", "lsp-set-options", lsp, f"router-port={lrp}", *options,
            "--", "set", "Logical_Switch_Port", lsp, own]


def remove_interface(router: str, vnet: str) -> list[str]:
    """Neutron's remove_router_interface: the router port and its switch peer go."""
    return ["lrp-del", router_port(router, vnet), "--", "lsp-del", switch_port(router, vnet)]
