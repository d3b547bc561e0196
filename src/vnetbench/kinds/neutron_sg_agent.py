"""The security-group half of a Neutron L2 agent for one emulated host: Neutron's own
``SecurityGroupAgentRpc`` and firewall driver (Debian's python3-neutron), fed by
vnetbench instead of a Neutron server. Run with the system's python3 inside the host's
network namespace (the venv's Python has no neutron); it imports nothing of vnetbench
and runs isolated (``-I``: the script's directory, which holds a package named ``ovs``,
stays off sys.path).

    python3 neutron_sg_agent.py --driver iptables --binary neutron-linuxbridge-agent \
        --lock-path DIR --socket PATH --pidfile PATH

It serves a Unix socket (a file: reachable from any namespace): a connection sends one
JSON command on one line and reads one JSON reply. Commands, one at a time:

    {"op": "prepare", "payload": P}              ports of P filtered (agent start)
    {"op": "rules_updated", "payload": P, "groups": [id, ...]}
    {"op": "members_updated", "payload": P, "groups": [id, ...]}
    {"op": "remove", "devices": [port id, ...]}
    -> {"ok": true, "seconds": 0.0123} | {"ok": false, "error": "..."}

P is the reply of Neutron's ``security_group_info_for_devices`` RPC
(vnetbench.kinds.neutron_sg.payload); an update replaces it, and the agent refreshes as
on a server's notification (the ports of the groups named, in full). The pidfile is
written once the socket listens: its existence is readiness. ``--binary`` is the agent
program Neutron names its iptables chains after (neutron-linuxbri-*).
"""

import argparse
import json
import os
import socket
import sys
import time


def _bridge_named_driver():
    """Neutron's iptables driver, told the name of the port's bridge: the linuxbridge
    agent calls it brq<network id>, the embedded testbed names it after the run, and the
    driver puts the bridge's name in the rules that set a port's conntrack zone (``-i
    <bridge>`` catches what arrives from the tunnel). ``port["bridge"]`` (vnetbench's
    key, unknown to Neutron) is the only difference."""
    from neutron.agent.linux import iptables_firewall

    class BridgeNamedIptablesFirewallDriver(iptables_firewall.IptablesFirewallDriver):
        def _get_br_device_name(self, port):
            return port.get("bridge") or super()._get_br_device_name(port)
    return BridgeNamedIptablesFirewallDriver


class _PluginRpc:
    """The server side of the one RPC the agent calls: our payload, for the devices asked."""

    def __init__(self):
        self.payload = {"devices": {}, "security_groups": {}, "sg_member_ips": {}}

    def security_group_info_for_devices(self, context, device_ids):
        devices = {d: p for d, p in self.payload["devices"].items() if d in device_ids}
        members = {g: {e: [tuple(m) for m in ips] for e, ips in by.items()}
                   for g, by in self.payload["sg_member_ips"].items()}
        return {"devices": devices, "security_groups": self.payload["security_groups"],
                "sg_member_ips": members}


def _configure(driver: str, lock_path: str) -> None:
    from oslo_concurrency import lockutils
    from oslo_config import cfg

    from neutron.conf.agent import common as agent_conf
    from neutron.conf.agent import securitygroups_rpc as sg_conf
    from neutron.conf.agent.database import agents_db
    agent_conf.register_root_helper(cfg.CONF)
    agent_conf.register_iptables_opts(cfg.CONF)
    sg_conf.register_securitygroups_opts(cfg.CONF)
    agents_db.register_db_agents_opts(cfg.CONF)
    cfg.CONF([], project="neutron", default_config_files=[])
    cfg.CONF.set_override("firewall_driver", driver, "SECURITYGROUP")
    cfg.CONF.set_override("enable_security_group", True, "SECURITYGROUP")
    cfg.CONF.set_override("enable_ipset", True, "SECURITYGROUP")
    cfg.CONF.set_override("root_helper", "", "AGENT")       # root already, in the host's namespace
    lockutils.set_defaults(lock_path)   # Neutron's iptables and ipset locks: the run's, not the machine's


def _text(exc) -> str:
    try:
        return str(exc)
    except Exception:                   # oslo_config's errors can fail to print
        return repr(exc)


def _serve(agent, rpc, line: str) -> dict:
    t0 = time.monotonic()
    try:
        cmd = json.loads(line)
        op = cmd["op"]
        if "payload" in cmd:
            rpc.payload = cmd["payload"]
        if op == "prepare":
            agent.prepare_devices_filter(list(rpc.payload["devices"]))
        elif op == "rules_updated":
            agent.security_groups_rule_updated(cmd["groups"])
        elif op == "members_updated":
            agent.security_groups_member_updated(cmd["groups"])
        elif op == "remove":
            agent.remove_devices_filter(cmd["devices"])
        else:
            raise ValueError(f"unknown op {op!r}")
        return {"ok": True, "seconds": round(time.monotonic() - t0, 6)}
    except Exception as exc:            # one reply per command; the agent goes on
        return {"ok": False, "error": f"{type(exc).__name__}: {_text(exc)}"[:2000]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", default="iptables", help="neutron firewall_driver (iptables, ...)")
    ap.add_argument("--binary", default="neutron-linuxbridge-agent",
                    help="the agent program name Neutron's chain names come from")
    ap.add_argument("--lock-path", required=True, help="directory of Neutron's lock files (the run's)")
    ap.add_argument("--socket", required=True, help="Unix socket to serve commands on")
    ap.add_argument("--pidfile", required=True, help="written once the socket listens")
    args = ap.parse_args(argv)
    # as every Neutron agent (neutron/cmd/eventlet): green threads, and a socket that
    # yields to them -- the iptables driver deletes conntrack entries of removed rules on
    # green workers that never ran in a process blocked in a plain accept()
    from neutron.common import eventlet_utils
    eventlet_utils.monkey_patch()
    sys.argv[0] = args.binary           # iptables_manager reads it at import
    driver = args.driver
    if driver == "iptables":
        globals()["BridgeNamedIptablesFirewallDriver"] = _bridge_named_driver()
        driver = f"{__name__}.BridgeNamedIptablesFirewallDriver"
    _configure(driver, args.lock_path)
    from neutron.agent import securitygroups_rpc
    rpc = _PluginRpc()
    agent = securitygroups_rpc.SecurityGroupAgentRpc(context=None, plugin_rpc=rpc)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(args.socket)
    srv.listen(8)
    with open(args.pidfile + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(args.pidfile + ".tmp", args.pidfile)
    print(f"ready: {type(agent.firewall).__name__} on {args.socket}", flush=True)
    while True:
        conn, _ = srv.accept()
        with conn, conn.makefile("rw") as stream:
            line = stream.readline()
            reply = _serve(agent, rpc, line)
            stream.write(json.dumps(reply) + "\n")
            stream.flush()
            print(f"{line[:80].strip()!r}... -> {json.dumps(reply)[:300]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
