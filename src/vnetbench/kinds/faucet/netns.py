"""Faucet on the netns backend: the controller in the controller namespace, every host's
userspace OVS bridge a Faucet datapath over OpenFlow 1.3.

Faucet (faucet.nz, 1.10 from PyPI) runs from its own virtual environment
(``make faucet``: it pins os-ken 3.1.0, which vnetbench's own os-ken apps cannot share)
as ``osken-manager faucet.faucet``, journaled by its run-unique ``--pid-file``. Its
configuration, log and Prometheus endpoint are the run's: ``FAUCET_CONFIG`` is the
``faucet.yaml`` that ``config`` generates, the metrics listen in the controller namespace
only. Faucet is proactive: on a switch's connection it installs its whole pipeline (VLAN,
learning, flooding tables); hosts are learned from packet-ins of unknown sources while
their frames are flooded in the datapath, never held for a flow set-up. A host is ready
when every one of its ports has Faucet's flows in the VLAN table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from vnetbench.errors import BuildError
from vnetbench.kinds.faucet import config
from vnetbench.kinds.ovs.netns import OvsHost, _bridge, _port, qos_columns, start_host
from vnetbench.testbed.deployment import CONTROLLER_DIR
from vnetbench.testbed.netns import mgmt, proc

OF_PORT = 6653
PROMETHEUS_PORT = 9302
MAX_BACKOFF_MS = 1000
READY_TIMEOUT_S = 45.0          # a loaded 2-CPU machine imports os-ken and Faucet slowly
RECONNECT_S = 10 * MAX_BACKOFF_MS / 1000   # bridges back on a listening Faucet: their backoff
                                           # is 1 s; a restart's reconnection took under 1 s
NAME = "faucet"
ENV_VENV = "VNETBENCH_FAUCET_VENV"


def venv() -> Path:
    """Faucet's virtual environment: $VNETBENCH_FAUCET_VENV, else ``<this venv>-faucet``
    (``make faucet`` puts it beside vnetbench's ``.venv``)."""
    return Path(os.environ.get(ENV_VENV) or f"{sys.prefix}-faucet")


def manager() -> Path:
    return venv() / "bin" / "osken-manager"


def ctl_dir(run_dir: Path) -> Path:
    return run_dir / CONTROLLER_DIR


def pidfile(run_dir: Path) -> Path:
    return ctl_dir(run_dir) / f"{NAME}.pid"


def config_file(run_dir: Path) -> Path:
    return ctl_dir(run_dir) / "faucet.yaml"


def write_config(run_dir: Path, testbed, names, removed=(), built=None) -> None:
    path = config_file(run_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config.faucet_yaml(testbed, names, removed, built), sort_keys=False))
    os.replace(tmp, path)


def environment(run_dir: Path) -> dict:
    d = ctl_dir(run_dir)
    return {**os.environ, "FAUCET_CONFIG": str(config_file(run_dir)),
            "FAUCET_LOG": str(d / f"{NAME}.events.log"),
            "FAUCET_EXCEPTION_LOG": str(d / f"{NAME}.exception.log"),
            # every address of the controller namespace (only its management bridge): Faucet
            # starts before the bridge has its address
            "FAUCET_PROMETHEUS_ADDR": "0.0.0.0",
            "FAUCET_PROMETHEUS_PORT": str(PROMETHEUS_PORT)}


def argv(run_dir: Path) -> list[str]:
    return [str(manager()), "faucet.faucet", f"--pid-file={pidfile(run_dir)}",
            f"--ofp-tcp-listen-port={OF_PORT}", "--ofp-listen-host=0.0.0.0"]


def start_controller(run, names, testbed) -> None:
    """Journal Faucet by its run-unique pidfile argument, then start it in the controller
    namespace, in its own session."""
    run_dir = run.dir
    pf = pidfile(run_dir)
    run.record("daemon", name=NAME, host="controller", pidfile=str(pf), argmark=f"--pid-file={pf}")
    with open(ctl_dir(run_dir) / f"{NAME}.log", "ab") as log:
        subprocess.Popen(proc.in_netns(names.ctl_ns, argv(run_dir)), stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=environment(run_dir), start_new_session=True)


def start(ctx) -> None:
    """Faucet starts as soon as the controller namespace exists (its imports overlap the
    rest of the bring-up)."""
    ctl_dir(ctx.run.dir).mkdir(parents=True, mode=0o700, exist_ok=True)
    write_config(ctx.run.dir, ctx.testbed, ctx.names)
    start_controller(ctx.run, ctx.names, ctx.testbed)


def wire(ctx) -> None:
    hosts = [FaucetHost(ctx, h) for h in ctx.testbed.hosts]
    proc.parallel([lambda o=o: start_host(ctx, o) for o in hosts])
    wait_ready(ctx, hosts)


class FaucetHost(OvsHost):
    """A host whose bridge is a Faucet datapath: secure fail mode, OpenFlow 1.3, ports at
    the numbers faucet.yaml names; no tags (Faucet's VLAN table assigns them)."""

    def _transaction(self, datapath: str) -> list[str]:
        ctx, host = self.ctx, self.host
        tb, names = ctx.testbed, ctx.names
        own = f"external_ids:vnetbench-run={ctx.run.run_id}"
        br, hi = names.ovs_int, ctx.host_index(host.name)
        tx = self._open_vswitch()
        tx += _bridge(br, datapath, own)
        tx += ["--", "set", "Bridge", br, "fail_mode=secure", "protocols=OpenFlow13",
               f"other_config:datapath-id={config.dpid(hi):016x}", "other_config:disable-in-band=true",
               "--", "--id=@c", "create", "Controller",
               f"target=\"tcp:{mgmt.controller_ip(tb)}:{OF_PORT}\"", f"max_backoff={MAX_BACKOFF_MS}",
               "connection_mode=out-of-band", own,
               "--", "set", "Bridge", br, "controller=[@c]"]
        for number, port in config.ports(tb, names, host.name):      # at bring-up: as built
            tx += _port(br, port, own)
            tx += ["--", "set", "Interface", port, f"ofport_request={number}"]
        for i, (port, qos) in enumerate(ctx.qos_ports(host.name)):
            tx += qos_columns(port, i, qos, own)
        return tx


def _programmed(o: OvsHost, ports: list[int]) -> bool:
    """Faucet's flows are on the bridge for every port (its VLAN table matches in_port)."""
    try:
        out = o.ofctl("--no-names", "dump-flows", o.bridge_target(), f"cookie={config.COOKIE:#x}/-1")
    except BuildError:
        return False
    return all(f"in_port={p}," in out or f"in_port={p} " in out for p in ports)


def wait_ready(ctx, hosts, timeout: float = READY_TIMEOUT_S) -> None:
    """Every port of every host that has a link is in Faucet's flows (Faucet programs a
    port when it comes up: a shut-down guest's port waits for its boot)."""
    built = ctx.run.meta().get("built_vnets_on")
    want = {o.host.name: [n for n, name in config.ports(ctx.testbed, ctx.names, o.host.name, built)
                          if _carrier(ctx, o.host, name)] for o in hosts}
    deadline = time.monotonic() + timeout
    pending = list(hosts)
    while pending and time.monotonic() < deadline:
        pending = [o for o in pending if not _programmed(o, want[o.host.name])]
        if pending:
            time.sleep(0.1)
    if pending:
        raise BuildError(f"Faucet did not program {', '.join(o.host.name for o in pending)} within "
                         f"{timeout:.0f} s ({report(ctx.run.dir)})")


def report(run_dir: Path) -> str:
    """Faucet's state for a time-out message: running or not, and its last log lines."""
    pid = running_pid(run_dir)
    tail = []
    for log in (ctl_dir(run_dir) / f"{NAME}.log", ctl_dir(run_dir) / f"{NAME}.events.log"):
        try:
            tail += [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-2:]
        except OSError:
            pass
    return f"faucet {'pid ' + str(pid) if pid else 'not running'}; log: {' | '.join(tail) or 'empty'}"


def running_pid(run_dir: Path) -> int | None:
    pf = pidfile(run_dir)
    try:
        pid = int(pf.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if f"--pid-file={pf}" in proc.cmdline(pid).split() else None


# -- after bring-up: deprovisioning, faults --------------------------------------------

def removed_vnets(dep) -> list[str]:
    try:
        return json.loads((ctl_dir(dep.run.dir) / "removed-vnets.json").read_text())
    except (OSError, ValueError):
        return []


def remove_vnet(dep, vnet) -> None:
    """The VLAN leaves faucet.yaml and Faucet is told to reload it (SIGHUP): it deletes the
    VLAN's flows when it has (a stopped Faucet reads the new file when it starts)."""
    gone = sorted({*removed_vnets(dep), vnet.name})
    (ctl_dir(dep.run.dir) / "removed-vnets.json").write_text(json.dumps(gone))
    write_config(dep.run.dir, dep.testbed, dep.names, removed=gone, built=_built(dep))
    pid = running_pid(dep.run.dir)
    if pid is not None:
        os.kill(pid, signal.SIGHUP)


def components(dep) -> list[str]:
    return [NAME]


def stop(dep, name: str = NAME, graceful: bool = True) -> None:
    pf = pidfile(dep.run.dir)
    pid = running_pid(dep.run.dir)
    if pid and not proc.stop(pid, lambda p: f"--pid-file={pf}" in proc.cmdline(p).split(),
                             grace=2.0, hard=not graceful):
        raise BuildError(f"Faucet (pid {pid}) of run {dep.run_id} did not exit")
    pf.unlink(missing_ok=True)


def start_again(dep, name: str = NAME) -> None:
    """Start Faucet again (journaled again); returns once every bridge is connected to it
    and programmed (the flows a secure bridge kept do not count)."""
    if running_pid(dep.run.dir):
        return
    from vnetbench.testbed.netns.context import context
    started = time.monotonic()
    start_controller(dep.run, dep.names, dep.testbed)
    ctx = context(dep)
    hosts = [FaucetHost(ctx, h) for h in dep.testbed.hosts]
    _wait_listening(dep.run.dir, started + READY_TIMEOUT_S)
    deadline = time.monotonic() + RECONNECT_S
    while not all(_connected(o, time.monotonic() - started) for o in hosts):
        if time.monotonic() > deadline:
            rows = {o.host.name: o.vsctl("--format=json", "--columns=is_connected,status", "list",
                                         "Controller").strip() for o in hosts}
            raise BuildError(f"the bridges did not reconnect to Faucet within {RECONNECT_S:.0f} s of its "
                             f"listening ({report(dep.run.dir)}; controller rows: {rows})")
        time.sleep(0.1)
    wait_ready(ctx, hosts)


def _wait_listening(run_dir: Path, deadline: float) -> None:
    """Until the new Faucet listens for OpenFlow: its start-up (importing os-ken and Faucet)
    is bounded apart from the bridges' reconnection, so a time-out says which was slow."""
    while True:
        pid = running_pid(run_dir)
        if pid and OF_PORT in proc.listening_ports(pid):
            return
        if time.monotonic() > deadline:
            raise BuildError(f"Faucet did not listen on port {OF_PORT} within {READY_TIMEOUT_S:.0f} s "
                             f"of its start ({report(run_dir)})")
        time.sleep(0.1)


def _connected(o: OvsHost, within_s: float) -> bool:
    """Whether O's bridge is connected to a Faucet that connected within the last
    WITHIN_S seconds: right after a stop OVS may not have noticed yet, and its
    ``is_connected`` (still true) is the Faucet that went; the new one takes seconds to
    import os-ken and listen."""
    rows = json.loads(o.vsctl("--format=json", "--columns=is_connected,status", "list", "Controller"))["data"]
    return len(rows) == 1 and controller_connected_since(rows[0], within_s)


def controller_connected_since(row, within_s: float) -> bool:
    """ROW (is_connected, status) of ``ovs-vsctl --format=json list Controller``: connected,
    and for no longer than WITHIN_S seconds (status ``sec_since_connect``)."""
    connected, status = row
    pairs = dict(status[1]) if isinstance(status, list) and status and status[0] == "map" else {}
    since = pairs.get("sec_since_connect")
    return connected is True and since is not None and int(since) <= within_s + 1


def port_number(testbed, vm, k: int) -> int:
    return config.vm_port_number(testbed, [v.name for v in testbed.vms].index(vm.name), k)


def plugged(dep, host, port: str, vm, k: int) -> None:
    """A migrated VM's port is on HOST's bridge at its number: faucet.yaml regenerated with
    the VM on HOST, Faucet reloaded; returns when HOST's bridge has the port's flows."""
    import dataclasses
    from vnetbench.testbed.netns.context import context
    tb = dep.testbed
    moved = dataclasses.replace(tb, vms=tuple(dataclasses.replace(v, host=host.name)
                                              if v.name == vm.name else v for v in tb.vms))
    o = FaucetHost(context(dep), host)
    number = port_number(tb, vm, k)
    write_config(dep.run.dir, moved, dep.names, removed_vnets(dep), _built(dep))
    pid = running_pid(dep.run.dir)
    if pid is None:
        return
    os.kill(pid, signal.SIGHUP)
    if not _carrier(dep, host, port):
        return              # a shut-down guest: Faucet programs the port when its link comes up
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _programmed(o, [number]):
        if time.monotonic() > deadline:
            raise BuildError(f"Faucet did not take port {port} on {host.name} ({report(dep.run.dir)})")
        time.sleep(0.1)


def _built(dep) -> dict | None:
    """What each host's bridge was built for (kept in the run's state by a migration)."""
    return dep.run.meta().get("built_vnets_on")


def _carrier(dep, host, port: str) -> bool:
    from vnetbench.testbed.netns import links, nsops
    with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
        (link,) = ns.get_links(links.index(ns, port))
        return link.get_attr("IFLA_CARRIER") == 1
