"""The testbed's security groups on a cloud: the Heat stack's groups, rules and per-port
groups (heat-templates/sg.yaml, sgrule.yaml), and rule changes through Neutron's API.

Every group of the testbed becomes a run-owned Neutron group ``vnb-<run>-sg-<name>``
(``default`` too: the project's own is never touched). Two groups of the backend's own
join them where the cloud needs them:

- ``control``: the command channel. The runner reaches its guests over SSH, so every
  filtered port that carries it (the test NIC, or the management NIC with
  --mgmt-network) also admits TCP 22 from anywhere. Its one egress rule (SSH to its own
  members) is there so that Neutron's allow-all egress is not added to the port: no
  probe of the suite uses port 22, so a measured verdict never depends on it.
- ``open``: a port the testbed leaves unfiltered on a network whose ports the project
  may not turn port security off on (not admin, not the network's owner): every IPv4
  packet admitted, the firewall still in the path (what Shaker's templates do).
"""

from __future__ import annotations

from vnetbench.errors import VnetbenchError
from vnetbench.testbed.model import SgRule, Testbed

CONTROL, OPEN = "control", "open"
SSH = 22


def name(run_id: str, group: str) -> str:
    """The Neutron name of a testbed group (CONTROL and OPEN: the backend's own)."""
    return f"vnb-{run_id}-{group}" if group in (CONTROL, OPEN) else f"vnb-{run_id}-sg-{group}"


def heat_rule(rule: SgRule, group: str) -> dict:
    """A rule of OS::Neutron::SecurityGroup's ``rules`` (its own group as remote: Heat's
    remote_mode remote_group_id without an id). Other groups as remote: ``cross_rule``."""
    out = {"direction": rule.direction, "ethertype": "IPv4"}
    if rule.protocol:
        out["protocol"] = rule.protocol
    for key in ("port_range_min", "port_range_max"):
        if getattr(rule, key) is not None:
            out[key] = getattr(rule, key)
    if rule.remote_group is not None:
        if rule.remote_group != group:
            raise ValueError(f"rule of {group} names group {rule.remote_group}: a cross rule")
        out["remote_mode"] = "remote_group_id"
    else:
        out["remote_mode"] = "remote_ip_prefix"
        out["remote_ip_prefix"] = str(rule.remote_ip_prefix or "0.0.0.0/0")
    return out


def _control_group() -> list[dict]:
    ssh = {"protocol": "tcp", "port_range_min": SSH, "port_range_max": SSH, "ethertype": "IPv4"}
    return [{**ssh, "direction": "ingress", "remote_mode": "remote_ip_prefix",
             "remote_ip_prefix": "0.0.0.0/0"},
            {**ssh, "direction": "egress", "remote_mode": "remote_group_id"}]


def _open_group() -> list[dict]:
    return [{"direction": "ingress", "ethertype": "IPv4", "remote_mode": "remote_ip_prefix",
             "remote_ip_prefix": "0.0.0.0/0"}]


def parameters(testbed: Testbed, run_id: str, overrides: bool, mgmt: bool) -> dict:
    """The stack's groups (``security_groups``, ``sg_count``), the rules naming another
    group (``sg_cross_rules``, ``sg_cross_count``) and each VM's port: {vm: (secured,
    [group names])}, under ``ports``. OVERRIDES: the project may turn port security off
    (admin or the network's owner); MGMT: the command channel is on a second NIC."""
    ports = {vm.name: port_groups(testbed, vm.nics[0], run_id, overrides, carries_ssh=not mgmt)
             for vm in testbed.vms}
    used = {g for _, groups in ports.values() for g in groups}
    if mgmt and not overrides:
        used.add(name(run_id, CONTROL))
    groups, cross = [], []
    for g in testbed.security_groups if testbed.port_security else ():
        own = [r for r in g.rules if r.remote_group in (None, g.name)]
        if any(r.direction == "egress" for r in g.rules) and not any(r.direction == "egress" for r in own):
            raise VnetbenchError(
                f"{testbed.source}: security group {g.name!r}: its egress rules all name other "
                "groups (remote_group); Heat's OS::Neutron::SecurityGroup then keeps Neutron's "
                "allow-all egress: add an egress rule with remote_ip_prefix or remote_group "
                f"{g.name!r} to the group")
        groups.append({"name": name(run_id, g.name), "rules": [heat_rule(r, g.name) for r in own]})
        cross += [cross_rule(run_id, g.name, r) for r in g.rules if r.remote_group not in (None, g.name)]
    for own, rules in ((CONTROL, _control_group()), (OPEN, _open_group())):
        if name(run_id, own) in used:
            groups.append({"name": name(run_id, own), "rules": rules})
    return {"security_groups": groups, "sg_count": len(groups), "sg_cross_rules": cross,
            "sg_cross_count": len(cross), "ports": ports,
            "mgmt_security_groups": [name(run_id, CONTROL)] if mgmt and not overrides else []}


def filtering(params: dict) -> str:
    """What filters the stack's ports, for provenance (the cloud's firewall driver is not
    a tenant's to read)."""
    groups = [g["name"] for g in params.get("security_groups") or ()]
    if not groups:
        return "off"
    if not any("-sg-" in n for n in groups):
        return ("the cloud's firewall, every port in an allow-all group (port security is not "
                "the project's to turn off)")
    return "the cloud's firewall with the testbed's security groups"


def port_groups(testbed: Testbed, nic, run_id: str, overrides: bool,
                carries_ssh: bool) -> tuple[bool, list[str]]:
    """(port security on, its groups' Neutron names) for the port of NIC."""
    if nic.port_security:
        extra = [CONTROL] if carries_ssh else []
        return True, [name(run_id, g) for g in (*nic.security_groups, *extra)]
    if overrides:
        return False, []
    return True, [name(run_id, OPEN)]


def cross_rule(run_id: str, group: str, rule: SgRule) -> dict:
    """An OS::Neutron::SecurityGroupRule of GROUP whose remote is another group (names:
    Heat resolves them to ids)."""
    out = {"security_group": name(run_id, group), "direction": rule.direction,
           "protocol": rule.protocol, "port_range_min": rule.port_range_min,
           "port_range_max": rule.port_range_max, "remote_group": name(run_id, rule.remote_group)}
    return out


# -- rule changes through Neutron's API ---------------------------------------------------

def _key(r: dict) -> tuple:
    """What makes two Neutron rules the same rule (IPv4; '' for unset)."""
    def v(k):
        x = r.get(k)
        return "" if x is None else str(x)
    prefix = v("remote_ip_prefix")
    return (v("direction"), v("protocol"), v("port_range_min"), v("port_range_max"),
            "" if prefix == "0.0.0.0/0" else prefix, v("remote_group_id"))


def neutron_rule(rule: SgRule, group_ids: dict[str, str]) -> dict:
    """The body of POST /v2.0/security-group-rules for RULE (its group not included)."""
    body = {"direction": rule.direction, "ethertype": "IPv4", "protocol": rule.protocol,
            "port_range_min": rule.port_range_min, "port_range_max": rule.port_range_max}
    if rule.remote_group is not None:
        body["remote_group_id"] = group_ids[rule.remote_group]
    else:
        body["remote_ip_prefix"] = str(rule.remote_ip_prefix) if rule.remote_ip_prefix else None
    return {k: v for k, v in body.items() if v is not None}


def changes(have: list[dict], want: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rules of HAVE to delete, bodies of WANT to create): the group's rules as Neutron
    lists them against the rules it should have. IPv6 rules are left alone (the model is
    IPv4)."""
    have = [r for r in have if (r.get("ethertype") or r.get("ether_type") or "IPv4") == "IPv4"]
    want_keys = {_key(w) for w in want}
    have_keys = {_key(h) for h in have}
    return ([h for h in have if _key(h) not in want_keys],
            [w for w in want if _key(w) not in have_keys])


def update(conn, run_id: str, testbed: Testbed, changed) -> None:
    """Give the Neutron groups of CHANGED (testbed group names) TESTBED's rules: new rules
    first, then the old ones deleted, so a rule in both never lapses."""
    ids = {g.name: conn.network.find_security_group(name(run_id, g.name), ignore_missing=False).id
           for g in testbed.security_groups}
    for group in changed:
        have = [r.to_dict() for r in conn.network.security_group_rules(security_group_id=ids[group])]
        want = [neutron_rule(r, ids) for r in testbed.security_group(group).rules]
        drop, add = changes(have, want)
        for body in add:
            conn.network.create_security_group_rule(security_group_id=ids[group], **body)
        for r in drop:
            conn.network.delete_security_group_rule(r["id"], ignore_missing=True)
