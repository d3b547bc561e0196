"""YAML testbed file -> validated, defaulted, planned ``Testbed``.

All user-facing checks live in the loader so that a bad file fails before anything is
built; every error names the file, the field and the fix. Its parts: ``fileschema`` (the
bounded parse and the JSON Schema), this module's builder (vSwitch, network, hosts,
vnets, routers' interfaces), ``loadsg`` (security groups), ``loadvms`` (VMs and pairs),
``loadrouting`` (routers, the external network, floating IPs), ``loadcommon`` (what they
share).
"""

from __future__ import annotations

import ipaddress

from vnetbench import inputs, kinds
from vnetbench.errors import TestbedFileError
from vnetbench.testbed.fileschema import check_schema, parse_yaml, schema, validate
from vnetbench.testbed.loadcommon import (DEFAULT_EXTERNAL, DEFAULT_SEGMENT_BASE, DEFAULT_TENANT,
                                          DEFAULT_UNDERLAY, MAX_DEFAULT_TENANTS, MAX_FILE_BYTES,
                                          one_of, outside_fix, short)
from vnetbench.testbed.loadrouting import Routing
from vnetbench.testbed.loadsg import SecurityGroups
from vnetbench.testbed.loadvms import VmsAndPairs
from vnetbench.testbed.model import (MIN_TENANT_MTU, SEGMENTATION_RANGE, Host, Network, NetType,
                                     Testbed, Vnet, VSwitch, VSwitchKind)

#: what other modules take from here: the published schema, the check every input schema
#: of the suite uses (``fileschema``'s), a file's defaults
__all__ = ["load", "loads", "schema", "check_schema", "DEFAULT_EXTERNAL", "MAX_FILE_BYTES"]


def load(path, online_cpus=None) -> Testbed:
    """Load a testbed file; ``online_cpus`` (default: any) bounds the CPU sets."""
    source = inputs.one_line(str(path), 120)
    try:
        text = inputs.decode(inputs.read_bytes(path, MAX_FILE_BYTES))
    except inputs.InputError as exc:
        raise TestbedFileError(source, exc.where, exc.problem, exc.fix) from None
    return loads(text, source=source, online_cpus=online_cpus)


def loads(text: str, source: str = "<string>", online_cpus=None) -> Testbed:
    doc = parse_yaml(text, source)
    validate(doc, source)
    return _Builder(doc, source, online_cpus).build()


class _Builder(SecurityGroups, VmsAndPairs):
    """Applies defaults and cross-field checks to a schema-valid document."""

    def __init__(self, doc, source, online_cpus):
        self.doc, self.source = doc, source
        self.online = tuple(sorted(online_cpus)) if online_cpus else None
        self.seen = {}           # (kind, name) -> where it was first declared

    def fail(self, where, problem, fix):
        raise TestbedFileError(self.source, where, problem, fix)

    def build(self) -> Testbed:
        vswitch = self._vswitch()
        network = self._network(vswitch.kind)
        hosts = self._hosts(network, vswitch.kind)
        vnets = self._vnets(network)
        groups = self._security_groups()
        interfaces = self._router_interfaces(hosts, vnets)
        vms, pairs = self._vms(hosts, vnets, interfaces)
        if not any(nic.port_security for vm in vms for nic in vm.nics):
            groups = ()                     # nothing filtered: no groups to realise
        l3 = Routing(self, network, hosts, vnets, vms, interfaces).build()
        name = self.doc.get("name") or f"{vswitch.kind.value}-{network.type.value}"
        return Testbed(name=name, vswitch=vswitch, network=network, hosts=hosts,
                       vnets=vnets, vms=vms, pairs=pairs, security_groups=groups,
                       source=self.source, **l3)

    def _router_interfaces(self, hosts, vnets) -> dict:
        """{router index: [(vnet, ip)]}, checked as Neutron's add_router_interface checks:
        declared vnets, one router per vnet, no overlapping subnets on one router, an
        address of the vnet (default: its last host address, the gateway)."""
        by_vnet, owner, out = {v.name: v for v in vnets}, {}, {}
        for ri, r in enumerate(self.doc.get("routers") or []):
            where = f"routers[{ri}]"
            self._unique("vm", r["name"], f"{where}.name")
            host = r.get("host", hosts[0].name)
            if ("host", host) not in self.seen:
                self.fail(f"{where}.host", f"host {host!r} is not declared", one_of(hosts))
            out[ri] = []
            for k, ref in enumerate(r["vnets"]):
                ref = {"name": ref} if isinstance(ref, str) else ref
                at = f"{where}.vnets[{k}]"
                vnet = by_vnet.get(ref["name"])
                if vnet is None:
                    self.fail(at, f"vnet {ref['name']!r} is not declared", one_of(vnets))
                if vnet.name in owner:
                    self.fail(at, f"vnet {vnet.name!r} already has an interface on {owner[vnet.name]}",
                              "give each vnet one router (its VMs' default route)")
                for other, _ in out[ri]:
                    if other.cidr.overlaps(vnet.cidr):
                        self.fail(at, f"{vnet.cidr} of vnet {vnet.name!r} overlaps {other.cidr} of vnet "
                                  f"{other.name!r}, also on this router", "route vnets with distinct CIDRs "
                                  "(Neutron refuses overlapping subnets on one router)")
                ip = ipaddress.IPv4Address(ref["ip"]) if "ip" in ref else vnet.cidr.broadcast_address - 1
                if ip not in vnet.cidr or ip in (vnet.cidr.network_address, vnet.cidr.broadcast_address):
                    self.fail(f"{at}.ip", f"{ip} is not a host address of vnet {vnet.name!r} ({vnet.cidr})",
                              "pick an address inside the vnet's CIDR")
                owner[vnet.name] = f"{where} ({r['name']})"
                out[ri].append((vnet, ip))
        return out

    def _vswitch(self) -> VSwitch:
        raw = self.doc["vswitch"]
        if isinstance(raw, str):
            raw = {"kind": raw}
        kind = VSwitchKind(raw["kind"])
        datapath = raw.get("datapath", "auto")
        if datapath != "auto" and not kinds.get(kind).uses_ovs:
            self.fail("vswitch.datapath", f"{kind} has no datapath choice",
                      "remove 'datapath' or use an OVS kind")
        ports = raw.get("ports", "auto")
        if ports != "auto" and not kinds.get(kind).uses_ovs:
            self.fail("vswitch.ports", f"{kind} has no OVS ports", "remove 'ports' or use an OVS kind")
        if ports != "auto" and datapath == "system":
            self.fail("vswitch.ports", f"'{ports}' ports are for OVS's userspace datapath",
                      "remove 'ports' or set 'datapath: netdev'")
        return VSwitch(kind=kind, datapath=datapath, ports=ports, options=self._options(raw, kind))

    def _options(self, raw: dict, kind):
        """The kind's options object (defaults when absent); another kind's options key
        under this kind is an error."""
        for other in kinds.all_kinds():
            if other.options_key in raw and other.name != kind.value:
                field = other.options_key
                self.fail(f"vswitch.{field}", f"{field} options apply to {other.name}, not {kind}",
                          f"remove '{field}' or use kind {other.name}")
        own = kinds.get(kind)
        return own.options(**(raw.get(own.options_key) or {})) if own.options else None

    def _network(self, kind) -> Network:
        raw = self.doc["network"]
        ntype = NetType(raw["type"])
        underlay_mtu = raw.get("underlay_mtu", 1500)
        overhead = kinds.encap_overhead(kind, ntype)
        room = underlay_mtu - overhead
        if room < MIN_TENANT_MTU:
            self.fail("network.underlay_mtu",
                      f"{underlay_mtu} leaves {room} bytes for {ntype} tenant packets "
                      f"({overhead} bytes of encapsulation), below {MIN_TENANT_MTU}",
                      f"raise underlay_mtu to at least {MIN_TENANT_MTU + overhead}")
        tenant_mtu = raw.get("tenant_mtu", room)
        if tenant_mtu > room:
            self.fail("network.tenant_mtu",
                      f"{tenant_mtu} does not fit in underlay_mtu {underlay_mtu} "
                      f"with {overhead} bytes of {ntype} encapsulation",
                      f"use tenant_mtu <= {room} or raise underlay_mtu to "
                      f">= {tenant_mtu + overhead}")
        cidr = self._cidr(raw.get("underlay_cidr", DEFAULT_UNDERLAY), "network.underlay_cidr")
        return Network(type=ntype, underlay_mtu=underlay_mtu, tenant_mtu=tenant_mtu,
                       underlay_cidr=cidr)

    def _cidr(self, text, where):
        try:
            net = ipaddress.IPv4Network(text, strict=True)
        except ValueError as exc:
            try:
                loose = ipaddress.IPv4Network(text, strict=False)
                longer = ipaddress.IPv4Network(text.split("/")[0] + "/24", strict=False)
                fix = f"write {loose}" if loose.prefixlen >= 8 else f"use a longer prefix, e.g. {longer}"
            except ValueError:
                fix = "write it as a.b.c.d/len with octets 0..255, e.g. 198.19.1.0/24"
            self.fail(where, f"{short(text)} is not a valid network ({inputs.one_line(str(exc), 80)})", fix)
        if net.prefixlen > 30:
            self.fail(where, f"{text} is too small", "use a prefix of /30 or shorter")
        return net

    def _cpus(self, cpus, where):
        if self.online is not None:
            missing = sorted(set(cpus) - set(self.online))
            if missing:
                shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
                self.fail(where, f"CPU {shown} is not online on this machine "
                          f"(online: {', '.join(map(str, self.online))})",
                          "pick CPUs from the online set")
        return tuple(cpus)

    def _hosts(self, network, kind) -> tuple[Host, ...]:
        raw = self.doc.get("hosts") or [{"name": "h1"}, {"name": "h2"}]
        light = self._chassis(kind)
        spread = self.online or (0, 1)
        cidr = network.underlay_cidr
        room = cidr.num_addresses - 2            # arithmetic: never enumerate a range
        if len(raw) + len(light) > room:
            self.fail("network.underlay_cidr", f"{cidr} has room for {room} hosts, "
                      f"{len(raw) + len(light)} are declared", "use a larger underlay_cidr")
        hosts = []
        for i, h in enumerate(raw + light):
            where = f"hosts[{i}]" if i < len(raw) else "chassis"
            self._unique("host", h["name"], f"{where}.name" if i < len(raw) else where)
            cpus = self._cpus(h.get("cpus", [spread[i % len(spread)]]), f"{where}.cpus")
            hosts.append(Host(name=h["name"], cpus=cpus, underlay_ip=cidr.network_address + 1 + i,
                              light=i >= len(raw)))
        return tuple(hosts)

    def _chassis(self, kind) -> list[dict]:
        """The ``chassis:`` block as host entries ch1 ... chN, for a kind that takes them
        (``Kind.light_chassis``: OVN, whose chassis are what ovn-controller registers)."""
        block = self.doc.get("chassis")
        if block is None:
            return []
        if not kinds.get(kind).light_chassis:
            takers = ", ".join(k.name for k in kinds.all_kinds() if k.light_chassis)
            self.fail("chassis", f"light chassis are not {kind.value}'s (only {takers} takes them)",
                      "use vswitch: ovn, or declare hosts instead")
        cpus = block.get("cpus", list(self.online or (0, 1)))
        return [{"name": f"ch{i}", "cpus": cpus} for i in range(1, block["count"] + 1)]

    def _unique(self, kind, name, where):
        first = self.seen.setdefault((kind, name), where)
        if first != where:
            self.fail(where, f"duplicate name {name!r} (also {first})",
                      "give every object of this kind its own name")

    def _vnets(self, network) -> tuple[Vnet, ...]:
        raw = self.doc.get("vnets") or [{"name": "vnet1"}]
        ntype, vnets, used = network.type, [], {}
        explicit = {v["segmentation_id"] for v in raw if "segmentation_id" in v}
        for i, v in enumerate(raw):
            where = f"vnets[{i}]"
            self._unique("vnet", v["name"], f"{where}.name")
            if "cidr" not in v and i >= MAX_DEFAULT_TENANTS:
                self.fail(where, f"has no cidr and the default 198.19.<n>.0/24 covers only the "
                          f"first {MAX_DEFAULT_TENANTS} vnets", f"give {where}.cidr (vnets may share a CIDR)")
            cidr = self._cidr(v.get("cidr", DEFAULT_TENANT.format(i + 1)), f"{where}.cidr")
            if cidr.overlaps(network.underlay_cidr):
                self.fail(f"{where}.cidr", f"{cidr} overlaps the underlay network.underlay_cidr "
                          f"{network.underlay_cidr}", outside_fix(network.underlay_cidr))
            segid = self._segid(v, i, ntype, used, explicit)
            vnets.append(Vnet(name=v["name"], cidr=cidr, segmentation_id=segid))
        return tuple(vnets)

    def _segid(self, v, i, ntype, used, explicit):
        """Explicit id, else base + index, skipping ids other vnets claim explicitly."""
        where = f"vnets[{i}].segmentation_id"
        if ntype is NetType.FLAT:
            if "segmentation_id" in v:
                self.fail(where, "flat networks carry no segmentation id",
                          "remove it (each flat vnet gets its own physical network)")
            return None
        segid = v.get("segmentation_id")
        if segid is None:
            segid = DEFAULT_SEGMENT_BASE[ntype] + i + 1
            while segid in explicit or segid in used:
                segid += 1
        lo, hi = SEGMENTATION_RANGE[ntype]
        if not lo <= segid <= hi:
            self.fail(where, f"{segid} is outside the {ntype} range {lo}..{hi}",
                      f"use a value in {lo}..{hi}")
        if segid in used:
            self.fail(where, f"{segid} is already used by vnet {used[segid]!r}",
                      "give every vnet its own segmentation id")
        used[segid] = v["name"]
        return segid


