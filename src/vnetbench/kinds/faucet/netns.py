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
import time
from pathlib import Path

import yaml

from vnetbench.errors import BuildError
from vnetbench.kinds.faucet import config
from vnetbench.kinds.faucet.install import ENV_VENV, manager, venv  # noqa: F401 (where Faucet is)
from vnetbench.kinds.ovs.netns import OvsHost, _bridge, _port, qos_columns, start_host
from vnetbench.linux import proc
from vnetbench.testbed.deployment import CONTROLLER_DIR
from vnetbench.testbed.netns import mgmt

OF_PORT = 6653
PROMETHEUS_PORT = 9302
MAX_BACKOFF_MS = 1000
READY_TIMEOUT_S = 45.0          # a loaded 2-CPU machine imports os-ken and Faucet slowly
# A restart's reconnection is bounded by OVS's and Faucet's own timing, not by a guess:
#: the backoff OVS uses until a connected bridge has been reconfigured (``rconn_create(5, 8)``
#: in connmgr.c of OVS before 3.1.3, this machine's 3.1.0): the Controller's max_backoff is
#: ignored till then (``apply_controller_settings``), so a bridge may wait 8 s between tries
OVS_DEFAULT_MAX_BACKOFF_S = 8
#: an attempt's time to finish TCP and the HELLO exchange (rconn: MAX(1 s, backoff))
CONNECT_TIMEOUT_S = 1
#: os-ken's socket time-out: the longest Faucet's side of the handshake (features, port
#: descriptions) may hang before os-ken drops the switch; its cold start follows in ms
OSKEN_SOCKET_TIMEOUT_S = 5
#: from the new Faucet listening to every bridge connected and programmed by it: one full
#: backoff at OVS's default, one connect attempt, Faucet's handshake and cold start (from
#: listening to programmed measured at most 1.9 s in 60 restarts with the 1 s backoff in
#: force, with and without two CPU hogs beside it; up to 8.1 s without it)
RECONNECT_S = OVS_DEFAULT_MAX_BACKOFF_S + CONNECT_TIMEOUT_S + OSKEN_SOCKET_TIMEOUT_S
#: Faucet's events log lines a time-out quotes: its start, its datapaths' connections and
#: disconnections, what it closed and what went wrong (not its pipeline and learning chatter)
FAUCET_EVIDENCE = ("version ", "Reloading configuration", "Add new datapath", "port desc stats",
                   "Cold start", "Warm start", "datapath down", "unknown datapath", "ERROR",
                   "WARNING", "Traceback")
NAME = "faucet"


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
    apply_controller_settings(hosts)


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


def _faucet_flows(o: OvsHost) -> str | None:
    """O's bridge's flows of Faucet's cookie (``ovs-ofctl dump-flows``); None when the
    bridge cannot be read (ovs-vswitchd restarting)."""
    try:
        return o.ofctl("--no-names", "dump-flows", o.bridge_target(), f"cookie={config.COOKIE:#x}/-1")
    except BuildError:
        return None


def _programmed(o: OvsHost, ports: list[int]) -> bool:
    """Faucet's flows are on the bridge for every port (its VLAN table matches in_port)."""
    out = _faucet_flows(o)
    return out is not None and all(f"in_port={p}," in out or f"in_port={p} " in out for p in ports)


def wait_ready(ctx, hosts, timeout: float = READY_TIMEOUT_S) -> None:
    """Every port of every host that has a link is in Faucet's flows (Faucet programs a
    port when it comes up: a shut-down guest's port waits for its boot)."""
    want = _wanted_ports(ctx, hosts)
    deadline = time.monotonic() + timeout
    pending = list(hosts)
    while pending and time.monotonic() < deadline:
        pending = [o for o in pending if not _programmed(o, want[o.host.name])]
        if pending:
            time.sleep(0.1)
    if pending:
        raise BuildError(f"Faucet did not program {', '.join(o.host.name for o in pending)} within "
                         f"{timeout:.0f} s ({report(ctx.run.dir)})")


def _wanted_ports(ctx, hosts) -> dict[str, list[int]]:
    """Each host's port numbers that Faucet programs now: those with a link."""
    built = ctx.run.meta().get("built_vnets_on")
    return {o.host.name: [n for n, name in config.ports(ctx.testbed, ctx.names, o.host.name, built)
                          if _carrier(ctx, o.host, name)] for o in hosts}


def report(run_dir: Path, since: dict | None = None) -> str:
    """Faucet's state for a time-out message: running or not, what its events log says of
    its start and its datapaths (``faucet_evidence``; from the offsets SINCE, a restart's
    ``log_marks``), and the last line of its output (a crash's traceback ends there)."""
    pid = running_pid(run_dir)
    events = _read_from(ctl_dir(run_dir) / f"{NAME}.events.log", since)
    out = [line for line in _read_from(ctl_dir(run_dir) / f"{NAME}.log", since) if line.strip()][-1:]
    said = faucet_evidence(events) + [f"output: {line}" for line in out]
    return f"faucet {'pid ' + str(pid) if pid else 'not running'}; log: {' | '.join(said) or 'empty'}"


def faucet_evidence(lines: list[str], limit: int = 16) -> list[str]:
    """The lines of Faucet's events log that tell a restart's story (FAUCET_EVIDENCE), the
    last LIMIT of them, each cut to 200 characters."""
    keep = [line.strip()[:200] for line in lines if any(k in line for k in FAUCET_EVIDENCE)]
    return keep[-limit:]


def rconn_evidence(lines: list[str], limit: int = 8) -> list[str]:
    """The controller connection lines of an ovs-vswitchd log (its ``rconn`` module: tries,
    failures, backoffs, connections), the last LIMIT, without the log's sequence field."""
    keep = []
    for line in lines:
        f = line.split("|", 4)
        if len(f) == 5 and f[2] == "rconn":
            keep.append(f"{f[0][11:23]} {f[4].split(': ', 1)[-1].strip()}")
    return keep[-limit:]


def _log_paths(run_dir: Path, hosts) -> dict[str, Path]:
    return {"faucet-events": ctl_dir(run_dir) / f"{NAME}.events.log",
            "faucet": ctl_dir(run_dir) / f"{NAME}.log",
            **{o.host.name: o.rundir / "ovs-vswitchd.log" for o in hosts}}


def log_marks(run_dir: Path, hosts) -> dict:
    """Where each log of a restart's story ends now (byte offsets, by path)."""
    marks = {}
    for path in _log_paths(run_dir, hosts).values():
        try:
            marks[str(path)] = path.stat().st_size
        except OSError:
            marks[str(path)] = 0
    return marks


def _read_from(path: Path, since: dict | None) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek((since or {}).get(str(path), 0))
            return f.read().decode(errors="replace").splitlines()
    except OSError:
        return []


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
    """Start Faucet again (journaled again); returns once every bridge is connected to the
    new Faucet and programmed by it. Three phases, each bounded by its own timing and
    named by its time-out: Faucet listens (its imports), every bridge has flows from the
    new Faucet (OVS's backoff, the handshake, Faucet's cold start: ``RECONNECT_S``), the
    flows cover every port (``wait_ready``).

    The signal is the bridges' own flows, read live: Faucet's cold start deletes every
    flow and installs its pipeline, so a port flow younger than this start came from the
    new Faucet (the flows a secure bridge kept through the stop are older). The Controller
    row's ``is_connected`` and ``status`` are not used: ovs-vswitchd writes them only every
    stats interval (5 s), so they lag a reconnection by up to 5 s."""
    if running_pid(dep.run.dir):
        return
    from vnetbench.testbed.netns.context import context
    ctx = context(dep)
    hosts = [FaucetHost(ctx, h) for h in dep.testbed.hosts]
    marks = log_marks(dep.run.dir, hosts)
    started = time.monotonic()
    start_controller(dep.run, dep.names, dep.testbed)
    _wait_listening(dep.run.dir, started + READY_TIMEOUT_S, marks)
    listening = time.monotonic()
    want = _wanted_ports(ctx, hosts)
    pending = list(hosts)
    while True:
        pending = [o for o in pending
                   if not _programmed_since(o, want[o.host.name], time.monotonic() - started)]
        if not pending:
            break
        if time.monotonic() > listening + RECONNECT_S:
            raise BuildError(_reconnect_timeout(dep, hosts, pending, marks, time.monotonic() - listening))
        time.sleep(0.1)
    apply_controller_settings(hosts)
    wait_ready(ctx, hosts)


def _reconnect_timeout(dep, hosts, pending, marks, waited: float) -> str:
    """The time-out of a restart's reconnection phase, with its evidence: Faucet's events
    log since the start, each bridge's controller connection lines since the start, and
    the Controller rows (as of ovs-vswitchd's last stats write)."""
    paths = _log_paths(dep.run.dir, hosts)
    ovs = "; ".join(f"{o.host.name}: {' | '.join(rconn_evidence(_read_from(paths[o.host.name], marks))) or 'nothing'}"
                    for o in hosts)
    rows = {}
    for o in hosts:
        try:
            rows[o.host.name] = o.vsctl("--format=json", "--columns=is_connected,status", "list",
                                        "Controller").strip()
        except BuildError as exc:
            rows[o.host.name] = str(exc)
    return (f"reconnect phase: {', '.join(o.host.name for o in pending)} not programmed by the new "
            f"Faucet {waited:.1f} s after it listened (bound {RECONNECT_S} s: OVS's default "
            f"{OVS_DEFAULT_MAX_BACKOFF_S} s backoff + {CONNECT_TIMEOUT_S} s connect + os-ken's "
            f"{OSKEN_SOCKET_TIMEOUT_S} s handshake); {report(dep.run.dir, marks)}; ovs-vswitchd rconn "
            f"since the start: {ovs}; controller rows (up to 5 s old): {rows}")


def _wait_listening(run_dir: Path, deadline: float, marks: dict | None = None) -> None:
    """Until the new Faucet listens for OpenFlow: its start-up (importing os-ken and Faucet)
    is bounded apart from the bridges' reconnection, so a time-out says which was slow."""
    while True:
        pid = running_pid(run_dir)
        if pid and OF_PORT in proc.listening_ports(pid):
            return
        if time.monotonic() > deadline:
            raise BuildError(f"listen phase: Faucet did not listen on port {OF_PORT} within "
                             f"{READY_TIMEOUT_S:.0f} s of its start ({report(run_dir, marks)})")
        time.sleep(0.1)


def _programmed_since(o: OvsHost, ports: list[int], within_s: float) -> bool:
    out = _faucet_flows(o)
    return out is not None and programmed_since(out, ports, within_s)


def programmed_since(dump: str, ports: list[int], within_s: float) -> bool:
    """Whether DUMP (``ovs-ofctl dump-flows``) has, for every port of PORTS, a flow matching
    it (``in_port=N``) installed within the last WITHIN_S seconds (its ``duration``)."""
    fresh = set()
    for line in dump.splitlines():
        fields = dict(f.split("=", 1) for f in line.replace(" ", ",").split(",") if "=" in f)
        try:
            age = float(fields.get("duration", "").rstrip("s"))
            port = int(fields.get("in_port", ""))
        except ValueError:
            continue
        if age <= within_s:
            fresh.add(port)
    return set(ports) <= fresh


def apply_controller_settings(hosts) -> None:
    """Each bridge's Controller settings (max_backoff, MAX_BACKOFF_MS) in force in its
    ovs-vswitchd (``OvsHost.controller_settings_in_force``: OVS 3.1.0 ignored them, and a
    bridge waited 8 s between tries after a Faucet restart)."""
    for o in hosts:
        o.controller_settings_in_force()


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
    from vnetbench.linux import links, nsops
    with nsops.rtnl(dep.names.host_ns(host.name)) as ns:
        (link,) = ns.get_links(links.index(ns, port))
        return link.get_attr("IFLA_CARRIER") == 1
