"""Security groups on a linuxbridge host, as the linuxbridge agent enforces them:
Neutron's own iptables firewall driver (``SecurityGroupAgentRpc`` + the iptables driver
of Debian's python3-neutron, ``vnetbench.kinds.neutron_sg_agent``) running in the host's
namespace, per-port chains with ``physdev`` matches on the VM ports, ipsets for remote
groups, a conntrack zone per network. The bridge filters bridged IPv4 through iptables
(``net.bridge.bridge-nf-call-iptables``, per namespace).

Everything it makes (chains, ipsets, conntrack entries) lives in the host's namespace
and goes with it; the agent is a journaled daemon stopped by its pidfile.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from vnetbench import unixsock
from vnetbench.errors import BuildError
from vnetbench.kinds import neutron_sg
from vnetbench.testbed.netns import proc

AGENT = "neutron-sg-agent"
SCRIPT = Path(neutron_sg.__file__).with_name("neutron_sg_agent.py")
BINARY = "neutron-linuxbridge-agent"     # chain names: neutron-linuxbri-*
READY_S = 30.0                           # importing neutron: 2-4 s here, more on a busy host
COMMAND_S = 60.0


def why_not(caps) -> str | None:
    """What this machine lacks to run Neutron's iptables firewall in a namespace."""
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        return "the kernel's bridge netfilter (br_netfilter: net.bridge.bridge-nf-call-iptables) is missing"
    for prog, pkg in (("iptables", "iptables"), ("ipset", "ipset")):
        if not shutil.which(prog):
            return f"{prog} not found on PATH (Debian package {pkg}; 'make install' installs it)"
    return neutron_sg.neutron_python_missing()


def rundir(ctx, host) -> Path:
    d = ctx.run.dir / host.name
    d.mkdir(parents=True, exist_ok=True)
    return d


def socket_path(ctx, host) -> Path:
    return rundir(ctx, host) / f"{AGENT}.sock"


def payload(ctx, host) -> dict:
    """Neutron's RPC view of this host's ports, with the kind's device and bridge names."""
    return neutron_sg.payload(ctx.testbed, ctx.run.run_id, host.name,
                              device=lambda vm, n: ctx.names.vm_port(ctx.vm_index(vm), n),
                              bridge=lambda vnet: ctx.names.lb_bridge(ctx.vnet_index(vnet)))


def start(ctx) -> None:
    """On every host: bridged IPv4 through iptables, then the agent; every port is
    filtered before this returns (the agent's ``prepare``, as at a port's plug). The
    agents start together (each takes seconds to import Neutron)."""
    for host in ctx.testbed.hosts:
        ns = ctx.names.host_ns(host.name)
        proc.run(proc.in_netns(ns, ["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"]),
                 what=f"bridge netfilter on {host.name}")
        d = rundir(ctx, host)
        proc.script_daemon(ctx.run, ns, d, AGENT, host.name,
                           [neutron_sg.SYSTEM_PYTHON, "-I", str(SCRIPT), "--driver", "iptables", "--binary", BINARY,
                            f"--lock-path={d}", f"--socket={socket_path(ctx, host)}"], cpus=host.cpus)
    for host in ctx.testbed.hosts:
        d = rundir(ctx, host)
        _wait_ready(d / f"{AGENT}.pid", d / f"{AGENT}.log", host.name)
        command(socket_path(ctx, host), {"op": "prepare", "payload": payload(ctx, host)}, host.name)


def rules_updated(ctx, groups) -> None:
    """The server's notification that ``groups``' rules changed, to every host's agent:
    each refreshes its ports in those groups (Neutron's ``security_groups_rule_updated``)."""
    ids = [neutron_sg.sg_id(ctx.run.run_id, g) for g in groups]
    for host in ctx.testbed.hosts:
        command(socket_path(ctx, host), {"op": "rules_updated", "payload": payload(ctx, host),
                                         "groups": ids}, host.name)


def _wait_ready(pidfile: Path, log: Path, host: str) -> None:
    deadline = time.monotonic() + READY_S
    while not pidfile.exists():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
            raise BuildError(f"Neutron's security-group agent on {host} not ready after {READY_S:.0f} s "
                             f"(log {log}: {' | '.join(tail) or 'empty'})")
        time.sleep(0.1)


def command(sock: Path, cmd: dict, host: str, timeout: float = COMMAND_S) -> dict:
    """One command to the host's agent; its reply, or BuildError with the agent's error."""
    try:
        reply = unixsock.request(sock, cmd, timeout) or {"ok": False, "error": "no reply"}
    except OSError as exc:
        raise BuildError(f"Neutron's security-group agent on {host} ({sock}): {exc}") from None
    if not reply.get("ok"):
        raise BuildError(f"Neutron's security-group agent on {host}: {cmd.get('op')} failed: "
                         f"{reply.get('error')}")
    return reply
