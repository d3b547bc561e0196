"""A host's security groups as Neutron's server sends them to an L2 agent: the reply
to ``security_group_info_for_devices`` (neutron/db/securitygroups_rpc_base.py,
``security_group_info_for_ports``), built from the testbed model.

The kinds modelled on Neutron's own agents (linuxbridge: the iptables firewall; ovs:
the openvswitch firewall) hand this payload to Neutron's ``SecurityGroupAgentRpc``
running in the emulated host, so the rules in the datapath are the ones Neutron's
drivers write, not a rewrite of them. Pure: a testbed and a host in, JSON-ready dict out.

Ids are stable UUIDs derived from the run and the object's name (Neutron's ipset and
conntrack-zone names come from them); ``device`` is the host-side port as the kind
names it. Left out, said here: provider rules (DHCP and IPv6 RA from the network's
DHCP ports: the embedded vnets have none), allowed address pairs, IPv6 rules.
"""

from __future__ import annotations

import functools
import os
import uuid

from vnetbench.testbed import secgroups
from vnetbench.testbed.model import SgRule, Testbed

#: the Python with Debian's python3-neutron (the venv's has no neutron); the helpers that
#: run Neutron's code (sg_agent.py, ovn_acls.py) run with it
SYSTEM_PYTHON = os.environ.get("VNETBENCH_NEUTRON_PYTHON", "/usr/bin/python3")
NAMESPACE = uuid.UUID("5b4c7f0e-2f4e-4a49-9d1f-7a6e0c1b9e27")
#: Neutron's key for a rule's remote prefix, by direction (DIRECTION_IP_PREFIX)
PREFIX_KEY = {"ingress": "source_ip_prefix", "egress": "dest_ip_prefix"}


def sg_id(run_id: str, group: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{run_id}/sg/{group}"))


def port_id(run_id: str, vm: str, nic: int) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{run_id}/port/{vm}/{nic}"))


def network_id(run_id: str, vnet: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{run_id}/net/{vnet}"))


def rule_dict(run_id: str, group: str, rule: SgRule) -> dict:
    """One rule as the agent receives it (only the keys that are set, as the server
    sends them)."""
    out = {"direction": rule.direction, "ethertype": "IPv4", "stateful": True,
           "security_group_id": sg_id(run_id, group)}
    for key in ("protocol", "port_range_min", "port_range_max"):
        if getattr(rule, key) is not None:
            out[key] = getattr(rule, key)
    if rule.remote_ip_prefix is not None:
        out[PREFIX_KEY[rule.direction]] = str(rule.remote_ip_prefix)
    if rule.remote_group is not None:
        out["remote_group_id"] = sg_id(run_id, rule.remote_group)
    return out


def db_rule(run_id: str, group: str, index: int, rule: SgRule) -> dict:
    """One rule as a row of Neutron's securitygrouprules table (what the OVN driver reads)."""
    return {"id": str(uuid.uuid5(NAMESPACE, f"{run_id}/rule/{group}/{index}")),
            "security_group_id": sg_id(run_id, group), "direction": rule.direction,
            "ethertype": "IPv4", "protocol": rule.protocol, "port_range_min": rule.port_range_min,
            "port_range_max": rule.port_range_max,
            "normalized_cidr": None if rule.remote_ip_prefix is None else str(rule.remote_ip_prefix),
            "remote_group_id": rule.remote_group and sg_id(run_id, rule.remote_group)}


@functools.lru_cache(maxsize=None)
def neutron_python_missing(python: str = SYSTEM_PYTHON) -> str | None:
    """Why ``python`` cannot run Neutron's code (Debian's python3-neutron); None: it can.
    Once per process: importing Neutron takes seconds, and a build asks twice (the Rally
    context, then ``Capabilities.require``)."""
    import subprocess
    done = subprocess.run([python, "-c", "import neutron.agent.securitygroups_rpc, neutron.common.ovn.acl"],
                          capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return None
    return (f"{python} cannot import Neutron (Debian package python3-neutron; 'make install' "
            f"installs it): {(done.stderr.strip().splitlines() or ['?'])[-1]}")


def payload(tb: Testbed, run_id: str, host: str, device, bridge=None, trusted=False) -> dict:
    """The RPC reply for every VM port on ``host``; ``device(vm_name, nic_index)`` gives
    the port's host-side device name, ``bridge(vnet_name)`` (linuxbridge) the name of
    the vnet's bridge, which Neutron would call brq<network id> (key ``bridge``, ours).
    ``trusted``: also the ids of the host's router ports (key ``trusted``, ours): the
    agent asks for them too, and the server's reply leaves them out, as Neutron's leaves
    out a ``network:router_interface`` port, so the driver passes them unfiltered
    (``process_trusted_ports``: OVS's firewall then sends their traffic to the ingress
    pipeline of the port it goes to)."""
    devices, groups, remote = {}, {}, set()
    for vm in tb.vms_on(host):
        for n, nic in enumerate(vm.nics):
            pid = port_id(run_id, vm.name, n)
            port = {"id": pid, "device": device(vm.name, n), "mac_address": nic.mac,
                    "fixed_ips": [str(nic.ip)], "network_id": network_id(run_id, nic.vnet),
                    "device_owner": "compute:nova", "port_security_enabled": nic.port_security,
                    "security_groups": [sg_id(run_id, g) for g in nic.security_groups],
                    "security_group_rules": [], "allowed_address_pairs": [],
                    "security_group_source_groups": []}
            if bridge is not None:
                port["bridge"] = bridge(nic.vnet)
            for g in nic.security_groups:
                sg = tb.security_group(g)
                groups[sg_id(run_id, g)] = [rule_dict(run_id, g, r) for r in sg.rules]
                for r in sg.rules:
                    rid = r.remote_group and sg_id(run_id, r.remote_group)
                    if rid and rid not in port["security_group_source_groups"]:
                        port["security_group_source_groups"].append(rid)
                        remote.add(r.remote_group)
            devices[pid] = port
    members = {sg_id(run_id, g): {"IPv4": sorted([str(nic.ip), nic.mac]
                                                 for nic in secgroups.member_nics(tb, g))}
               for g in sorted(remote, key=lambda g: sg_id(run_id, g))}
    out = {"devices": devices, "security_groups": groups, "sg_member_ips": members}
    if trusted:
        vms = {v.name for v in tb.vms}
        out["trusted"] = [port_id(run_id, r.name, n) for r in tb.attached_on(host) if r.name not in vms
                          for n in range(len(r.nics))]
    return out
