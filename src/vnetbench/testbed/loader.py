"""YAML testbed file -> validated, defaulted, planned ``Testbed``.

All user-facing checks live here so that a bad file fails before anything is
built; every error names the file, the field and the fix.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import math
from importlib import resources

import jsonschema

from vnetbench import inputs, kinds
from vnetbench.errors import TestbedFileError
from vnetbench.testbed.model import (
    CROSS_HOST, DEFAULT_SG, EAST_WEST, FLOATING_IP, L2, MIN_TENANT_MTU, NORTH_SOUTH, SAME_HOST,
    SEGMENTATION_RANGE,
    ROUTER, External, ExternalHost, FloatingIp, Host, Network, NetType, Nic, Pair, Qos, Router, RouterPort,
    SecurityGroup, SgRule, Testbed, Vm, Vnet, VSwitch, VSwitchKind,
)

DEFAULT_UNDERLAY = "198.18.0.0/24"
DEFAULT_TENANT = "198.19.{}.0/24"          # vnet i (1-based) -> 198.19.i.0/24
DEFAULT_EXTERNAL = "198.18.128.0/24"       # the external network's default (inside 198.18.0.0/15)
DEFAULT_EXTERNAL_HOST = "outside"
MAX_DEFAULT_TENANTS = 255
MAX_FILE_BYTES = 128 * 1024                # parsed in pure Python with a depth limit
DEFAULT_SEGMENT_BASE = {NetType.VLAN: 100, NetType.VXLAN: 1000,
                        NetType.GENEVE: 1000, NetType.GRE: 1000}


def schema() -> dict:
    """The published JSON Schema of testbed files: the generic one packaged here, with
    the registered kinds and each kind's options schema (``Kind.options_schema``) put in,
    so adding a kind changes no schema by hand (``make schema`` writes the published copy)."""
    text = resources.files("vnetbench").joinpath("schemas/testbed.schema.json").read_text()
    doc = json.loads(text)
    doc["$defs"]["vswitchKind"] = {"enum": list(kinds.names())}
    props = doc["properties"]["vswitch"]["oneOf"][1]["properties"]
    for kind in kinds.all_kinds():
        if kind.options_key:
            doc["$defs"][kind.options_key] = kind.options_schema
            props[kind.options_key] = {"$ref": f"#/$defs/{kind.options_key}"}
    return doc


def load(path, online_cpus=None) -> Testbed:
    """Load a testbed file; ``online_cpus`` (default: any) bounds the CPU sets."""
    source = inputs.one_line(str(path), 120)
    try:
        text = inputs.decode(inputs.read_bytes(path, MAX_FILE_BYTES))
    except inputs.InputError as exc:
        raise TestbedFileError(source, exc.where, exc.problem, exc.fix) from None
    return loads(text, source=source, online_cpus=online_cpus)


def loads(text: str, source: str = "<string>", online_cpus=None) -> Testbed:
    doc = _parse_yaml(text, source)
    _validate(doc, source)
    return _Builder(doc, source, online_cpus).build()


def _parse_yaml(text, source):
    if len(text) > MAX_FILE_BYTES:
        raise TestbedFileError(source, "", f"is larger than {MAX_FILE_BYTES // 1024} KiB",
                               "split or shorten it")
    try:
        doc = inputs.parse_yaml(text)
        inputs.check_tree(doc)
    except inputs.InputError as exc:
        raise TestbedFileError(source, exc.where, exc.problem, exc.fix) from None
    if doc is None:
        raise TestbedFileError(source, "", "file is empty",
                               "declare at least 'vswitch' and 'network: {type: ...}'")
    return doc


def _is_integer(checker, instance) -> bool:
    """JSON Schema's "integer" admits 1.0; a CPU number or an MTU must be a real int."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance) -> bool:
    """A finite number: NaN and infinity compare false with every bound, so a schema's
    ``minimum``/``maximum`` would let them through."""
    return (isinstance(instance, (int, float)) and not isinstance(instance, bool)
            and (isinstance(instance, int) or math.isfinite(instance)))


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}))


def _validate(doc, source):
    check_schema(doc, schema(), source)


def check_schema(doc, schema_doc: dict, source: str, published: str = "schemas/testbed.schema.json"):
    """One TestbedFileError naming the field and the fix for the best of the first errors
    of ``doc`` against ``schema_doc`` (any of the suite's published input schemas)."""
    validator = _Validator(schema_doc, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    # the first errors suffice to pick the best one; all of 5,000 bad items take seconds
    error = jsonschema.exceptions.best_match(itertools.islice(validator.iter_errors(doc), 100))
    if error is not None:
        raise TestbedFileError(source, _json_path(error.absolute_path) or "(top level)",
                               *_explain(error, published))


def _json_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _explain(error, published: str = "schemas/testbed.schema.json") -> tuple[str, str]:
    """Turn a jsonschema error into (problem, fix)."""
    kind, inst = error.validator, error.instance
    if kind == "enum":
        return (f"{short(inst)} is not allowed",
                "use one of: " + ", ".join(map(str, error.validator_value)))
    if kind == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        extra = sorted(set(inst) - set(error.schema.get("properties", {})))
        return (f"unknown field {', '.join(map(short, extra[:3]))}", f"allowed fields: {allowed}")
    if kind == "required":
        return (inputs.one_line(error.message, 120), "add it")
    if kind == "type" and isinstance(inst, float) and not math.isfinite(inst):
        return (f"{inst!r} is not a finite number", "give a finite number")
    if kind == "type":
        article = "an" if str(error.validator_value)[0] in "aeiou" else "a"
        return (f"{short(inst)} is not of type {error.validator_value}",
                f"give {article} {error.validator_value}")
    if kind == "format" and error.validator_value == "ipv4":
        return (f"{short(inst)} is not an IPv4 address", "write it as a.b.c.d, e.g. 198.19.1.10")
    if kind == "uniqueItems":
        return (f"{short(inst)} lists an item twice", "list each item once")
    if kind == "minItems":
        return ("the list is empty", "give at least one item or remove the field for the default")
    if kind == "pattern":
        if "$defs/name" in str(error.schema) or error.validator_value.startswith("^[a-z]"):
            return (f"{short(inst)} is not a valid name",
                    "use lowercase letters, digits and '-', starting with a letter, at most 24 characters")
        return (f"{short(inst)} is not a CIDR", "write it as a.b.c.d/len, e.g. 198.19.1.0/24")
    if kind in ("minimum", "maximum"):
        return (f"{short(inst)} is {'less' if kind == 'minimum' else 'greater'} than the "
                f"{kind} of {error.validator_value}",
                f"use a value {'>=' if kind == 'minimum' else '<='} {error.validator_value}")
    if kind in ("exclusiveMinimum", "exclusiveMaximum"):
        above = kind == "exclusiveMinimum"
        return (f"{short(inst)} is not {'above' if above else 'below'} {error.validator_value}",
                f"use a value {'>' if above else '<'} {error.validator_value}")
    if kind == "maxItems":
        return (f"{len(inst)} items, more than the limit of {error.validator_value}",
                f"give at most {error.validator_value} (split the file)")
    if kind == "maxLength":
        return (f"{short(inst)} is longer than {error.validator_value} characters", "shorten it")
    if kind == "const":
        return (f"{short(inst)} is not {error.validator_value!r}", f"give {error.validator_value!r}")
    if kind == "oneOf" and list(error.absolute_path)[:1] == ["vswitch"]:
        kinds = ", ".join(k.value for k in VSwitchKind)
        if isinstance(inst, str):
            return (f"{short(inst)} is not allowed", f"use one of: {kinds}")
        return (f"{short(inst)} is not a vSwitch", f"give a kind ({kinds}) or {{kind: ..., datapath: ...}}")
    if kind == "oneOf" and list(error.absolute_path)[:1] == ["routers"]:
        return (f"{short(inst)} is not a router interface", "give a vnet name or {name: ..., ip: ...}")
    if kind == "oneOf":   # the only other oneOf: a VM's vnets entry
        return (f"{short(inst)} is not a vnet reference", ("give a vnet name or {name: ..., ip: ..., "
                                                          "qos: {max_kbps: ..., max_burst_kbits: ...}, "
                                                          "port_security: ..., security_groups: [...]}"))
    return (inputs.one_line(error.message, 120), f"see {published}")


short = inputs.excerpt


class _Builder:
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
        l3 = _Routing(self, network, hosts, vnets, vms, interfaces).build()
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
                self.fail(f"{where}.host", f"host {host!r} is not declared", _one_of(hosts))
            out[ri] = []
            for k, ref in enumerate(r["vnets"]):
                ref = {"name": ref} if isinstance(ref, str) else ref
                at = f"{where}.vnets[{k}]"
                vnet = by_vnet.get(ref["name"])
                if vnet is None:
                    self.fail(at, f"vnet {ref['name']!r} is not declared", _one_of(vnets))
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
                          f"{network.underlay_cidr}", _outside_fix(network.underlay_cidr))
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

    def _security_groups(self) -> tuple[SecurityGroup, ...]:
        """Declared groups, and Neutron's 'default' unless declared. Rules are checked as
        Neutron's API checks them (the same refusals, named by field)."""
        raw = self.doc.get("security_groups") or []
        for i, g in enumerate(raw):
            self._unique("security group", g["name"], f"security_groups[{i}].name")
        names = {g["name"] for g in raw} | {DEFAULT_SG}
        groups = [SecurityGroup(g["name"], self._rules(g, f"security_groups[{i}]", names))
                  for i, g in enumerate(raw)]
        if DEFAULT_SG not in {g.name for g in groups}:
            groups.insert(0, neutron_default_group())
        return tuple(groups)

    def _rules(self, g, where, names) -> tuple[SgRule, ...]:
        rules = tuple(self._rule(r, f"{where}.rules[{j}]", names) for j, r in enumerate(g.get("rules") or []))
        if not any(r.direction == "egress" for r in rules):
            rules += (SgRule("egress"),)    # Neutron's allow-all egress of a new group
        return rules

    def _rule(self, r, where, names) -> SgRule:
        proto = None if r.get("protocol", "any") == "any" else r["protocol"]
        lo, hi = r.get("port_range_min"), r.get("port_range_max")
        if proto is None and (lo is not None or hi is not None):
            self.fail(f"{where}.port_range_min", "a port range needs a protocol",
                      "add protocol: tcp, udp or icmp, or remove the port range")
        if proto in ("tcp", "udp"):
            if hi is not None and lo is None:
                self.fail(f"{where}.port_range_min", "port_range_max without port_range_min",
                          "give port_range_min too")
            hi = lo if hi is None else hi
            if lo == 0 or hi == 0:
                self.fail(f"{where}.port_range_min", f"port 0 is not a {proto} port", "use ports 1..65535")
            if lo is not None and lo > hi:
                self.fail(f"{where}.port_range_max", f"{hi} is below port_range_min {lo}",
                          f"use port_range_max >= {lo}")
        if proto == "icmp":
            if hi is not None and lo is None:
                self.fail(f"{where}.port_range_min", "an ICMP code (port_range_max) without a type",
                          "give the ICMP type as port_range_min")
            for field_, v in (("port_range_min", lo), ("port_range_max", hi)):
                if v is not None and v > 255:
                    self.fail(f"{where}.{field_}", f"{v} is not an ICMP {'type' if field_.endswith('min') else 'code'}",
                              "use 0..255")
        prefix, group = r.get("remote_ip_prefix"), r.get("remote_group")
        if prefix is not None and group is not None:
            self.fail(f"{where}.remote_group", "remote_ip_prefix and remote_group together",
                      "give one of them (Neutron refuses both)")
        if group is not None and group not in names:
            self.fail(f"{where}.remote_group", f"security group {group!r} is not declared",
                      "use one of: " + ", ".join(sorted(names)))
        return SgRule(r["direction"], proto, lo, hi,
                      None if prefix is None else self._prefix(prefix, f"{where}.remote_ip_prefix"), group)

    def _prefix(self, text, where) -> ipaddress.IPv4Network:
        try:
            return ipaddress.IPv4Network(text, strict=True)
        except ValueError as exc:
            try:
                fix = f"write {ipaddress.IPv4Network(text, strict=False)}"
            except ValueError:
                fix = "write it as a.b.c.d/len, e.g. 198.19.1.0/24"
            self.fail(where, f"{short(text)} is not a valid network ({inputs.one_line(str(exc), 80)})", fix)

    def _port_security(self, ref, where) -> tuple[bool, tuple[str, ...]]:
        """(port security, groups) of one NIC: on with ['default'] when the testbed
        declares security groups, off otherwise, unless the NIC says."""
        declared = "security_groups" in self.doc
        on = ref.get("port_security", declared or "security_groups" in ref)
        groups = ref.get("security_groups")
        if not on:
            if groups:
                self.fail(f"{where}.security_groups", "security groups on a port with port_security false",
                          "remove security_groups or set port_security: true (Neutron refuses both)")
            return False, ()
        groups = (DEFAULT_SG,) if groups is None else tuple(groups)
        known = {DEFAULT_SG} | {g["name"] for g in self.doc.get("security_groups") or []}
        for name in groups:
            if name not in known:
                self.fail(f"{where}.security_groups", f"security group {name!r} is not declared",
                          "use one of: " + ", ".join(sorted(known)))
        return True, groups

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
        alloc = _IpAllocator(vnets, [spec for _, spec in specs])
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
                self.fail(f"{where}.hosts", f"host {name_!r} is not declared", _one_of(hosts))
        pair_hosts = names * 2 if placement == SAME_HOST else names
        vnet = p.get("vnet", vnets[0].name)
        if ("vnet", vnet) not in self.seen:
            self.fail(f"{where}.vnet", f"vnet {vnet!r} is not declared", _one_of(vnets))
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
            self.fail(f"{where}.vnet", f"vnet {vnet!r} is not declared", _one_of(vnets))
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
                self.fail(f"{where}.hosts", f"host {host!r} is not declared", _one_of(hosts))
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
            self.fail(f"{where}.peer_vnet", f"vnet {peer!r} is not declared", _one_of(vnets))
        if on.get(peer) != ri:
            self.fail(f"{where}.peer_vnet", f"vnet {peer!r} is not on the router of vnet {vnet!r}",
                      "route both vnets through one router")
        return peer

    def _vm(self, spec, where, index, hosts, vnets, alloc) -> Vm:
        host = hosts.get(spec["host"])
        if host is None:
            self.fail(f"{where}.host", f"host {spec['host']!r} is not declared", _one_of(hosts.values()))
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
                          _one_of(vnets.values()))
            ip = alloc.take(vnet, ref.get("ip"), lambda p, f: self.fail(f"{where}.vnets[{n}].ip", p, f))
            secured, groups = self._port_security(ref, f"{where}.vnets[{n}]")
            nics.append(Nic(vnet=vnet.name, ip=ip, mac=_mac(index, n), qos=_qos(ref.get("qos")),
                            port_security=secured, security_groups=groups))
        return Vm(name=spec["name"], host=host.name, cpus=cpus, nics=tuple(nics))


class _Routing:
    """Routers, the external network, external hosts and floating IPs of a document
    whose VMs are built: defaults and the checks Neutron's L3 API makes, by field."""

    def __init__(self, b: _Builder, network, hosts, vnets, vms, interfaces):
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
                        f"{self.network.underlay_cidr}", _outside_fix(self.network.underlay_cidr))
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
                                    _mac(first_mac + i, 0)))
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
            ports = tuple(RouterPort(vnet.name, ip, _mac(index, k))
                          for k, (vnet, ip) in enumerate(self.interfaces[ri]))
            out.append(Router(
                name=r["name"], host=r.get("host", self.hosts[0].name), ports=ports,
                gateway=self.pool.take(r.get("gateway_ip"), f"{where}.gateway_ip") if gw else None,
                gateway_mac=_mac(index, len(ports)) if gw else None, snat=r.get("snat", True) if gw else False,
                routing=routing))
        return tuple(out)

    def _floating_ips(self, routers) -> tuple[FloatingIp, ...]:
        vms, seen, out = {v.name: v for v in self.vms}, {}, []
        declared = [(f"floating_ips[{i}]", f) for i, f in enumerate(self.doc.get("floating_ips") or [])]
        for where, f in declared + self.b.implicit_fips:        # then the floating-ip pairs' own
            vm = vms.get(f["vm"])
            if vm is None:
                self.b.fail(f"{where}.vm", f"VM {f['vm']!r} is not declared", _one_of(self.vms))
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


def neutron_default_group() -> SecurityGroup:
    """Neutron's 'default' group of every project (IPv4 rules): egress to anywhere,
    ingress from the group's own members."""
    return SecurityGroup(DEFAULT_SG, (SgRule("ingress", remote_group=DEFAULT_SG), SgRule("egress")))


def _qos(raw) -> Qos | None:
    """Neutron's default burst: 80% of the rate, in kbit."""
    if raw is None:
        return None
    return Qos(max_kbps=raw["max_kbps"],
               max_burst_kbits=raw.get("max_burst_kbits", max(1, raw["max_kbps"] * 8 // 10)),
               direction=raw.get("direction", "ingress"))


class _IpAllocator:
    """Hands out tenant addresses per vnet: explicit ones first come, then in order.

    Explicit addresses are reserved up front so that an automatic one given to
    an earlier VM never steals an address a later VM asked for.
    """

    def __init__(self, vnets, specs=()):
        self.used = {v.name: set() for v in vnets}
        self.free = {v.name: iter(v.cidr.hosts()) for v in vnets}
        self.reserved = {v.name: set() for v in vnets}
        self.owner = {}             # (vnet, ip) -> who holds it, where not a VM
        for spec in specs:
            for ref in spec.get("vnets") or []:
                if isinstance(ref, dict) and "ip" in ref and ref["name"] in self.reserved:
                    self.reserved[ref["name"]].add(ipaddress.IPv4Address(ref["ip"]))

    def take(self, vnet, explicit, fail):
        used = self.used[vnet.name]
        if explicit is not None:
            ip = ipaddress.IPv4Address(explicit)
            if ip not in vnet.cidr or ip in (vnet.cidr.network_address, vnet.cidr.broadcast_address):
                fail(f"{ip} is not a host address of vnet {vnet.name!r} ({vnet.cidr})",
                     "pick an address inside the vnet's CIDR")
            if ip in used:
                held = self.owner.get((vnet.name, ip))
                fail(f"{ip} is already taken on vnet {vnet.name!r}" + (f" ({held})" if held else ""),
                     "give every NIC its own address")
        else:
            skip = used | self.reserved[vnet.name]
            ip = next((a for a in self.free[vnet.name] if a not in skip), None)
            if ip is None:
                fail(f"vnet {vnet.name!r} ({vnet.cidr}) has no free address left",
                     "use a larger CIDR")
        used.add(ip)
        return ip


def _one_of(objects) -> str:
    names = [o.name for o in objects]
    return "use one of: " + ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")


def _outside_fix(underlay) -> str:
    """A tenant CIDR that really is outside the underlay, or: shrink the underlay."""
    for text in ("198.19.1.0/24", "198.18.1.0/24", "198.19.255.0/24", "10.0.1.0/24"):
        if not ipaddress.IPv4Network(text).overlaps(underlay):
            return f"pick a tenant CIDR outside the underlay, e.g. {text}"
    return f"shrink network.underlay_cidr (e.g. {DEFAULT_UNDERLAY}) to leave room for tenant CIDRs"


def _mac(vm_index: int, nic: int) -> str:
    """Locally administered, unique per VM and NIC within a testbed."""
    return "02:76:6e:{:02x}:{:02x}:{:02x}".format(vm_index >> 8 & 0xff, vm_index & 0xff, nic)

