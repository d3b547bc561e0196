"""Open vSwitch: one private ovsdb-server + ovs-vswitchd per emulated host.

Each host gets its own run directory (database, sockets, pidfiles, logs), so
several hosts and several testbeds never share a daemon. Without the kernel
module the userspace ``netdev`` datapath is used; it needs TX checksum offload
off on the veths it touches (REFERENCE §4); where the kernel has XDP sockets it reads
them through AF_XDP (``afxdp_columns``: faster and lower-latency than AF_PACKET here).
VM ports are access ports tagged with the vnet's local VLAN; tunnel ports carry the
segmentation id as their key and are ``protected`` so a full mesh of tunnels never
floods back (split horizon).
A VM port's bandwidth limit is a linux-htb QoS on the port (this kernel has no tc
``police``, so OVS ingress policing cannot work; HTB shapes what OVS sends to the VM).
An egress limit is an OpenFlow meter, which an ovs-vswitchd restart loses: the host's
agent (``vnetbench.kinds.ovs.agent``) re-provisions it, as neutron's OVS agent does.
"""

from __future__ import annotations

import json
import os
import time

from vnetbench.errors import BuildError
from vnetbench.kinds.ovs import agent as ovs_agent
from vnetbench.kinds.ovs import firewall, pipeline
from vnetbench.linux import links, nsops, offloads, proc
from vnetbench.testbed.model import STICK, SVI, NetType
from vnetbench.testbed.netns import veths

AGENT = "neutron-openvswitch-agent"
#: the longest an idle PMD thread sleeps (OVS 3.1 ``other_config:pmd-maxsleep``, µs): measured
#: here with AF_XDP ports, 10 µs kept an idle PMD at 30 % of its CPU, 50 µs at about 10 %
#: (docs/ovs-ports.md); 0 (busy polling) is OVS's default and holds a CPU at 100 %
PMD_MAXSLEEP_US = 50
VSWITCHD = "ovs-vswitchd"
TUNNEL_TYPE = {NetType.VXLAN: "vxlan", NetType.GRE: "gre", NetType.GENEVE: "geneve"}


def rundir_env(rundir) -> dict:
    """Environment that points OVS and OVN tools' default files into ``rundir``."""
    d = str(rundir)
    return {**os.environ, **{f"{p}_{k}": d for p in ("OVS", "OVN")
                             for k in ("RUNDIR", "LOGDIR", "DBDIR", "SYSCONFDIR")}}


def tunnel_neighbours(owner, on=None) -> None:
    """Give ovs-vswitchd of the hosts ``on`` (default: all) their peers' tunnel endpoint
    MACs. OVS's userspace tunnels resolve the outer MAC in their own neighbour cache,
    which learns only from ARP replies it sees, and drop the packet that misses it; with
    OVN or the vRouter model answering ARP on the sender's host, that packet would be the
    first unicast one (a ping's first echo, a connection's SYN), at bring-up and after a
    vSwitch restart. A ping between the hosts does not fill it on both sides: the second
    host's kernel learned the first's MAC from its request and sends no ARP. With the
    learning kinds (``ovs``, ``ovs-openflow``) the first packet is a VM's ARP request, and
    the miss cost it one of the kernel's probes a second apart: the first cross-host ping
    sent the moment a testbed was up answered after 1.00-1.06 s (9 bring-ups), against
    1 ms (ovs) and 30 ms (ovs-openflow's controller) with the cache filled; a miss each
    way costs two. The VMs' own IPv6 chatter fills it within a few seconds, so only what
    runs first saw it. A kernel datapath resolves in the kernel's neighbour table and
    loses no packet: the cache is the emulation's, so it is filled at bring-up for every
    kind. ``owner``: the builder's context or a Deployment."""
    names, hosts = owner.names, owner.testbed.hosts
    macs = {}
    for h in hosts:
        with nsops.rtnl(names.host_ns(h.name)) as ns:
            macs[h.name] = ns.get_links(links.index(ns, names.ovs_phy))[0].get_attr("IFLA_ADDRESS")
    from vnetbench_collector.datapath import unixctl
    for h in hosts:        # N x (N - 1) entries: over the socket, not an ovs-appctl each
        if on is not None and h.name not in on:
            continue
        ctl = owner.run.dir / h.name / "ovs-vswitchd.ctl"
        for peer in hosts:
            if peer is not h:
                try:
                    unixctl(ctl, "tnl/neigh/set", timeout=15,
                            params=(names.ovs_phy, str(peer.underlay_ip), macs[peer.name]))
                except OSError as exc:
                    raise BuildError(f"tnl/neigh/set on {h.name}: {exc}") from None


class OvsHost:
    """The OVS instance of one emulated host; everything it makes lives in ``rundir``."""

    def __init__(self, ctx, host):
        self.ctx, self.host = ctx, host
        self.rundir = ctx.run.dir / host.name
        self.db = f"unix:{self.rundir / 'db.sock'}"

    @property
    def env(self):
        return rundir_env(self.rundir)

    def vsctl(self, *args, timeout=15) -> str:
        return proc.run(["ovs-vsctl", f"--db={self.db}", f"--timeout={timeout}", *args],
                        env=self.env, timeout=timeout + 5, what=f"ovs-vsctl on {self.host.name}")

    def controller_settings_in_force(self) -> None:
        """Put the Controller rows' settings (max_backoff, inactivity_probe) in force in this
        host's ovs-vswitchd. OVS before 3.1.3 (Debian 12 has 3.1.0) creates a controller
        connection with its defaults (8 s maximum backoff, 5 s probe) and applies the row's
        settings only to a connection that exists when the bridge is next reconfigured
        (OVS commit 155f632e7, "connmgr: Fix ofconn configuration on vswitchd startup"): a
        write to each row's other_config is that reconfiguration, and the connection keeps
        the settings through later disconnections. Call it once the bridges have their
        controllers, and again after ovs-vswitchd restarts. Without it a bridge retried a
        restarted controller every 8 s, not every 1 s as configured."""
        uuids = self.vsctl("--bare", "--columns=_uuid", "list", "Controller").split()
        nonce = f"other_config:vnetbench-applied={time.time():.6f}"
        tx = [a for u in uuids for a in ("--", "set", "Controller", u, nonce)]
        if tx:
            self.vsctl(*tx)

    def start(self) -> None:
        self.rundir.mkdir(mode=0o700, exist_ok=True)     # vrouter's agent may be there first
        proc.run(["ovsdb-tool", "create", str(self.rundir / "conf.db")], env=self.env)
        self._daemon("ovsdb-server", [str(self.rundir / "conf.db"),
                                      f"--remote=punix:{self.rundir / 'db.sock'}"], netns=None)
        self._daemon("ovs-vswitchd", [self.db], netns=self.ctx.names.host_ns(self.host.name))

    def _daemon(self, prog: str, args, netns, **kw) -> None:
        proc.daemon(self.ctx.run, self.rundir, prog, args, netns=netns, cpus=self.host.cpus,
                    env=self.env, owner=self.host.name, **kw)

    def configure(self, datapath: str) -> None:
        """The whole host in one ovs-vsctl transaction; then egress limits as meters,
        kept by the host's agent (``start_agent``)."""
        self.apply(datapath)
        if self.ctx.testbed.port_security:
            self.pipeline_flows()
        commands = self.egress_commands()
        for args in commands:
            self.ofctl(*args)
        if commands:
            self.start_agent(commands)

    def apply(self, datapath: str) -> None:
        """The kind's transaction (``_transaction``) with the build's port type, at once: a
        port never changes type under a controller that has seen it."""
        tx = self._transaction(datapath)
        if self.ctx.ports == "afxdp" and not self.host.light:    # a light chassis: no PMD thread
            tx += self.afxdp_columns(tx)
        self.vsctl(*tx)

    def afxdp_columns(self, tx: list[str]) -> list[str]:
        """AF_XDP for every veth the transaction TX adds (VM ports, physnets, the uplink) but
        a VM port with an ingress limit: linux-htb shapes in the kernel's qdisc, which
        AF_XDP's transmit bypasses. The host's PMD thread(s) run on its own CPUs and sleep
        up to PMD_MAXSLEEP_US when idle (without it a PMD spins one CPU at 100 % for ever)."""
        ctx, names, host = self.ctx, self.ctx.names, self.host
        shaped = {port for port, qos in ctx.qos_ports(host.name) if not qos.egress}
        ours = {v.name for v in veths.host_veths(ctx.testbed, names, host.name)}
        added = [tx[i + 2] for i, arg in enumerate(tx[:-2]) if arg == "add-port"]
        out = ["--", "set", "Open_vSwitch", ".", f"other_config:pmd-cpu-mask={cpu_mask(host.cpus)}",
               f"other_config:pmd-maxsleep={PMD_MAXSLEEP_US}"]
        for port in added:
            if port in ours and port not in shaped:
                out += ["--", "set", "Interface", port, "type=afxdp"]
        return out

    def pipeline_flows(self) -> None:
        """Neutron's OVS agent's own flows (``firewall.flows``: the integration bridge's
        tables, the tunnel bridge), before its firewall driver adds the port filters."""
        tb = self.ctx.testbed
        lvid = lambda vnet: local_vlan(tb, vnet, self.ctx.vnet_index(vnet.name))   # noqa: E731
        for bridge, flows in firewall.flows(self.ctx, self.host, lvid).items():
            path = self.rundir / f"{bridge}.flows"
            path.write_text("\n".join(flows) + "\n")
            self.ofctl("add-flows", self.bridge_target(bridge), str(path))

    def egress_commands(self) -> list[list[str]]:
        """Egress limits (what a VM sends), as ovs-ofctl arguments: an OpenFlow meter
        (kbps, drop band) and a flow ``in_port=<port> -> meter, NORMAL`` above the
        bridge's NORMAL flow; last neutron's canary flow (``ovs_agent``). None without an
        egress limit. The meters go first (a replay after a restart starts clean)."""
        sock = self.bridge_target()
        limits = [(port, qos) for port, qos in self.ctx.qos_ports(self.host.name) if qos.egress]
        if not limits:
            return []
        # with the agent's pipeline the metered packet goes on through it (the firewall)
        then = (f"goto_table:{pipeline.PACKET_RATE_LIMIT}" if self.ctx.testbed.port_security
                else "NORMAL")
        cmds = [["del-meters", sock]]
        for i, (port, qos) in enumerate(limits, start=1):
            cmds += [["add-meter", sock, f"meter={i},kbps,burst,band=type=drop,"
                      f"rate={qos.max_kbps},burst_size={qos.max_burst_kbits}"],
                     ["add-flow", sock, f"priority=100,in_port={port},actions=meter:{i},{then}"]]
        return cmds + [["add-flow", sock, ovs_agent.canary_flow()]]

    def bridge_target(self, bridge: str | None = None) -> str:
        """ovs-ofctl's way to a bridge (default: the integration bridge): its management socket."""
        return f"unix:{self.rundir / f'{bridge or self.ctx.names.ovs_int}.mgmt'}"

    def start_agent(self, commands) -> None:
        """The host's OVS agent (``vnetbench.kinds.ovs.agent``): replays ``commands`` when
        ovs-vswitchd restarted, as neutron's agent re-provisions its ports."""
        cfg = self.rundir / f"{AGENT}.config.json"
        cfg.write_text(json.dumps({"bridge": self.bridge_target(), "commands": commands}))
        proc.python_daemon(self.ctx.run, self.ctx.names.host_ns(self.host.name), self.rundir,
                           AGENT, self.host.name, ["vnetbench.kinds.ovs.agent", f"--config={cfg}"],
                           cpus=self.host.cpus)

    def ofctl(self, *args) -> str:
        return proc.run(["ovs-ofctl", "-O", "OpenFlow13", *args], env=self.env, timeout=15,
                        what=f"ovs-ofctl on {self.host.name}")

    def address_underlay(self) -> None:
        """Tunnel endpoints live on the OVS bridge's own port (userspace tunneling)."""
        if self.ctx.testbed.network.type.is_tunnel:
            names, net = self.ctx.names, self.ctx.testbed.network
            with nsops.rtnl(names.host_ns(self.host.name)) as ns:
                links.address(ns, names.ovs_phy, self.host.underlay_ip, net.underlay_cidr.prefixlen)
                links.up(ns, names.ovs_phy)

    def _open_vswitch(self, *external_ids) -> list[str]:
        """Start of the host's transaction: the Open_vSwitch row, owned and named."""
        rid, host = self.ctx.run.run_id, self.host.name
        return ["--", "init", "--", "set", "Open_vSwitch", ".", f"external_ids:vnetbench-run={rid}",
                f"external_ids:system-id={rid}-{host}", f"external_ids:hostname={host}",
                *(f"external_ids:{k}={v}" for k, v in external_ids)]

    def unwire_vnet(self, vnet) -> None:
        """Deprovision ``vnet`` here: every port of it (VMs, tunnels, physnet) leaves
        the bridge in one transaction; the VM ports' QoS rows go with them."""
        ctx, names = self.ctx, self.ctx.names
        vi = ctx.vnet_index(vnet.name)
        ports = ctx.vm_ports(self.host.name, vnet.name)
        ports += [names.tunnel_port(vi, ctx.host_index(p.name))
                  for p in ctx.peers(self.host.name, vnet.name)]
        if ctx.testbed.network.type is NetType.FLAT:
            ports.append(names.physnet(vi))
        tx = []
        for port in ports:
            tx += ["--", "--if-exists", "del-port", names.ovs_int, port]
        self.vsctl(*tx)

    def _transaction(self, datapath: str) -> list[str]:
        ctx, host = self.ctx, self.host
        tb, names, rid = ctx.testbed, ctx.names, ctx.run.run_id
        own = f"external_ids:vnetbench-run={rid}"
        tx = self._open_vswitch()
        tx += _bridge(names.ovs_int, datapath, own)
        ntype, secured, split = tb.network.type, tb.port_security, firewall.two_bridges(tb)
        if secured:     # the agent's pipeline (firewall.flows), not NORMAL alone
            tx += ["--", "set", "Bridge", names.ovs_int, "fail_mode=secure"]
        sticks = {r.name: ri for ri, r in enumerate(tb.routers) if r.routing == STICK and r.host == host.name}
        for ri in sticks.values():
            tx += _bridge(names.stick_bridge(ri), datapath, own)
        for vnet in tb.vnets_on(host.name):
            vi = ctx.vnet_index(vnet.name)
            tag = local_vlan(tb, vnet, vi)
            for vm in tb.attached_on(host.name):       # VMs and routers' ports
                for n, nic in enumerate(vm.nics):
                    if nic.vnet == vnet.name:
                        port = names.vm_port(ctx.vm_index(vm.name), n)
                        extra = firewall.port_columns(ctx, port, vm, n, nic, tag) if secured else []
                        bridge = names.stick_bridge(sticks[vm.name]) if vm.name in sticks else names.ovs_int
                        tx += _port(bridge, port, own, f"tag={tag}", *extra)
            if ntype is NetType.FLAT:
                tx += _port(names.ovs_int, names.physnet(vi), own, f"tag={tag}")
            elif ntype.is_tunnel and not split:
                tx += tunnel_ports(ctx, host, vnet, vi, names.ovs_int, own, f"tag={tag}")
        if split:
            tx += firewall.tunnel_bridge(ctx, host, datapath, own)
        tx += switch_routing(ctx, host, own)
        for i, (port, qos) in enumerate(ctx.qos_ports(host.name)):
            if not qos.egress:
                tx += qos_columns(port, i, qos, own)
        if ntype is NetType.VLAN:
            tx += _port(names.ovs_int, names.uplink, own)
        elif ntype.is_tunnel:
            tx += _bridge(names.ovs_phy, datapath, own)
            tx += ["--", "set", "Interface", names.ovs_phy, f"mtu_request={tb.network.underlay_mtu}"]
            tx += _port(names.ovs_phy, names.uplink, own)
        return tx


def switch_routing(ctx, host, own) -> list[str]:
    """Seed 000's inter-VLAN testbeds on HOST's integration bridge, as the seed's OVS
    configuration makes them (its Figures 4 and 8): per SVI router an internal port per
    vnet tagged with the vnet's local VLAN (the host's kernel routes between them:
    ``l3agent.svi``); per router on a stick a trunk port carrying its vnets' VLANs, whose
    far end is the router's one NIC. This kernel has no 802.1q devices, so that NIC's
    subinterfaces are split off by a bridge of the same vswitchd with an access port per
    tag (``Names.stick_bridge``; ``_transaction`` puts the router's ports there): tagged
    frames cross the trunk link both ways, as on the seed's wire."""
    tb, names, tx = ctx.testbed, ctx.names, []
    tags = lambda r: [local_vlan(tb, tb.vnet(p.vnet), ctx.vnet_index(p.vnet)) for p in r.ports]  # noqa: E731
    for ri, r in enumerate(tb.routers):
        if r.host != host.name:
            continue
        if r.routing == SVI:
            for k, tag in enumerate(tags(r)):
                tx += _port(names.ovs_int, names.svi(ri, k), own, f"tag={tag}")
                tx += ["--", "set", "Interface", names.svi(ri, k), "type=internal", f"mac=\"{r.ports[k].mac}\""]
        elif r.routing == STICK:
            trunks = "trunks=" + ",".join(map(str, tags(r)))
            tx += _port(names.ovs_int, names.trunk(ri), own, trunks)
            tx += _port(names.stick_bridge(ri), names.trunk_nic(ri), own, trunks)
    return tx


def local_vlan(tb, vnet, vi: int) -> int:
    """The vnet's local VLAN on a host's integration bridge: its segmentation id on a VLAN
    network (the uplink is a trunk of the bridge), else its position + 1."""
    return vnet.segmentation_id if tb.network.type is NetType.VLAN else vi + 1


def cpu_mask(cpus) -> str:
    """ovs-vswitchd's CPU mask (hex) of CPUS."""
    return hex(sum(1 << c for c in cpus))


def _bridge(name, datapath, own):
    return ["--", "--may-exist", "add-br", name,
            "--", "set", "Bridge", name, f"datapath_type={datapath}", "fail_mode=standalone", own]


def tunnel_ports(ctx, host, vnet, vi, bridge, own, *columns) -> list[str]:
    """One split-horizon tunnel port per (vnet, peer host carrying it), keyed by the
    vnet's segmentation id: the ovs-vsctl arguments."""
    tx = []
    for peer in ctx.peers(host.name, vnet.name):
        port = ctx.names.tunnel_port(vi, ctx.host_index(peer.name))
        tx += _port(bridge, port, own, *columns, "protected=true")
        tx += ["--", "set", "Interface", port, f"type={TUNNEL_TYPE[ctx.testbed.network.type]}",
               f"options:remote_ip={peer.underlay_ip}", f"options:local_ip={host.underlay_ip}",
               f"options:key={vnet.segmentation_id}", own]
    return tx


def _port(bridge, port, own, *columns):
    return ["--", "--may-exist", "add-port", bridge, port, *columns, own]


def qos_columns(port, i, qos, own):
    """linux-htb QoS on a VM port: OVS shapes what it sends to the VM (queue 0 is the
    default class, so every packet is held to max-rate)."""
    rate, burst = str(qos.max_kbps * 1000), str(qos.max_burst_kbits * 1000)
    return ["--", "set", "Port", port, f"qos=@qos{i}",
            "--", f"--id=@qos{i}", "create", "QoS", "type=linux-htb",
            f"other_config:max-rate={rate}", f"queues:0=@queue{i}", own,
            "--", f"--id=@queue{i}", "create", "Queue", f"other_config:max-rate={rate}",
            f"other_config:burst={burst}", own]


def wire(ctx) -> None:
    """Every host's OVS daemons start in parallel (subprocesses only); netlink work stays
    on this thread."""
    hosts = [OvsHost(ctx, h) for h in ctx.testbed.hosts]
    proc.parallel([lambda o=o: start_host(ctx, o) for o in hosts])
    address_underlays(ctx, hosts)


def address_underlays(ctx, hosts) -> None:
    """Each host's tunnel endpoint on its bridge, then (tunnel networks) every host's
    tunnel neighbour cache filled with its peers' (``tunnel_neighbours``): the step
    after the daemons start, for every OVS-based kind."""
    for o in hosts:
        o.address_underlay()
    if ctx.testbed.network.type.is_tunnel:
        tunnel_neighbours(ctx)


def start_host(ctx, ovs: OvsHost) -> None:
    ovs.start()
    if ctx.datapath == "netdev":
        offloads_off(ctx, ovs.host, afxdp=ctx.ports == "afxdp" and not ovs.host.light)
    ovs.configure(ctx.datapath)


def offloads_off(ctx, host, afxdp: bool) -> None:
    """The userspace datapath forwards packets whose checksum the kernel left to
    'hardware': TX checksum offload off on every veth end it touches. With AF_XDP ports
    also TX VLAN offload on their peers (the VMs' NICs, the fabric's ends): XDP sees the
    frame only, and a tag the peer's kernel left in the packet's metadata was lost
    (measured: no VLAN-tagged frame crossed a host until it was off). One thread per
    namespace, the ioctl per device (``offloads``)."""
    n = ctx.names
    peer = ("txvlan",) if afxdp else ()
    by_ns: dict[str, list] = {n.host_ns(host.name): []}
    for v in veths.host_veths(ctx.testbed, n, host.name):
        by_ns[n.host_ns(host.name)].append((v.name, ("tx",)))
        far = ("tx", *peer) if v.role in (veths.VM_NIC, veths.TRUNK) else peer   # OVS's own too
        by_ns.setdefault(v.peer_ns, []).append((v.peer, far))
    for ns, devices in by_ns.items():
        offloads.off(ns, devices)


def host_of(dep, host) -> OvsHost:
    """HOST's OVS of a running testbed (no build context needed)."""
    from types import SimpleNamespace
    return OvsHost(SimpleNamespace(run=dep.run, names=dep.names, testbed=dep.testbed), host)


def restart_vswitchd(dep, host) -> None:
    """SIGTERM to the run's ovs-vswitchd of HOST (proved ours by its pidfile argument),
    started again on the same database; the userspace datapath recreates the bridge's
    internal port, so the host's tunnel endpoint address is put back."""
    from vnetbench.errors import VnetbenchError
    ovs = host_of(dep, host)
    pidfile = ovs.rundir / f"{VSWITCHD}.pid"
    mark = f"--pidfile={pidfile}"
    ours = lambda p: mark in proc.cmdline(p).split()   # noqa: E731
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = None
    if pid and ours(pid) and not proc.stop(pid, ours, grace=5.0):
        raise VnetbenchError(f"{VSWITCHD} of {host.name} (pid {pid}) did not exit")
    ovs._daemon(VSWITCHD, [ovs.db], netns=dep.names.host_ns(host.name))
    _readdress(dep, host)


def _readdress(dep, host) -> None:
    """Put the tunnel endpoint back on the re-created bridge port (if this host has one)."""
    import time
    from vnetbench.errors import VnetbenchError
    names, net = dep.names, dep.testbed.network
    if not net.type.is_tunnel:
        return
    with nsops.rtnl(names.host_ns(host.name)) as ns:
        deadline = time.monotonic() + 10
        while not ns.link_lookup(ifname=names.ovs_phy):
            if time.monotonic() > deadline:
                raise VnetbenchError(f"{names.ovs_phy} did not come back on {host.name}")
            time.sleep(0.02)
        idx = links.index(ns, names.ovs_phy)
        have = {a.get_attr("IFA_ADDRESS") for a in ns.get_addr(index=idx)}
        if str(host.underlay_ip) not in have:
            links.address(ns, names.ovs_phy, host.underlay_ip, net.underlay_cidr.prefixlen)
        links.up(ns, names.ovs_phy)
