"""The testbed loader's routing part: routers, the external network, external hosts and
floating IPs of a document whose VMs are built, with the checks Neutron's L3 API makes,
by field."""

from __future__ import annotations

import ipaddress

from vnetbench.testbed.model import ROUTER, External, ExternalHost, FloatingIp, Router, RouterPort
from vnetbench.testbed.loadcommon import (DEFAULT_EXTERNAL, DEFAULT_EXTERNAL_HOST, mac, one_of,
                                          outside_fix)


class Routing:
    """Routers, the external network, external hosts and floating IPs of a document
    whose VMs are built: defaults and the checks Neutron's L3 API makes, by field."""

    def __init__(self, b, network, hosts, vnets, vms, interfaces):
        self.b, self.doc, self.network, self.hosts = b, b.doc, network, hosts
        self.vnets, self.vms, self.interfaces = vnets, vms, interfaces
        self.raw = self.doc.get("routers") or []

    def build(self) -> dict:
        doc = self.doc
        if not (self.raw or "external" in doc or doc.get("external_hosts") or doc.get("floating_ips")
                or self.b.implicit_fips):
            return {}
        wanted = "external" in doc or bool(doc.get("external_hosts") or doc.get("floating_ips")) \
            or any(r.get("external_gateway") for r in self.raw)
        external = self._external() if wanted else None
        self.pool = _Pool(self.b, external)
        hosts = doc.get("external_hosts")
        if hosts is None:
            hosts = [{"name": DEFAULT_EXTERNAL_HOST}] if external is not None else []
        if hosts and "ip" not in hosts[0]:          # the upstream router, unless it says
            hosts = [dict(hosts[0], ip=str(external.gateway))] + list(hosts[1:])
        elif external is not None:
            self.pool.used.add(external.gateway)    # nobody else takes the gateway's address
        explicit = [(h.get("ip"), f"external_hosts[{i}].ip") for i, h in enumerate(hosts)]
        explicit += [(r.get("gateway_ip"), f"routers[{i}].gateway_ip") for i, r in enumerate(self.raw)
                     if r.get("external_gateway")]
        explicit += [(f.get("ip"), f"floating_ips[{i}].ip") for i, f in enumerate(doc.get("floating_ips") or [])]
        for text, where in explicit:
            if text is not None:
                self.pool.reserve(text, where)
        ext_hosts = self._external_hosts(hosts)
        routers = self._routers()
        return {"routers": routers, "external": external, "external_hosts": ext_hosts,
                "floating_ips": self._floating_ips(routers)}

    def _external(self) -> External:
        raw = self.doc.get("external") or {}
        cidr = self.b._cidr(raw.get("cidr", DEFAULT_EXTERNAL), "external.cidr")
        if cidr.overlaps(self.network.underlay_cidr):
            self.b.fail("external.cidr", f"{cidr} overlaps the underlay network.underlay_cidr "
                        f"{self.network.underlay_cidr}", outside_fix(self.network.underlay_cidr))
        for v in self.vnets:
            if cidr.overlaps(v.cidr):
                self.b.fail("external.cidr", f"{cidr} overlaps vnet {v.name!r} ({v.cidr})",
                            f"give the external network a CIDR of its own, e.g. {DEFAULT_EXTERNAL}")
        gw = _host_address(self.b, raw["gateway"], cidr, "external.gateway") if "gateway" in raw \
            else cidr.network_address + 1
        return External(cidr=cidr, gateway=gw)

    def _external_hosts(self, raw) -> tuple[ExternalHost, ...]:
        first_mac = len(self.vms) + len(self.raw)
        out = []
        for i, h in enumerate(raw):
            self.b._unique("vm", h["name"], f"external_hosts[{i}].name")
            out.append(ExternalHost(h["name"], self.pool.take(h.get("ip"), f"external_hosts[{i}].ip"),
                                    mac(first_mac + i, 0)))
        return tuple(out)

    def _routers(self) -> tuple[Router, ...]:
        out = []
        for ri, r in enumerate(self.raw):
            where, index = f"routers[{ri}]", len(self.vms) + ri
            gw, routing = r.get("external_gateway", False), r.get("routing", ROUTER)
            if gw and routing != ROUTER:
                self.b.fail(f"{where}.external_gateway", f"a router with routing: {routing} routes between "
                            "its VLANs only (seed 000's inter-VLAN testbeds)",
                            "remove external_gateway, or leave routing out (the kind's own router)")
            for field_ in ("gateway_ip", "snat"):
                if field_ in r and not gw:
                    self.b.fail(f"{where}.{field_}", f"{field_} applies to a router with an external gateway",
                                f"add external_gateway: true or remove {field_}")
            ports = tuple(RouterPort(vnet.name, ip, mac(index, k))
                          for k, (vnet, ip) in enumerate(self.interfaces[ri]))
            out.append(Router(
                name=r["name"], host=r.get("host", self.hosts[0].name), ports=ports,
                gateway=self.pool.take(r.get("gateway_ip"), f"{where}.gateway_ip") if gw else None,
                gateway_mac=mac(index, len(ports)) if gw else None, snat=r.get("snat", True) if gw else False,
                routing=routing))
        return tuple(out)

    def _floating_ips(self, routers) -> tuple[FloatingIp, ...]:
        vms, seen, out = {v.name: v for v in self.vms}, {}, []
        declared = [(f"floating_ips[{i}]", f) for i, f in enumerate(self.doc.get("floating_ips") or [])]
        for where, f in declared + self.b.implicit_fips:        # then the floating-ip pairs' own
            vm = vms.get(f["vm"])
            if vm is None:
                self.b.fail(f"{where}.vm", f"VM {f['vm']!r} is not declared", one_of(self.vms))
            vnet = f.get("vnet", vm.nics[0].vnet)
            if vnet not in {n.vnet for n in vm.nics}:
                self.b.fail(f"{where}.vnet", f"VM {vm.name!r} has no NIC on vnet {vnet!r}",
                            "use one of: " + ", ".join(n.vnet for n in vm.nics))
            if (vm.name, vnet) in seen:
                self.b.fail(where, f"VM {vm.name!r} on vnet {vnet!r} already has floating IP "
                            f"{seen[vm.name, vnet]}", "give a NIC one floating IP")
            router = next((r for r in routers if any(p.vnet == vnet for p in r.ports)), None)
            if router is None:
                self.b.fail(f"{where}.vnet", f"vnet {vnet!r} has no router", "add a router with "
                            f"external_gateway: true and an interface on vnet {vnet!r}")
            if router.gateway is None:
                self.b.fail(f"{where}.vnet", f"router {router.name!r} of vnet {vnet!r} has no external gateway",
                            f"set external_gateway: true on router {router.name!r} (Neutron: external "
                            "network not reachable)")
            seen[vm.name, vnet] = ip = self.pool.take(f.get("ip"), f"{where}.ip")
            out.append(FloatingIp(vm=vm.name, vnet=vnet, ip=ip))
        return tuple(out)


class _Pool:
    """The external network's addresses: explicit ones reserved up front, then handed
    out in order from the first host address."""

    def __init__(self, b, external):
        self.b, self.external = b, external
        self.used, self.reserved = set(), set()
        self.free = iter(external.cidr.hosts()) if external is not None else iter(())

    def reserve(self, text, where) -> None:
        ip = _host_address(self.b, text, self.external.cidr, where)
        if ip in self.reserved:
            self.b.fail(where, f"{ip} is already taken on the external network", "give every address once")
        self.reserved.add(ip)

    def take(self, text, where) -> ipaddress.IPv4Address:
        if text is not None:
            ip = ipaddress.IPv4Address(text)
            if ip in self.used:
                self.b.fail(where, f"{ip} is already taken on the external network (its gateway)",
                            "give every address once")
        else:
            skip = self.used | self.reserved
            ip = next((a for a in self.free if a not in skip), None)
            if ip is None:
                self.b.fail("external.cidr", f"{self.external.cidr} has no free address left", "use a larger CIDR")
        self.used.add(ip)
        return ip


def _host_address(b, text, cidr, where) -> ipaddress.IPv4Address:
    ip = ipaddress.IPv4Address(text)
    if ip not in cidr or ip in (cidr.network_address, cidr.broadcast_address):
        b.fail(where, f"{ip} is not a host address of the external network ({cidr})",
               "pick an address inside external.cidr")
    return ip
