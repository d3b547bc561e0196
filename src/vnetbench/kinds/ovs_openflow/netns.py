"""``ovs-openflow``: every host's OVS bridge is an OpenFlow 1.3 switch of a reactive
controller (vnetbench.sdn: Floodlight v0.90 + IVS model) that runs in the run's
controller namespace and is reached over the management network (``mgmt``).

Per host: one bridge with VM ports, and per (vnet, peer host) a tunnel port keyed
by the vnet's segmentation id (tunnel types), per vnet a physnet port (flat), or
the uplink as an 802.1q trunk (vlan: the controller pushes and pops the vnet's tag),
like ``ovs``; but no port tags and no NORMAL action -- the controller decides every
output. Link ports are ``protected`` so that a ``standalone`` bridge that fell back
to MAC learning cannot loop broadcast through the tunnel mesh.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from vnetbench.errors import BuildError
from vnetbench.linux import proc
from vnetbench.testbed.model import NetType
from vnetbench.testbed.netns import mgmt
from vnetbench.testbed.deployment import CONTROLLER_DIR
from vnetbench.kinds.ovs.netns import (
    OvsHost, _bridge, _port, address_underlays, qos_columns, start_host, tunnel_ports,
)

OF_PORT = 6653                   # instance i listens on OF_PORT + i
MAX_BACKOFF_MS = 1000            # reconnect within 1 s after a restart or heal
READY_TIMEOUT_S = 20.0


def dpid(host_i: int) -> int:
    return host_i + 1


def ctl_dir(run_dir: Path) -> Path:
    return run_dir / CONTROLLER_DIR


def pidfile(run_dir: Path, instance: int) -> Path:
    return ctl_dir(run_dir) / f"osken-{instance}.pid"


def targets(testbed) -> list[str]:
    ip = mgmt.controller_ip(testbed)
    return [f"tcp:{ip}:{OF_PORT + i}" for i in range(testbed.vswitch.options.controllers)]


def controller_config(ctx) -> dict:
    """What Floodlight learns from its REST API (VNF networks) and link discovery."""
    tb, n = ctx.testbed, ctx.names
    macs, ports = {}, {}
    for vm_i, vm in enumerate(tb.attached):     # a router's ports too (Neutron registers them)
        for k, nic in enumerate(vm.nics):
            macs[nic.mac] = nic.vnet
            ports[n.vm_port(vm_i, k)] = nic.vnet
    switches = {}
    for hi, host in enumerate(tb.hosts):
        links = []
        for vnet in tb.vnets_on(host.name):
            vi = ctx.vnet_index(vnet.name)
            for peer in ctx.peers(host.name, vnet.name):
                pi = ctx.host_index(peer.name)
                vlan = None
                if tb.network.type is NetType.FLAT:
                    here = there = n.physnet(vi)
                elif tb.network.type is NetType.VLAN:      # one trunk, a tag per vnet
                    here = there = n.uplink
                    vlan = vnet.segmentation_id
                else:
                    here, there = n.tunnel_port(vi, pi), n.tunnel_port(vi, hi)
                links.append({"port": here, "peer": dpid(pi), "peer_port": there,
                              "vnet": vnet.name, "vlan": vlan})
        switches[str(dpid(hi))] = {"host": host.name, "links": links}
    return {"options": dataclasses.asdict(tb.vswitch.options), "vnets": [v.name for v in tb.vnets],
            "macs": macs, "ports": ports, "switches": switches}


def removed_file(run_dir: Path) -> Path:
    """The vnets deleted from the running controller (its REST API's network deletion)."""
    return ctl_dir(run_dir) / "removed-vnets.json"


#: the os-ken application every controller instance runs
APP = "vnetbench.kinds.ovs_openflow.floodlight"


def controller_argv(run_dir: Path, testbed, instance: int, record: str | None = None) -> list[str]:
    d = ctl_dir(run_dir)
    argv = [sys.executable, "-m", "vnetbench.sdn.controller", f"--app={APP}",
            f"--pidfile={pidfile(run_dir, instance)}", f"--config={d / 'config.json'}",
            f"--instance={instance}", f"--lock={d / 'master.lock'}",
            f"--ready-dir={d / 'ready'}", f"--removed={removed_file(run_dir)}",
            f"--listen=0.0.0.0:{OF_PORT + instance}"]   # the namespace has only the mgmt bridge
    return argv + ([f"--record={record}"] if record else [])


def start_controller(run, names, run_dir: Path, testbed, instance: int, record=None) -> None:
    """Journal the instance by its run-unique pidfile argument, then start it in the
    controller namespace (its own session: it outlives nothing but the run)."""
    pf = pidfile(run_dir, instance)
    run.record("daemon", name="osken-manager", host="controller", pidfile=str(pf),
               argmark=f"--pidfile={pf}")
    log = open(ctl_dir(run_dir) / f"osken-{instance}.log", "ab")
    subprocess.Popen(proc.in_netns(names.ctl_ns, controller_argv(run_dir, testbed, instance, record)),
                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     start_new_session=True)
    log.close()


def start(ctx) -> None:
    """The controller instances, as soon as the controller namespace exists: importing
    os-ken takes ~1 s, which then overlaps the rest of the bring-up. They listen on
    every address of their namespace, whose only interface is the management bridge."""
    tb, run_dir = ctx.testbed, ctx.run.dir
    d = ctl_dir(run_dir)
    (d / "ready").mkdir(parents=True, mode=0o700)
    (d / "config.json").write_text(json.dumps(controller_config(ctx), indent=1))
    for i in range(tb.vswitch.options.controllers):
        start_controller(ctx.run, ctx.names, run_dir, tb, i)


def wire(ctx) -> None:
    """The hosts' bridges (the controller was started by ``start``); returns once every
    bridge has its packet-in path installed."""
    tb, run_dir = ctx.testbed, ctx.run.dir
    hosts = [OpenFlowHost(ctx, h) for h in tb.hosts]
    proc.parallel([lambda o=o: start_host(ctx, o) for o in hosts])
    address_underlays(ctx, hosts)
    wait_ready(run_dir, [dpid(i) for i in range(len(tb.hosts))])
    for o in hosts:                     # the 1 s backoff and the probe as configured
        o.controller_settings_in_force()


def wait_ready(run_dir: Path, dpids, timeout=READY_TIMEOUT_S, since: float = 0.0) -> None:
    """Every switch connected and its packet-in path installed (the master writes
    ready/<dpid> on the barrier reply that follows)."""
    ready = ctl_dir(run_dir) / "ready"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        missing = [p for p in dpids if not _newer(ready / str(p), since)]
        if not missing:
            return
        time.sleep(0.02)
    raise BuildError(f"OpenFlow controller: switches {missing} not ready after {timeout:.0f} s "
                     f"({_reports(run_dir)})")


def _reports(run_dir: Path) -> str:
    """Each instance's pid, state and where its threads wait, for a time-out message."""
    return "; ".join(proc.python_daemon_report(ctl_dir(run_dir), log.stem)
                     for log in sorted(ctl_dir(run_dir).glob("osken-*.log"))) or "no controller log"


def _newer(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since
    except OSError:
        return False


class OpenFlowHost(OvsHost):
    """An OVS host whose bridge belongs to the controller (no port tags, no NORMAL; on
    vlan the uplink is a trunk whose tags the controller pushes and pops)."""

    def _transaction(self, datapath: str) -> list[str]:
        ctx, host = self.ctx, self.host
        tb, names, rid = ctx.testbed, ctx.names, ctx.run.run_id
        of = tb.vswitch.options
        own = f"external_ids:vnetbench-run={rid}"
        br, hi = names.ovs_int, ctx.host_index(host.name)
        tx = ["--", "init", "--", "set", "Open_vSwitch", ".", own,
              f"external_ids:system-id={rid}-{host.name}", f"external_ids:hostname={host.name}"]
        tx += _bridge(br, datapath, own)
        tx += ["--", "set", "Bridge", br, f"fail_mode={of.fail_mode}", "protocols=OpenFlow13",
               f"other_config:datapath-id={dpid(hi):016x}", "other_config:disable-in-band=true"]
        ids = []
        for i, target in enumerate(targets(tb)):
            ids.append(f"@c{i}")
            tx += ["--", f"--id=@c{i}", "create", "Controller", f"target=\"{target}\"",
                   f"max_backoff={MAX_BACKOFF_MS}", f"inactivity_probe={of.inactivity_probe_ms}",
                   "connection_mode=out-of-band", own]
        tx += ["--", "set", "Bridge", br, f"controller=[{','.join(ids)}]"]
        ntype = tb.network.type
        for vnet in tb.vnets_on(host.name):
            vi = ctx.vnet_index(vnet.name)
            for port in ctx.vm_ports(host.name, vnet.name):
                tx += _port(br, port, own)
            if ntype is NetType.FLAT:
                tx += _port(br, names.physnet(vi), own, "protected=true")
            elif ntype.is_tunnel:
                tx += tunnel_ports(ctx, host, vnet, vi, br, own)
        for i, (port, qos) in enumerate(ctx.qos_ports(host.name)):
            tx += qos_columns(port, i, qos, own)
        if ntype is NetType.VLAN:
            tx += _port(br, names.uplink, own, "protected=true")
        if ntype.is_tunnel:
            tx += _bridge(names.ovs_phy, datapath, own)
            tx += ["--", "set", "Interface", names.ovs_phy, f"mtu_request={tb.network.underlay_mtu}"]
            tx += _port(names.ovs_phy, names.uplink, own)
        return tx


def expire_flows(dep) -> None:
    """Delete the controller's forwarding flows on every bridge (cookie-matched; the
    packet-in path stays): the state the flows' idle timeout leaves, without waiting."""
    from vnetbench.kinds.ovs_openflow.floodlight import COOKIE_FORWARDING
    for h in dep.testbed.hosts:
        mgmt_sock = dep.host_file(h.name, f"{dep.names.ovs_int}.mgmt")
        proc.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", f"unix:{mgmt_sock}",
                  f"cookie={COOKIE_FORWARDING:#x}/-1"], what=f"ovs-ofctl del-flows on {h.name}")


def remove_vnet(dep, vnet: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Delete ``vnet`` in the controller: it forgets the vnet's MACs, ports and links and
    deletes the flows to and from those MACs; returns once the master acknowledged it
    (at once when no instance runs: a started one reads the list first)."""
    path = removed_file(dep.run.dir)
    try:
        removed = json.loads(path.read_text())
    except OSError:
        removed = []
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted({*removed, vnet})))
    tmp.replace(path)
    if not any(instance_pid(dep, name) for name in instances(dep)):
        return
    ack = Path(f"{path}.ack")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if vnet in json.loads(ack.read_text()):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    raise BuildError(f"run {dep.run_id}: the OpenFlow controller did not acknowledge deleting "
                     f"vnet {vnet} within {timeout:.0f} s ({_reports(dep.run.dir)})")


# -- faults (vnetbench.faults drives these) ---------------------------------------

def instances(dep) -> list[str]:
    return [f"osken-{i}" for i in range(dep.testbed.vswitch.options.controllers)]


def _instance(dep, name: str) -> int:
    if name not in instances(dep):
        raise BuildError(f"run {dep.run_id} has no controller instance {name!r}; "
                         f"use one of: {', '.join(instances(dep))}")
    return int(name.split("-")[1])


def instance_pid(dep, name: str) -> int | None:
    """The running instance (pidfile, guarded by its run-unique --pidfile argument)."""
    pf = pidfile(dep.run.dir, _instance(dep, name))
    try:
        pid = int(pf.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if f"--pidfile={pf}" in proc.cmdline(pid).split() else None


def stop_instance(dep, name: str, graceful: bool = True) -> None:
    """SIGTERM (graceful) or SIGKILL one instance; its switches keep their flows."""
    pf = pidfile(dep.run.dir, _instance(dep, name))
    pid = instance_pid(dep, name)
    if pid and not proc.stop(pid, lambda p: f"--pidfile={pf}" in proc.cmdline(p).split(),
                             grace=1.0, hard=not graceful):
        raise BuildError(f"controller {name} (pid {pid}) of run {dep.run_id} did not exit")
    pf.unlink(missing_ok=True)


def start_instance(dep, name: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Start one instance again (journaled again); with a single instance, wait until
    every switch reconnected and got its packet-in path back."""
    i = _instance(dep, name)
    if instance_pid(dep, name):
        return
    since = time.time()
    start_controller(dep.run, dep.names, dep.run.dir, dep.testbed, i)
    if dep.testbed.vswitch.options.controllers == 1:
        wait_ready(dep.run.dir, [dpid(h) for h in range(len(dep.testbed.hosts))], timeout, since)
