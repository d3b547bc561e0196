"""Neutron's OVN ACLs for security groups, written by Neutron's own code (Debian's
python3-neutron, ``neutron.common.ovn.acl``): what the OVN mechanism driver puts in the
northbound database for each rule, and its port-group names. Run with the system's
python3 (the venv has no neutron); it imports nothing of vnetbench and runs isolated
(``-I``: the script's directory, which holds a package named ``ovs``, stays off sys.path).

    python3 ovn_acls.py < {"groups": {sg_id: [rule, ...]}}

A rule is a row of Neutron's securitygrouprules table as the driver reads it (id,
direction, ethertype, protocol, port_range_min/max, normalized_cidr, remote_group_id).
Prints {"drop_group": name, "port_groups": {sg_id: name}, "drop_acls": [...],
"acls": {sg_id: [acl, ...]}}; an ACL is Neutron's dict (port_group, direction, priority,
match, action, ...).
"""

import json
import sys


def main() -> int:
    from neutron.common.ovn import acl, utils
    from neutron.common.ovn import constants as ovn_const
    req = json.load(sys.stdin)
    drop = ovn_const.OVN_DROP_PORT_GROUP_NAME
    names = {sg: utils.ovn_port_group_name(sg) for sg in req["groups"]}
    out = {"drop_group": drop, "port_groups": names,
           "drop_acls": acl.add_acls_for_drop_port_group(drop),
           "acls": {sg: [acl._add_sg_rule_acl_for_port_group(names[sg], True, r) for r in rules]
                    for sg, rules in req["groups"].items()}}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
