"""Running Neutron's security-group agent (``sg_agent.py``) on the emulated hosts
of a kind modelled on a Neutron L2 agent (linuxbridge: the iptables firewall; ovs: the
openvswitch firewall): start one per host, hand it the host's ports, tell it of rule
changes. The kind says which driver and how it names devices (an ``Agent``).

Everything the agent makes lives in the host's namespace (iptables chains, ipsets,
conntrack entries) or the host's own OVS (flows); the agent is a journaled daemon
stopped by its pidfile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from vnetbench import unixsock
from vnetbench.errors import BuildError
from vnetbench.kinds.neutron import sg as neutron_sg
from vnetbench.linux import proc

AGENT = "neutron-sg-agent"
SCRIPT = Path(neutron_sg.__file__).with_name("sg_agent.py")
READY_S = 30.0                           # importing neutron: 2-4 s here, more on a busy host
COMMAND_S = 60.0


@dataclass(frozen=True)
class Agent:
    """How a kind runs Neutron's agent: the firewall ``driver``, the agent ``binary`` its
    chains are named after, extra arguments per host, and the port's ``device`` name and
    ``bridge`` (or None) as ``neutron_sg.payload`` takes them, given the build context."""
    driver: str
    binary: str
    device: Callable                     # (ctx) -> (vm, nic index) -> device
    bridge: Callable | None = None       # (ctx) -> (vnet) -> bridge name
    args: Callable = field(default=lambda ctx, host: [])
    trusted: bool = False                # the host's router ports go to the driver as trusted


def rundir(ctx, host) -> Path:
    d = ctx.run.dir / host.name
    d.mkdir(parents=True, exist_ok=True)
    return d


def socket_path(ctx, host) -> Path:
    return rundir(ctx, host) / f"{AGENT}.sock"


def payload(agent: Agent, ctx, host) -> dict:
    """Neutron's RPC view of this host's ports, with the kind's device and bridge names."""
    return neutron_sg.payload(ctx.testbed, ctx.run.run_id, host.name, device=agent.device(ctx),
                              bridge=agent.bridge and agent.bridge(ctx), trusted=agent.trusted)


def start(agent: Agent, ctx) -> None:
    """The agent on every host; every port is filtered before this returns (the agent's
    ``prepare``, as at a port's plug). The agents start together (each takes seconds to
    import Neutron)."""
    for host in ctx.testbed.hosts:
        d = rundir(ctx, host)
        proc.script_daemon(ctx.run, ctx.names.host_ns(host.name), d, AGENT, host.name,
                           [neutron_sg.SYSTEM_PYTHON, "-I", str(SCRIPT), "--driver", agent.driver,
                            "--binary", agent.binary, *agent.args(ctx, host),
                            f"--lock-path={d}", f"--socket={socket_path(ctx, host)}"], cpus=host.cpus)
    for host in ctx.testbed.hosts:
        d = rundir(ctx, host)
        _wait_ready(d / f"{AGENT}.pid", d / f"{AGENT}.log", host.name)
        command(socket_path(ctx, host), {"op": "prepare", "payload": payload(agent, ctx, host)},
                host.name)


def prepare(agent: Agent, ctx, host, devices: list) -> None:
    """HOST's agent filters DEVICES (ports that appeared on it: a migration's re-plug)."""
    command(socket_path(ctx, host), {"op": "prepare", "payload": payload(agent, ctx, host),
                                     "devices": list(devices)}, host.name)


def remove(ctx, host, devices: list) -> None:
    """HOST's agent stops filtering DEVICES (ports that left its bridge)."""
    command(socket_path(ctx, host), {"op": "remove", "devices": list(devices)}, host.name)


def ovs_restarted(agent: Agent, ctx, host) -> None:
    """HOST's OVS restarted: its agent reinitialises the driver and filters every port of
    the host again (Neutron's OVS agent on OVS_RESTARTED)."""
    command(socket_path(ctx, host), {"op": "ovs_restarted", "payload": payload(agent, ctx, host)},
            host.name)


def rules_updated(agent: Agent, ctx, groups) -> None:
    """The server's notification that ``groups``' rules changed, to every host's agent:
    each refreshes its ports in those groups (Neutron's ``security_groups_rule_updated``)."""
    ids = [neutron_sg.sg_id(ctx.run.run_id, g) for g in groups]
    for host in ctx.testbed.hosts:
        command(socket_path(ctx, host), {"op": "rules_updated", "payload": payload(agent, ctx, host),
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
