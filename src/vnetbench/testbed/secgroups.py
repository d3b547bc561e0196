"""What a testbed's security groups allow, as Neutron defines it: the reference every
kind's realisation (OVS conntrack flows, iptables chains, OVN ACLs, vRouter flow
rules) is checked against, and the functional rows' expected verdicts come from.

Pure: a testbed and a connection's first packet in, the rule that allows it (or none)
out. Neutron's semantics (IPv4):

- a port with port security off is not filtered at all;
- a port with port security on passes what any rule of any of its groups allows, and
  drops the rest (no groups: drops everything);
- an egress rule is checked at the sending port, an ingress rule at the receiving port;
  a connection must pass both;
- ``remote_ip_prefix`` is matched against the remote address (the source of an ingress
  packet, the destination of an egress one); ``remote_group`` against the addresses of
  the ports in that group;
- stateful: the replies of an allowed connection pass without a rule (not modelled
  here: only the first packet of a connection is judged).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from vnetbench.testbed.model import Nic, SgRule, Testbed

OPEN = SgRule("ingress")        # stands for "not filtered": the port has no port security


@dataclass(frozen=True)
class Packet:
    """The first packet of a connection: protocol "tcp", "udp" or "icmp"; ``port`` is
    the TCP/UDP destination port, or the ICMP type (``code``: the ICMP code)."""
    protocol: str
    src: ipaddress.IPv4Address
    dst: ipaddress.IPv4Address
    port: int | None = None
    code: int | None = None


def member_nics(tb: Testbed, group: str) -> list[Nic]:
    """The ports in ``group`` (a port without port security is in none)."""
    return [nic for vm in tb.vms for nic in vm.nics if nic.port_security and group in nic.security_groups]


def members(tb: Testbed, group: str) -> frozenset[ipaddress.IPv4Address]:
    """The addresses a ``remote_group`` rule naming ``group`` matches: its ports' IPs."""
    return frozenset(nic.ip for nic in member_nics(tb, group))


def with_rules(tb: Testbed, group: str, rules) -> tuple:
    """The testbed's groups with ``group``'s rules replaced (for ``update_security_groups``)."""
    import dataclasses
    return tuple(dataclasses.replace(g, rules=tuple(rules)) if g.name == group else g
                 for g in tb.security_groups)


def replaced(tb: Testbed, groups, run_id: str) -> tuple[Testbed, list[str]]:
    """(TB with the rules of GROUPS, the names of the groups that changed) for
    ``update_security_groups``: groups change their rules, they do not appear or go."""
    import dataclasses

    from vnetbench.errors import UnsupportedError
    old = {g.name: g for g in tb.security_groups}
    new = {g.name: g for g in groups}
    if not tb.port_security or set(old) != set(new):
        raise UnsupportedError(f"run {run_id}: security groups can change their rules, not "
                               f"appear or go (groups {sorted(old)}, asked {sorted(new)})")
    changed = [n for n in new if new[n] != old[n]]
    return dataclasses.replace(tb, security_groups=tuple(new[n] for n in old)), changed


def matches(rule: SgRule, pkt: Packet, remote: ipaddress.IPv4Address,
            group_members: frozenset[ipaddress.IPv4Address] | None) -> bool:
    """Whether ``rule`` admits ``pkt``; ``remote`` is the address on the far side,
    ``group_members`` the addresses of the rule's remote group (None: it names none)."""
    if rule.protocol is not None and rule.protocol != pkt.protocol:
        return False
    if rule.protocol in ("tcp", "udp") and rule.port_range_min is not None:
        if pkt.port is None or not rule.port_range_min <= pkt.port <= rule.port_range_max:
            return False
    if rule.protocol == "icmp":
        if rule.port_range_min is not None and pkt.port != rule.port_range_min:
            return False
        if rule.port_range_max is not None and pkt.code != rule.port_range_max:
            return False
    if rule.remote_ip_prefix is not None and remote not in rule.remote_ip_prefix:
        return False
    if rule.remote_group is not None and remote not in (group_members or frozenset()):
        return False
    return True


def admitting(rules, direction: str, pkt: Packet, members_of) -> SgRule | None:
    """The first of ``rules`` that admits ``pkt`` in ``direction``; ``members_of(group)``:
    the addresses a ``remote_group`` rule naming ``group`` matches. The one loop the
    reference and a kind's own evaluation (the vRouter model's agent) share."""
    remote = pkt.src if direction == "ingress" else pkt.dst
    for rule in rules:
        if rule.direction != direction:
            continue
        group = members_of(rule.remote_group) if rule.remote_group else None
        if matches(rule, pkt, remote, group):
            return rule
    return None


def allowing_rule(tb: Testbed, nic: Nic, direction: str, pkt: Packet) -> SgRule | None:
    """The first rule of ``nic``'s groups that admits ``pkt`` in ``direction`` ("ingress":
    ``pkt`` arrives at the port; "egress": it leaves it); ``OPEN`` for an unfiltered
    port; None when the port drops it."""
    if not nic.port_security:
        return OPEN
    rules = (rule for name in nic.security_groups for rule in tb.security_group(name).rules)
    return admitting(rules, direction, pkt, lambda group: members(tb, group))


def allowed(tb: Testbed, src: Nic, dst: Nic, pkt: Packet) -> bool:
    """A new connection from port ``src`` to port ``dst``: allowed on the way out of
    ``src`` and on the way into ``dst``."""
    return allowing_rule(tb, src, "egress", pkt) is not None and \
        allowing_rule(tb, dst, "ingress", pkt) is not None


def may_spoof(nic: Nic) -> bool:
    """Neutron's port security also drops what a port sends from another MAC or IP
    (anti-spoofing); with it off, anything leaves."""
    return not nic.port_security
