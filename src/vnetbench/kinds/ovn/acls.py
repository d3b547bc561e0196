"""Security groups on OVN as Neutron's OVN mechanism driver writes them: a port group
per security group holding its ports, Neutron's ``neutron_pg_drop`` group holding every
port with port security (drop all IP at priority 1001), and per rule an
``allow-related`` ACL at 1002 on the group's port group (``to-lport`` for ingress,
``from-lport`` for egress; remote groups through the address set OVN keeps for each
port group, ``$pg_<id>_ip4``). The ACL dicts come from Neutron's own code
(``vnetbench.kinds.neutron.ovn_acls``, run with the system's python3); this module only
turns them into one ovn-nbctl transaction. Everything is in the run's NB database.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from vnetbench.errors import BuildError
from vnetbench.kinds.neutron import sg as neutron_sg

SCRIPT = Path(neutron_sg.__file__).with_name("ovn_acls.py")


def neutron_acls(tb, run_id: str, groups=None) -> dict:
    """Neutron's port-group names and ACLs for ``groups`` (names; default: every group)."""
    names = [g.name for g in tb.security_groups] if groups is None else list(groups)
    req = {"groups": {neutron_sg.sg_id(run_id, g): [neutron_sg.db_rule(run_id, g, i, r)
                                                   for i, r in enumerate(tb.security_group(g).rules)]
                      for g in names}}
    done = subprocess.run([neutron_sg.SYSTEM_PYTHON, "-I", str(SCRIPT)], input=json.dumps(req), capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"Neutron's OVN ACLs for run {run_id}: {neutron_sg.SYSTEM_PYTHON} {SCRIPT.name}: {tail}")
    return json.loads(done.stdout)


def _acl_args(a: dict) -> list[str]:
    return ["--", "--type=port-group", "acl-add", a["port_group"], a["direction"], str(a["priority"]),
            a["match"], a["action"]]


def transaction(tb, run_id: str, port_name) -> list[str]:
    """ovn-nbctl arguments (one transaction) creating the port groups and ACLs of every
    security group; ``port_name(vm, nic_index)`` is the logical switch port's name."""
    got = neutron_acls(tb, run_id)
    own = f"external_ids:vnetbench-run={run_id}"
    members = {g.name: [] for g in tb.security_groups}
    secured = []
    for vm in tb.vms:
        for k, nic in enumerate(vm.nics):
            if nic.port_security:
                secured.append(port_name(vm.name, k))
                for g in nic.security_groups:
                    members[g].append(port_name(vm.name, k))
    tx = ["--", "pg-add", got["drop_group"], *secured, "--", "set", "Port_Group", got["drop_group"], own]
    for g in tb.security_groups:
        pg = got["port_groups"][neutron_sg.sg_id(run_id, g.name)]
        tx += ["--", "pg-add", pg, *members[g.name], "--", "set", "Port_Group", pg, own]
    for a in got["drop_acls"]:
        tx += _acl_args(a)
    for acls in got["acls"].values():
        for a in acls:
            tx += _acl_args(a)
    return tx[1:]


def update_transaction(tb, run_id: str, groups) -> list[str]:
    """The ACLs of ``groups`` replaced in one transaction (Neutron deletes and creates an
    ACL per rule changed; one transaction is the same end state, applied at once)."""
    got = neutron_acls(tb, run_id, groups)
    tx = []
    for sg, acls in got["acls"].items():
        tx += ["--", "--type=port-group", "acl-del", got["port_groups"][sg]]
        for a in acls:
            tx += _acl_args(a)
    return tx[1:]
