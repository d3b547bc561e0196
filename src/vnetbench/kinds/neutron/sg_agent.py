"""The security-group half of a Neutron L2 agent for one emulated host: Neutron's own
``SecurityGroupAgentRpc`` and firewall driver (Debian's python3-neutron), fed by
vnetbench instead of a Neutron server. Run with the system's python3 inside the host's
network namespace (the venv's Python has no neutron); it imports nothing of vnetbench
and runs isolated (``-I``: the script's directory, which holds a package named ``ovs``,
stays off sys.path).

    python3 sg_agent.py --driver iptables --binary neutron-linuxbridge-agent \
        --lock-path DIR --socket PATH --pidfile PATH
    python3 sg_agent.py --driver openvswitch --binary neutron-openvswitch-agent \
        --bridge BR --ovs-rundir DIR --lock-path DIR --socket PATH --pidfile PATH

With ``--driver openvswitch`` (the OVS agent's firewall) the driver programs bridge BR of
the host's own OVS: its database is ``DIR/db.sock``, and ovs-ofctl finds the bridge's
management socket in DIR (``OVS_RUNDIR``), so nothing reaches another host's OVS.

It serves a Unix socket (a file: reachable from any namespace): a connection sends one
JSON command on one line and reads one JSON reply. Commands, one at a time:

    {"op": "prepare", "payload": P}              ports of P filtered (agent start)
    {"op": "prepare", "payload": P, "devices": [port id, ...]}   those only (a port plugged)
    {"op": "rules_updated", "payload": P, "groups": [id, ...]}
    {"op": "members_updated", "payload": P, "groups": [id, ...]}
    {"op": "remove", "devices": [port id, ...]}
    {"op": "ovs_restarted", "payload": P}        the host's ovs-vswitchd restarted
    -> {"ok": true, "seconds": 0.0123} | {"ok": false, "error": "..."}

P is the reply of Neutron's ``security_group_info_for_devices`` RPC
(vnetbench.kinds.neutron.sg.payload); an update replaces it, and the agent refreshes as
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


def _ovs_bridge(name: str, ovs_rundir: str):
    """The integration bridge the OVS firewall driver programs: Neutron's own
    ``ovs_lib.OVSBridge`` (ovs-ofctl for flows, OVSDB through ovsdbapp) with the cookie
    bookkeeping its agent mixes in (``update_cookie_context`` asks for a cookie)."""
    from neutron.agent.common import ovs_lib
    from neutron.plugins.ml2.drivers.openvswitch.agent.openflow import br_cookie

    class IntegrationBridge(br_cookie.OVSBridgeCookieMixin, ovs_lib.OVSBridge):
        pass
    return IntegrationBridge(name, datapath_type="netdev")


def _configure(driver: str, lock_path: str, ovs_rundir: str | None = None) -> None:
    from oslo_concurrency import lockutils
    from oslo_config import cfg

    from neutron.conf.agent import common as agent_conf
    from neutron.conf.agent import securitygroups_rpc as sg_conf
    from neutron.conf.agent.database import agents_db
    agent_conf.register_root_helper(cfg.CONF)
    agent_conf.register_iptables_opts(cfg.CONF)
    sg_conf.register_securitygroups_opts(cfg.CONF)
    agents_db.register_db_agents_opts(cfg.CONF)
    if ovs_rundir:
        from neutron.conf.agent import ovsdb_api
        from neutron.conf.plugins.ml2.drivers import ovs_conf
        ovs_conf.register_ovs_agent_opts(cfg.CONF)
        ovsdb_api.register_ovsdb_api_opts(cfg.CONF)
    cfg.CONF([], project="neutron", default_config_files=[])
    if ovs_rundir:
        cfg.CONF.set_override("ovsdb_connection", f"unix:{ovs_rundir}/db.sock", "OVS")
    cfg.CONF.set_override("firewall_driver", driver, "SECURITYGROUP")
    cfg.CONF.set_override("enable_security_group", True, "SECURITYGROUP")
    cfg.CONF.set_override("enable_ipset", True, "SECURITYGROUP")
    cfg.CONF.set_override("root_helper", "", "AGENT")       # root already, in the host's namespace
    lockutils.set_defaults(lock_path)   # Neutron's iptables and ipset locks: the run's, not the machine's


def _privileged_in_process() -> None:
    """Neutron's privileged calls (oslo.privsep) run in this process, not in a privsep
    daemon: the agent is root already, in its host's namespace, and a daemon that sudo
    starts would lose ``OVS_RUNDIR`` (ovs-ofctl would look for another OVS) and be a
    process nobody journaled."""
    from oslo_privsep import priv_context

    import neutron.privileged as privileged
    for ctx in vars(privileged).values():
        if isinstance(ctx, priv_context.PrivContext):
            ctx.set_client_mode(False)


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
            agent.prepare_devices_filter(list(cmd.get("devices") or _all(rpc.payload)))
        elif op == "rules_updated":
            agent.security_groups_rule_updated(cmd["groups"])
        elif op == "members_updated":
            agent.security_groups_member_updated(cmd["groups"])
        elif op == "remove":
            agent.remove_devices_filter(cmd["devices"])
        elif op == "ovs_restarted":
            _ovs_restarted(agent, rpc)
        else:
            raise ValueError(f"unknown op {op!r}")
        return {"ok": True, "seconds": round(time.monotonic() - t0, 6)}
    except Exception as exc:            # one reply per command; the agent goes on
        return {"ok": False, "error": f"{type(exc).__name__}: {_text(exc)}"[:2000]}


def _ovs_restarted(agent, rpc) -> None:
    """What Neutron's OVS agent does when its OVS restarted (``_handle_ovs_restart``): it
    publishes OVS_RESTARTED, on which the OVS firewall driver forgets its ports and puts
    its base flows back (``_init_firewall_callback``), and its polling then reports every
    port as added, so each is filtered again (``setup_port_filters``)."""
    from neutron_lib.callbacks import events, registry, resources
    registry.publish(resources.AGENT, events.OVS_RESTARTED, agent)
    agent.prepare_devices_filter(_all(rpc.payload))


def _all(payload) -> list:
    """Every device the agent asks the server about: its VMs' ports and its routers' (which
    the reply leaves out: ``prepare_devices_filter`` then treats them as trusted)."""
    return [*payload["devices"], *payload.get("trusted", ())]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", default="iptables", help="neutron firewall_driver (iptables, ...)")
    ap.add_argument("--binary", default="neutron-linuxbridge-agent",
                    help="the agent program name Neutron's chain names come from")
    ap.add_argument("--lock-path", required=True, help="directory of Neutron's lock files (the run's)")
    ap.add_argument("--bridge", help="openvswitch: the integration bridge the driver programs")
    ap.add_argument("--ovs-rundir", help="openvswitch: the host's OVS run directory (db.sock, <bridge>.mgmt)")
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
    if args.ovs_rundir:       # ovs-ofctl, ovs-vsctl, ovs-appctl: this host's OVS only
        for var in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"):
            os.environ[var] = args.ovs_rundir
    _configure(driver, args.lock_path, args.ovs_rundir)
    _privileged_in_process()
    from neutron.agent import securitygroups_rpc
    rpc = _PluginRpc()
    bridge = None
    if driver == "openvswitch":
        bridge = _ovs_bridge(args.bridge, args.ovs_rundir)
        # Neutron retries a driver whose constructor raised TypeError without the bridge,
        # which hides the first error: build it once here so a failure says what it is
        from neutron.agent import firewall
        from neutron_lib.callbacks import events, registry, resources
        probe = firewall.load_firewall_driver_class(driver)(integration_bridge=bridge)
        registry.unsubscribe(probe._init_firewall_callback, resources.AGENT,
                             events.OVS_RESTARTED)      # only the agent's driver answers it
    agent = securitygroups_rpc.SecurityGroupAgentRpc(context=None, plugin_rpc=rpc,
                                                     integration_bridge=bridge)
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
