"""``vrouter``: the OpenContrail vRouter model on OVS's userspace datapath.

Per host: one OVS bridge (OpenFlow 1.3, ``fail_mode`` secure) whose only controller
is the host's vRouter agent (``vnetbench.kinds.vrouter.agent``, on the host
namespace's loopback); VM ports are plain ports; one L3 GRE port per peer host
(``packet_type=legacy_l3``: MPLS over GRE, no inner Ethernet) whose endpoint is the
underlay address on the second bridge, as for ``ovs``. One control node
(``vnetbench.kinds.vrouter.control_node``) in the controller namespace distributes the routes
the agents announce over the management network. Every process is journaled by
its run-unique ``--pidfile=`` argument before it starts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from vnetbench.errors import BuildError
from vnetbench.linux import nsops, proc
from vnetbench.testbed.netns import mgmt
from vnetbench.testbed.deployment import CONTROLLER_DIR
from vnetbench.kinds.ovs.netns import (  # noqa: F401  (tunnel_neighbours: the driver uses it here)
    OvsHost, _bridge, _port, address_underlays, qos_columns, start_host, tunnel_neighbours,
)
from vnetbench.kinds.vrouter import northsouth

CONTROL_PORT = 5269              # XMPP's client port, which Contrail agents use
AGENT_OF = "127.0.0.1:6653"     # the agent's OpenFlow listener, inside its host namespace
READY_TIMEOUT_S = 45.0          # generous: a loaded 2-CPU machine starts Python slowly
CONTROL_NODE = "control-node"
#: TCP send buffers in a host's namespace (min default max): the switch's side of its
#: connection to the agent, where packet-ins wait for the agent. The real vRouter hands
#: new flows to its agent through a bounded ring (pkt0) and drops beyond it; left to TCP's
#: autotuning, ovs-vswitchd queued up to 2.5 MB of packet-ins here and the agent went on
#: setting up flows 10-18 s after a 1 s load at 10,000/s had ended, under the next
#: measurement. 128 KiB here and the agent's 32 KiB receive buffer (64 KiB as the kernel
#: doubles it) hold about 1.4 s of set-ups: longer than flowgen's 1 s deadline, so nothing
#: the agent could still set up in time is dropped (bench_vrouter: 800/s without loss,
#: 400/s before), and the backlog after that load lasts 1.2 s (docs/sdn.md). The host
#: namespace carries no tenant TCP.
PACKET_IN_WMEM = "4096 16384 131072"


def ctl_dir(run_dir: Path) -> Path:
    return run_dir / CONTROLLER_DIR


AGENT = "contrail-vrouter-agent"     # per host, in the host's run directory (like its OVS)


def agent_state(run_dir: Path, host: str) -> Path:
    return run_dir / host / f"{AGENT}.json"


def agent_config(ctx, host) -> dict:
    """What the agent is told about its host (Nova/Neutron's part in Contrail)."""
    tb, n = ctx.testbed, ctx.names
    ifaces = {}
    for vm_i, vm in enumerate(tb.vms):
        for k, nic in enumerate(vm.nics):
            egress = [nic.qos.max_kbps, nic.qos.max_burst_kbits] if nic.qos and nic.qos.egress else None
            ifaces[n.vm_port(vm_i, k)] = {"port": n.vm_port(vm_i, k), "vm": vm.name, "vnet": nic.vnet,
                                         "mac": nic.mac, "ip": str(nic.ip),
                                         "prefixlen": tb.vnet(nic.vnet).cidr.prefixlen,
                                         "egress": egress, "port_security": nic.port_security,
                                         "groups": list(nic.security_groups)}
    for si in northsouth.si_ifaces(tb, n):        # the SNAT service instances' interfaces
        ifaces[si["port"]] = {k: v for k, v in si.items() if k != "host"}
    tunnels = {str(p.underlay_ip): n.gre_port(ctx.host_index(p.name))
               for p in tb.hosts if p.name != host.name}
    return {"host": host.name, "underlay_ip": str(host.underlay_ip),
            "tenant_mtu": tb.network.tenant_mtu,
            "options": {**tb.vswitch.options.__dict__},
            "vnets": northsouth.vrf_names(tb),
            "cidrs": {**{v.name: str(v.cidr) for v in tb.vnets}, **northsouth.cidrs(tb)},
            "ifaces": ifaces, "tunnels": tunnels, "security": security(tb),
            "gateways": {p.vnet: str(p.ip) for r in tb.routers for p in r.ports},
            "floating_ips": northsouth.floating_ips(tb, n),
            "gateway": northsouth.gateway(tb, n, host.name)}


def security(tb) -> dict:
    """The security groups as the agent gets them: every group's rules, and the members'
    addresses that ``remote_group`` rules match (Contrail's agent learns them as the
    groups' tags; membership does not change on a running testbed)."""
    from vnetbench.testbed import secgroups
    from vnetbench.testbed.codec import rule_to_dict
    return {"groups": {g.name: [rule_to_dict(r) for r in g.rules] for g in tb.security_groups},
            "members": {g.name: sorted(str(ip) for ip in secgroups.members(tb, g.name))
                        for g in tb.security_groups}}


def config_socket(run_dir: Path) -> Path:
    return ctl_dir(run_dir) / "config.sock"


def push_security(dep, timeout: float = 10.0) -> dict:
    """The testbed's security groups sent to the control node, which sends them to every
    agent (Contrail's API server -> control node -> agents); returns the node's
    acknowledgement, once it has sent them on -- as Neutron's API returns once stored."""
    from vnetbench import unixsock
    msg = {"type": "config", "security": security(dep.testbed), "generation": time.time()}
    try:
        reply = unixsock.request(config_socket(dep.run.dir), msg, timeout) or {}
    except (OSError, ValueError) as e:
        raise BuildError(f"vrouter: the control node of run {dep.run_id} took no configuration "
                         f"({e}); is it running? (vnetbench testbed status)") from e
    if not reply.get("ok"):
        raise BuildError(f"vrouter: the control node of run {dep.run_id} refused the security "
                         f"groups: {reply.get('error', reply)}")
    return reply


def expected_routes(testbed, host: str, removed=()) -> int:
    """Routes an agent learns once every other agent announced: a route per remote VM
    interface and a broadcast route per (remote host, vnet it has), with what north-south
    adds (``northsouth.announced``: SNAT service instances, floating IPs, the SDN
    gateway's default); and a route per VM interface (its own host's too) in each other
    VRF a router joins its vnet to (the control node's leaks; ``removed``: router
    interfaces taken out since bring-up)."""
    from vnetbench.kinds.vrouter.control_node import joined
    links = joined(routing_groups(testbed, removed))
    extra = {h.name: northsouth.announced(testbed, h.name) for h in testbed.hosts}
    vm_routes = {h.name: [nic.vnet for vm in testbed.vms_on(h.name) for nic in vm.nics]
                 + [v for kind, v in extra[h.name] if kind == "vm"]
                 for h in testbed.hosts}
    leaks = sum(len(links.get(vnet, ())) for vnets in vm_routes.values() for vnet in vnets)
    return leaks + sum(len(vm_routes[h.name]) + len(testbed.vnets_on(h.name))
                       + sum(kind == "bcast" for kind, _ in extra[h.name])
                       for h in testbed.hosts if h.name != host)


def routing_groups(testbed, removed=()) -> list[list[str]]:
    """The vnets each router joins (the control node leaks routes among them), without the
    interfaces in ``removed`` ([router, vnet] pairs: ``Deployment.remove_router_interface``)."""
    gone = {tuple(x) for x in removed}
    snat = {r.name for _, r in northsouth.snat_routers(testbed)}
    return [[p.vnet for p in r.ports if (r.name, p.vnet) not in gone]
            + ([northsouth.left_vn(r.name)] if r.name in snat else []) for r in testbed.routers]


def removed_interfaces(run_dir: Path) -> list:
    """Router interfaces the run removed since bring-up ([router, vnet] pairs its meta
    records: ``Deployment.remove_router_interface``)."""
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
    except (OSError, ValueError):
        return []
    return meta.get("removed_router_interfaces", []) if isinstance(meta, dict) else []


def remove_router_interface(dep, router, vnet: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Neutron's remove_router_interface as Contrail's API server passes it on: the
    control node gets the router's vnets without VNET and withdraws the routes it leaked
    between VNET's VRF and the others; returns once every agent holds the routes left."""
    from vnetbench import unixsock
    removed = [*removed_interfaces(dep.run.dir), [router.name, vnet]]
    msg = {"type": "config", "routers": routing_groups(dep.testbed, removed)}
    try:
        reply = unixsock.request(config_socket(dep.run.dir), msg, timeout) or {}
    except (OSError, ValueError) as e:
        raise BuildError(f"vrouter: the control node of run {dep.run_id} took no routers ({e}); "
                         "is it running? (vnetbench testbed status)") from e
    if not reply.get("ok"):
        raise BuildError(f"vrouter: the control node of run {dep.run_id} refused the routers: "
                         f"{reply.get('error', reply)}")
    wait_converged(dep.run.dir, dep.testbed, timeout, key="programmed", removed=removed)


def _spawn(run, ns: str, d: Path, name: str, owner: str, argv_tail: list) -> None:
    proc.python_daemon(run, ns, d, name, owner, argv_tail)


def start_control_node(run, names, testbed) -> None:
    _spawn(run, names.ctl_ns, ctl_dir(run.dir), "contrail-control", "controller",
           ["vnetbench.kinds.vrouter.control_node", f"--listen=0.0.0.0:{CONTROL_PORT}",
            f"--hold-time={testbed.vswitch.options.hold_time}",
            f"--config-socket={config_socket(run.dir)}",
            f"--routers={json.dumps(routing_groups(testbed, removed_interfaces(run.dir)))}"])


def start(ctx) -> None:
    """Control node and agents as soon as the namespaces exist (importing os-ken takes
    about a second, which overlaps the rest of the bring-up)."""
    tb, n = ctx.testbed, ctx.names
    ctl_dir(ctx.run.dir).mkdir(parents=True, mode=0o700, exist_ok=True)
    for host in tb.hosts:       # before OVS connects to its agent: the packet-in path's bound
        nsops.sysctl(n.host_ns(host.name), "net/ipv4/tcp_wmem", PACKET_IN_WMEM)
    start_control_node(ctx.run, n, tb)
    control = f"{mgmt.controller_ip(tb)}:{CONTROL_PORT}"
    for host in tb.hosts:
        d = ctx.run.dir / host.name
        d.mkdir(mode=0o700, exist_ok=True)
        cfg = d / f"{AGENT}.config.json"
        cfg.write_text(json.dumps(agent_config(ctx, host), indent=1))
        _spawn(ctx.run, n.host_ns(host.name), d, AGENT, host.name,
               ["vnetbench.kinds.vrouter.agent", f"--config={cfg}", f"--listen={AGENT_OF}",
                f"--control={control}", f"--state={agent_state(ctx.run.dir, host.name)}"])


def wire(ctx) -> None:
    """The hosts' bridges; returns once every agent programmed its bridge and learned
    every other host's routes from the control node."""
    tb = ctx.testbed
    hosts = [VRouterHost(ctx, h) for h in tb.hosts]
    snat_instances(ctx)                 # their ports are the vRouters' from the start
    proc.parallel([lambda o=o: start_host(ctx, o) for o in hosts])
    address_underlays(ctx, hosts)
    wait_converged(ctx.run.dir, tb)
    for o in hosts:                     # the agents' 1 s backoff as configured
        o.controller_settings_in_force()


def agent_status(run_dir: Path, host: str) -> dict:
    try:
        return json.loads(agent_state(run_dir, host).read_text())
    except (OSError, ValueError):
        return {}


def _converged(run_dir: Path, testbed, host: str, since: float, key: str, removed) -> bool:
    st = agent_status(run_dir, host)
    return (st.get(key, -1) >= since and st.get("programmed", -1) >= 0
            and st.get("learned") == expected_routes(testbed, host, removed))


def wait_converged(run_dir: Path, testbed, timeout=READY_TIMEOUT_S, since: float = 0.0,
                   key: str = "synced", hosts=None, removed=None) -> None:
    """Every agent (of ``hosts``, default all) programmed its bridge and holds every
    other host's routes; ``key`` (``synced``: a full table from the control node,
    ``programmed``: its bridge) at or after ``since`` (Unix time). ``removed``: the
    router interfaces taken out (default: those the run's meta records)."""
    deadline = time.monotonic() + timeout
    names = hosts or [h.name for h in testbed.hosts]
    if removed is None:
        removed = removed_interfaces(run_dir)
    while True:
        waiting = [h for h in names if not _converged(run_dir, testbed, h, since, key, removed)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            first = waiting[0]
            raise BuildError(f"vrouter: agents of {', '.join(waiting)} not programmed or not in step "
                             f"with the control node after {timeout:.0f} s (state {agent_status(run_dir, first)}, "
                             f"expected {expected_routes(testbed, first, removed)} routes; "
                             f"{proc.python_daemon_report(run_dir / first, AGENT)})")
        time.sleep(0.02)


#: an agent is quiet when its counters have not moved for this long (it writes its status
#: file at most 50 ms after a set-up, app.STATUS_S)
QUIET_S = 0.25


def wait_quiet(run_dir: Path, testbed, timeout: float, now=time.time, sleep=time.sleep) -> float:
    """Until every agent's status (``t``: when its counters last changed) is QUIET_S old,
    or ``timeout``; the seconds waited (0 when they already were)."""
    start = now()
    while True:
        last = max((agent_status(run_dir, h.name).get("t", 0.0) for h in testbed.hosts), default=0.0)
        idle_for = now() - last
        if idle_for >= QUIET_S or now() - start >= timeout:
            return now() - start
        sleep(min(QUIET_S - idle_for, max(0.0, timeout - (now() - start))) + 0.01)


class VRouterHost(OvsHost):
    """An OVS host whose bridge belongs to its vRouter agent (no flows of its own)."""

    def configure(self, datapath: str) -> None:
        self.apply(datapath)

    def afxdp_columns(self, tx: list[str]) -> list[str]:
        """AF_XDP for north-south's ports too (the SDN gateway's external link, the SNAT
        service instances' NICs), as for every veth of the host: left to AF_PACKET they were
        read by ovs-vswitchd's main thread beside the PMD's ports, and TCP into a floating
        IP met reordered segments (a fifth of them retransmitted)."""
        names, tb = self.ctx.names, self.ctx.testbed
        mine = {si["port"] for si in northsouth.si_ifaces(tb, names) if si["host"] == self.host.name}
        if northsouth.gateway_host(tb) == self.host.name:
            mine.add(names.ext_uplink)
        added = {tx[i + 2] for i, arg in enumerate(tx[:-2]) if arg == "add-port"}
        out = super().afxdp_columns(tx)
        for port in sorted(mine & added):
            out += ["--", "set", "Interface", port, "type=afxdp"]
        return out

    def _transaction(self, datapath: str) -> list[str]:
        ctx, host = self.ctx, self.host
        tb, names = ctx.testbed, ctx.names
        own = f"external_ids:vnetbench-run={ctx.run.run_id}"
        br = names.ovs_int
        tx = self._open_vswitch()
        tx += _bridge(br, datapath, own)
        tx += ["--", "set", "Bridge", br, "fail_mode=secure", "protocols=OpenFlow13",
               "other_config:disable-in-band=true",
               "--", "--id=@c", "create", "Controller", f"target=\"tcp:{AGENT_OF}\"",
               "max_backoff=1000", "connection_mode=out-of-band", own,
               "--", "set", "Bridge", br, "controller=@c"]
        for vnet in tb.vnets_on(host.name):
            for port in ctx.vm_ports(host.name, vnet.name):
                tx += _port(br, port, own)
        for peer in tb.hosts:
            if peer.name != host.name:
                gre = names.gre_port(ctx.host_index(peer.name))
                tx += _port(br, gre, own)
                tx += ["--", "set", "Interface", gre, "type=gre", "options:packet_type=legacy_l3",
                       f"options:remote_ip={peer.underlay_ip}", f"options:local_ip={host.underlay_ip}"]
        for si in northsouth.si_ifaces(tb, names):
            if si["host"] == host.name:
                tx += _port(br, si["port"], own)
        if northsouth.gateway_host(tb) == host.name:     # the SDN gateway's external port
            tx += _port(br, names.ext_uplink, own)
        for i, (port, qos) in enumerate(ctx.qos_ports(host.name)):
            if not qos.egress:     # egress: the agent's meter on what the VM sends
                tx += qos_columns(port, i, qos, own)
        tx += _bridge(names.ovs_phy, datapath, own)
        tx += ["--", "set", "Interface", names.ovs_phy, f"mtu_request={tb.network.underlay_mtu}"]
        tx += _port(names.ovs_phy, names.uplink, own)
        return tx + flow_aging(tb, datapath)


#: the connection tracker's states a vRouter flow's idle ageing stands for (the
#: handshake and closing states keep conntrack's own timeouts)
AGED_STATES = ("tcp_established", "udp_first", "udp_single", "udp_multiple", "icmp_first", "icmp_reply")


def flow_aging(tb, datapath: str) -> list[str]:
    """``flow_setup: datapath``: Contrail's flow ageing (``flow_idle_timeout``) as the
    timeout policy of every VRF's conntrack zone (zone = VRF id, 1..n as the agent numbers
    them); 0 (never aged) keeps conntrack's defaults."""
    opts = tb.vswitch.options
    if opts.flow_setup != "datapath" or not opts.flow_idle_timeout:
        return []
    timeouts = ",".join(f"{s}={opts.flow_idle_timeout}" for s in AGED_STATES)
    tx = ["--", "--id=@tp", "create", "CT_Timeout_Policy", f"timeouts={{{timeouts}}}"]
    zones = []
    for vrf in range(1, len(northsouth.vrf_names(tb)) + 1):
        tx += ["--", f"--id=@z{vrf}", "create", "CT_Zone", "timeout_policy=@tp"]
        zones.append(f"{vrf}=@z{vrf}")
    return tx + ["--", "--id=@dp", "create", "Datapath", "datapath_version=0",
                 f"ct_zones={{{','.join(zones)}}}", "--", "set", "Open_vSwitch", ".",
                 f"datapaths:{datapath}=@dp"]


# -- faults (vnetbench.faults drives these) ---------------------------------------

def components(dep) -> list[str]:
    return [CONTROL_NODE]


def _pidfile(dep) -> Path:
    return ctl_dir(dep.run.dir) / "contrail-control.pid"


def control_pid(dep) -> int | None:
    pf = _pidfile(dep)
    try:
        pid = int(pf.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if f"--pidfile={pf}" in proc.argv(pid) else None


def stop(dep, name: str = CONTROL_NODE, graceful: bool = True) -> None:
    """SIGTERM (the node withdraws its routes from every agent) or SIGKILL."""
    pf = _pidfile(dep)
    pid = control_pid(dep)
    if pid and not proc.stop(pid, lambda p: f"--pidfile={pf}" in proc.argv(p),
                             grace=2.0, hard=not graceful):
        raise BuildError(f"control node (pid {pid}) of run {dep.run_id} did not exit")
    pf.unlink(missing_ok=True)


def start_node(dep, name: str = CONTROL_NODE, timeout: float = READY_TIMEOUT_S) -> None:
    """Start the control node again; returns once every agent is back in step."""
    if control_pid(dep):
        return
    since = time.time()
    start_control_node(dep.run, dep.names, dep.testbed)
    wait_converged(dep.run.dir, dep.testbed, timeout, since=since)


def expire_flows(dep) -> None:
    """Delete every host's flows: the agents' reactive 5-tuple entries (cookie-matched)
    and the datapath's connections (``flow_setup: datapath``): the state their idle
    timeout leaves, without waiting."""
    from vnetbench.kinds.vrouter.logic import COOKIE_FLOW
    for h in dep.testbed.hosts:
        sock = dep.host_file(h.name, f"{dep.names.ovs_int}.mgmt")
        proc.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", f"unix:{sock}",
                  f"cookie={COOKIE_FLOW:#x}/-1"], what=f"ovs-ofctl del-flows on {h.name}")
        proc.run(["ovs-appctl", "-t", str(dep.host_file(h.name, "ovs-vswitchd.ctl")),
                  "dpctl/flush-conntrack"], what=f"ovs-appctl dpctl/flush-conntrack on {h.name}")


def tracked_flows(dep, host: str) -> int:
    """Connections in HOST's datapath connection tracker (``flow_setup: datapath``'s
    flow table; conntrack counts a connection once, both directions)."""
    out = proc.run(["ovs-appctl", "-t", str(dep.host_file(host, "ovs-vswitchd.ctl")),
                    "dpctl/ct-stats-show"], what=f"ovs-appctl dpctl/ct-stats-show on {host}")
    return int(out.split("Total:")[1].split()[0]) if "Total:" in out else 0


# -- north-south: the SNAT service instances (``northsouth``) ------------------------

#: Contrail's netns SNAT (vrouter_netns.py ``set_snat``): its policy-routing table for what
#: comes back in by the right interface
SNAT_TABLE = 42


def snat_instances(ctx) -> None:
    """Each SNAT service instance's namespace on its router's host (journaled before it
    exists; ``Deployment.exec`` takes the router's name there), its left and right NICs
    veths whose host ends become ports of the host's vRouter; then what Contrail's
    ``vrouter_netns.py`` sets in it (``set_snat``): forwarding, MASQUERADE out of the
    right NIC, the default route out of it, and what comes back in by the right NIC routed
    out of the left one (its own table). The left NIC has no address: the vRouter answers
    every ARP on it and routes by its VRF (the router's VNs' routes leaked there)."""
    from vnetbench.linux import links, nlbatch, offloads
    tb, n = ctx.testbed, ctx.names
    ext = tb.external
    for ri, r in northsouth.snat_routers(tb):
        sns, hns = n.vm_ns(r.name), n.host_ns(r.host)
        ctx.run.record("netns", name=sns)
        nsops.create(sns, then=nlbatch.Batch(sns).set("lo up", index=1, up=True).send_here)
        sides = [(dev, n.si_port(ri, side), mac, n.alias(f"router={r.name} SNAT service instance {dev}"))
                 for dev, side, mac in ((northsouth.LEFT_DEV, "l", r.ports[0].mac),
                                        (northsouth.RIGHT_DEV, "r", r.gateway_mac))]
        with nsops.rtnl(sns) as ns:
            for dev, port, mac, alias in sides:
                links.veth(ns, dev, port, hns, tb.network.tenant_mtu, alias)
                links.stamp(ns, dev, alias)
                ns.link("set", index=links.index(ns, dev), address=mac)
        with nsops.rtnl(hns) as ns:
            for _, port, _, alias in sides:
                links.stamp(ns, port, alias)
                links.up(ns, port)
        offloads.off(hns, [(port, ("tx",)) for _, port, _, _ in sides])
        offloads.off(sns, [(dev, ("tx",)) for dev, _, _, _ in sides])
        nsops.sysctl(sns, "net/ipv4/ip_forward", "1")
        for dev, _, _, _ in sides:
            nsops.sysctl(sns, f"net/ipv4/conf/{dev}/rp_filter", "2")
        with nsops.rtnl(sns) as ns:
            left, right = links.index(ns, northsouth.LEFT_DEV), links.index(ns, northsouth.RIGHT_DEV)
            links.address(ns, northsouth.RIGHT_DEV, r.gateway, ext.cidr.prefixlen)
            links.up(ns, northsouth.LEFT_DEV)
            links.up(ns, northsouth.RIGHT_DEV)
            ns.route("add", dst="0.0.0.0/0", oif=right)
            for p in r.ports:
                ns.route("add", dst=str(tb.vnet(p.vnet).cidr), oif=left)
            ns.route("add", dst="0.0.0.0/0", oif=left, table=SNAT_TABLE)
            ns.rule("add", iifname=northsouth.RIGHT_DEV, table=SNAT_TABLE, priority=1000)
        proc.run(proc.in_netns(sns, ["iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "0.0.0.0/0",
                                     "-o", northsouth.RIGHT_DEV, "-j", "MASQUERADE"]),
                 what=f"iptables MASQUERADE in router {r.name}'s SNAT service instance")
