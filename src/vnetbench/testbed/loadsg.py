"""The testbed loader's security groups: the declared groups and Neutron's 'default',
their rules checked as Neutron's API checks them (the same refusals, named by field), and
each NIC's port security. A part of the loader's builder (``loader._Builder``): it uses
the builder's document, ``fail`` and ``_unique``."""

from __future__ import annotations

import ipaddress

from vnetbench import inputs
from vnetbench.testbed.model import DEFAULT_SG, SecurityGroup, SgRule
from vnetbench.testbed.loadcommon import neutron_default_group, short


class SecurityGroups:
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
