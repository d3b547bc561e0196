"""Restart the vSwitch of one emulated host.

OVS kinds: ``ovs-vswitchd`` is stopped (SIGTERM) and started again on the same
database, as ``systemctl restart ovs-vswitchd`` would: ports come back from the
database, OpenFlow flows do not (a controller re-installs them when the bridge
reconnects; on ovn, ovn-controller does, and the restart returns once every chassis
has caught up). The userspace datapath recreates the bridge's internal port, so the
host's tunnel endpoint address is put back. Linux bridge: every bridge of the host
goes down and up, which flushes its learned forwarding database (the kernel
disables each port), the closest a kernel bridge has to a restart.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from vnetbench.errors import VnetbenchError
from vnetbench.testbed.model import VSwitchKind
from vnetbench.testbed.netns import links, nsops, openflow, ovn, proc, vrouter
from vnetbench.testbed.netns.ovs import OvsHost

VSWITCHD = "ovs-vswitchd"


def restart(dep, host: str) -> None:
    h = dep.testbed.host(host)
    if dep.testbed.vswitch.kind is VSwitchKind.LINUXBRIDGE:
        return _bridges_down_up(dep, h)
    ovs = OvsHost(SimpleNamespace(run=dep.run, names=dep.names, testbed=dep.testbed), h)
    pidfile = ovs.rundir / f"{VSWITCHD}.pid"
    mark = f"--pidfile={pidfile}"
    ours = lambda p: mark in proc.cmdline(p).split()   # noqa: E731
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = None
    since = time.time()
    ovn_flows = ovn.flow_count(dep, h.name) if dep.testbed.vswitch.kind is VSwitchKind.OVN else 0
    if pid and ours(pid) and not proc.stop(pid, ours, grace=5.0):
        raise VnetbenchError(f"{VSWITCHD} of {host} (pid {pid}) did not exit")
    ovs._daemon(VSWITCHD, [ovs.db], netns=dep.names.host_ns(h.name))
    _readdress(dep, h)
    if dep.testbed.vswitch.kind is VSwitchKind.OVS_OPENFLOW:
        openflow.wait_ready(dep.run.dir, [openflow.dpid(dep.testbed.hosts.index(h))], since=since)
    if dep.testbed.vswitch.kind is VSwitchKind.VROUTER:  # the agent programs it again
        vrouter.prime_neighbours(dep.names, dep.testbed, hosts=[h.name])
        vrouter.wait_converged(dep.run.dir, dep.testbed, since=since, key="programmed",
                               hosts=[h.name])
    if dep.testbed.vswitch.kind is VSwitchKind.OVN:     # ovn-controller programs it again
        ovn.wait_programmed(dep, h.name, ovn_flows)
        if dep.testbed.network.type.is_tunnel:
            ovn.tunnel_neighbours(dep, on=[h.name])


def _readdress(dep, host) -> None:
    """Put the tunnel endpoint back on the re-created bridge port (if this host has one)."""
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


def _bridges_down_up(dep, host) -> None:
    names = dep.names
    with nsops.rtnl(names.host_ns(host.name)) as ns:
        bridges = [names.lb_bridge(i) for i, v in enumerate(dep.testbed.vnets)
                   if v in dep.testbed.vnets_on(host.name)]
        for br in bridges:
            ns.link("set", index=links.index(ns, br), state="down")
        for br in bridges:
            links.up(ns, br)
