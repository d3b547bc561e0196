"""The testbed loader's VMs and pairs: declared VMs, the pairs (two VMs of their own, a
seed's declared VMs, or a VM and an external host north-south), each VM's host, CPUs and
NICs with their addresses, MACs, QoS and port security. A part of the loader's builder
(``loader._Builder``): it uses the builder's document, ``fail``, ``_unique``, ``_cpus``,
``seen`` and ``_port_security``."""

from __future__ import annotations

from vnetbench.testbed.model import (CROSS_HOST, EAST_WEST, FLOATING_IP, L2, NORTH_SOUTH,
                                     SAME_HOST, Nic, Pair, Vm)
from vnetbench.testbed.loadcommon import DEFAULT_EXTERNAL_HOST, IpAllocator, mac, one_of, qos, short


class VmsAndPairs:
    def _vms(self, hosts, vnets, interfaces=None):
        self.interfaces = interfaces or {}
        self.implicit_fips = []         # (where, floating_ips entry) of floating-ip pairs
        raw_vms = list(self.doc.get("vms") or [])
        raw_pairs = self.doc.get("pairs")
        if raw_pairs is None and not raw_vms:
            raw_pairs = [{"placement": SAME_HOST}, {"placement": CROSS_HOST}]
        specs, pairs = [], []
        for i, vm in enumerate(raw_vms):
            specs.append((f"vms[{i}]", vm))
        for i, p in enumerate(raw_pairs or []):
            pair, expanded = self._pair(p, i, hosts, vnets)
            self._unique("pair", pair.name, f"pairs[{i}].name")
            pairs.append(pair)
            specs.extend(expanded)
        alloc = IpAllocator(vnets, [spec for _, spec in specs])
        for ri, ports in (interfaces or {}).items():   # a router's address is taken first
            for vnet, ip in ports:
                alloc.used[vnet.name].add(ip)
                alloc.owner[vnet.name, ip] = f"the interface of router {self.doc['routers'][ri]['name']!r}"
        by_host, by_vnet = {h.name: h for h in hosts}, {v.name: v for v in vnets}
        vms = []
        for where, spec in specs:
            self._unique("vm", spec["name"], f"{where}.name")
            vms.append(self._vm(spec, where, len(vms), by_host, by_vnet, alloc))
        return tuple(vms), tuple(pairs)

    def _pair(self, p, i, hosts, vnets):
        where = f"pairs[{i}]"
        placement = p["placement"]
        name = p.get("name") or ("same" if placement == SAME_HOST else "cross") + \
            {EAST_WEST: "-ew", NORTH_SOUTH: "-ns", FLOATING_IP: "-fip"}.get(p.get("path"), "")
        if p.get("path") in (NORTH_SOUTH, FLOATING_IP):
            return self._north_south(p, i, name, placement, hosts, vnets)
        if "vms" in p:
            return self._declared_pair(p, where, name, placement), []
        want = 1 if placement == SAME_HOST else 2
        names = p.get("hosts") or [h.name for h in hosts[:want]]
        if placement == CROSS_HOST and (len(names) != 2 or names[0] == names[1]):
            self.fail(f"{where}.hosts", f"cross-host placement needs two different hosts, got {names}",
                      "declare a second host or use placement same-host")
        if placement == SAME_HOST and len(names) != 1:
            self.fail(f"{where}.hosts", "same-host placement takes one host", "list one host")
        for name_ in names:
            if ("host", name_) not in self.seen:
                self.fail(f"{where}.hosts", f"host {name_!r} is not declared", one_of(hosts))
        pair_hosts = names * 2 if placement == SAME_HOST else names
        vnet = p.get("vnet", vnets[0].name)
        if ("vnet", vnet) not in self.seen:
            self.fail(f"{where}.vnet", f"vnet {vnet!r} is not declared", one_of(vnets))
        path = p.get("path", L2)
        peer = self._peer_vnet(p, where, vnet, vnets) if path == EAST_WEST else None
        if peer is None and "peer_vnet" in p:
            self.fail(f"{where}.peer_vnet", "peer_vnet applies to path l3-east-west",
                      "add path: l3-east-west or remove peer_vnet")
        vms = [(f"{where} (VM {name}-{s})", {"name": f"{name}-{s}", "host": h, "vnets": [v]})
               for s, h, v in zip("ab", pair_hosts, (vnet, peer or vnet))]
        return Pair(name=name, placement=placement, vnet=vnet,
                    vms=(f"{name}-a", f"{name}-b"), path=path, peer_vnet=peer), vms

    def _declared_pair(self, p, where, name, placement) -> Pair:
        """A pair of VMs declared in ``vms`` (a seed's own machines, e.g. seed 000's PCs):
        the first one's NIC on ``vnet`` (default: its first), the second on that vnet (l2)
        or on another vnet of the same router (l3-east-west); the placement their hosts'."""
        raw = {v.get("name"): v for v in self.doc.get("vms") or []}
        for field_ in ("hosts", "peer_vnet"):
            if field_ in p:
                self.fail(f"{where}.{field_}", f"{field_} is taken from the declared VMs of vms",
                          f"remove {field_} (or vms, to have the pair's VMs made)")
        for vm in p["vms"]:
            if vm not in raw:
                self.fail(f"{where}.vms", f"VM {vm!r} is not declared in vms",
                          "name two VMs of vms: " + ", ".join(map(repr, raw)) if raw else "declare them in vms")
        a, b = (raw[vm] for vm in p["vms"])
        if a is b:
            self.fail(f"{where}.vms", f"a pair of VM {a['name']!r} with itself", "name two different VMs")
        nets = lambda vm: [r if isinstance(r, str) else r["name"] for r in vm.get("vnets") or []]  # noqa: E731
        vnet = p.get("vnet") or (nets(a) or [None])[0]
        if vnet not in nets(a):
            self.fail(f"{where}.vnet", f"VM {a['name']!r} has no NIC on vnet {vnet!r}",
                      "give the vnet of one of its NICs")
        path, peer = (L2, None) if vnet in nets(b) else (EAST_WEST, self._routed_peer(where, vnet, b, nets(b)))
        if p.get("path", path) != path:
            self.fail(f"{where}.path", f"VMs {a['name']!r} and {b['name']!r} meet on path {path}, not "
                      f"{p['path']}", f"write path: {path} or leave it out")
        got = SAME_HOST if a.get("host") == b.get("host") else CROSS_HOST
        if got != placement:
            self.fail(f"{where}.placement", f"VMs {a['name']!r} and {b['name']!r} are {got}, not "
                      f"{placement}", f"write placement: {got}")
        return Pair(name=name, placement=placement, vnet=vnet, vms=tuple(p["vms"]), path=path, peer_vnet=peer)

    def _routed_peer(self, where, vnet, b, b_nets) -> str:
        """The second declared VM's vnet that the first's router also routes."""
        on = self._router_index()
        peer = next((v for v in b_nets if vnet in on and on.get(v) == on[vnet]), None)
        if peer is None:
            self.fail(f"{where}.vms", f"VM {b['name']!r} is neither on vnet {vnet!r} nor on another vnet "
                      "of its router", "pair VMs of one vnet, or of two vnets of one router")
        return peer

    def _router_index(self) -> dict:
        """{vnet name: index of the router with an interface on it}."""
        return {v.name: ri for ri, ports in self.interfaces.items() for v, _ in ports}

    def _north_south(self, p, i, name, placement, hosts, vnets):
        """A VM on the pair's vnet and the first external host, through the router of the
        vnet, which needs an external gateway; the VM on that router's host (same-host) or
        on the next host (cross-host). North-south: the VM sends, out through SNAT;
        floating-ip: the external host sends, to the floating IP the VM gets here."""
        where = f"pairs[{i}]"
        for field_, paths in (("peer_vnet", "path l3-east-west"), ("vms", "paths l2 and l3-east-west")):
            if field_ in p:
                self.fail(f"{where}.{field_}", f"{field_} applies to {paths}",
                          f"remove {field_} (north-south pairs a VM of its own with the first external host)")
        vnet = p.get("vnet", vnets[0].name)
        if ("vnet", vnet) not in self.seen:
            self.fail(f"{where}.vnet", f"vnet {vnet!r} is not declared", one_of(vnets))
        on = self._router_index()
        router = self.doc["routers"][on[vnet]] if vnet in on else None
        if router is None or not router.get("external_gateway"):
            self.fail(f"{where}.path", f"vnet {vnet!r} has no router with an external gateway",
                      f"declare a router with external_gateway: true and an interface on {vnet!r}")
        gw_host = router.get("host", hosts[0].name)
        others = [h.name for h in hosts if h.name != gw_host]
        if p.get("hosts"):
            (host,) = p["hosts"][:1]
            if ("host", host) not in self.seen:
                self.fail(f"{where}.hosts", f"host {host!r} is not declared", one_of(hosts))
        elif placement == SAME_HOST:
            host = gw_host
        elif others:
            host = others[0]
        else:
            self.fail(f"{where}.placement", f"cross-host north-south needs a host other than the router's "
                      f"({gw_host})", "declare a second host or use placement same-host")
        outside = (self.doc.get("external_hosts") or [{"name": DEFAULT_EXTERNAL_HOST}])[0]["name"]
        vm = (f"{where} (VM {name}-a)", {"name": f"{name}-a", "host": host, "vnets": [vnet]})
        if p["path"] == FLOATING_IP:     # the VM gets a floating IP of its own; outside sends
            self.implicit_fips.append((f"{where} (the floating IP of VM {name}-a)",
                                       {"vm": f"{name}-a", "vnet": vnet}))
            return Pair(name=name, placement=placement, vnet=vnet, vms=(outside, f"{name}-a"),
                        path=FLOATING_IP), [vm]
        return Pair(name=name, placement=placement, vnet=vnet, vms=(f"{name}-a", outside),
                    path=NORTH_SOUTH), [vm]

    def _peer_vnet(self, p, where, vnet, vnets) -> str:
        """The routed pair's second vnet: declared, on the same router as ``vnet``."""
        on = self._router_index()
        if vnet not in on:
            self.fail(f"{where}.path", f"vnet {vnet!r} has no router",
                      f"declare a router with interfaces on {vnet!r} and another vnet")
        ri = on[vnet]
        peer = p.get("peer_vnet") or next((v for v, r in on.items() if r == ri and v != vnet), None)
        if peer is None:
            self.fail(f"{where}.path", f"the router of vnet {vnet!r} has no other vnet",
                      "give the router a second vnet")
        if ("vnet", peer) not in self.seen:
            self.fail(f"{where}.peer_vnet", f"vnet {peer!r} is not declared", one_of(vnets))
        if on.get(peer) != ri:
            self.fail(f"{where}.peer_vnet", f"vnet {peer!r} is not on the router of vnet {vnet!r}",
                      "route both vnets through one router")
        return peer

    def _vm(self, spec, where, index, hosts, vnets, alloc) -> Vm:
        host = hosts.get(spec["host"])
        if host is None:
            self.fail(f"{where}.host", f"host {spec['host']!r} is not declared", one_of(hosts.values()))
        if host.light:
            self.fail(f"{where}.host", f"host {host.name!r} is a light chassis: it holds no VM",
                      "place the VM on a declared host")
        cpus = self._cpus(spec.get("cpus", host.cpus), f"{where}.cpus")
        if not set(cpus) <= set(host.cpus):
            self.fail(f"{where}.cpus", f"CPUs {short(list(cpus))} are not all in the CPU set "
                      f"{list(host.cpus)} of host {host.name!r}", "pin the VM to CPUs of its host")
        nics = []
        for n, ref in enumerate(spec.get("vnets") or [next(iter(vnets))]):
            ref = {"name": ref} if isinstance(ref, str) else ref
            vnet = vnets.get(ref["name"])
            if vnet is None:
                self.fail(f"{where}.vnets[{n}]", f"vnet {ref['name']!r} is not declared",
                          one_of(vnets.values()))
            ip = alloc.take(vnet, ref.get("ip"), lambda p, f: self.fail(f"{where}.vnets[{n}].ip", p, f))
            secured, groups = self._port_security(ref, f"{where}.vnets[{n}]")
            nics.append(Nic(vnet=vnet.name, ip=ip, mac=mac(index, n), qos=qos(ref.get("qos")),
                            port_security=secured, security_groups=groups))
        return Vm(name=spec["name"], host=host.name, cpus=cpus, nics=tuple(nics))
