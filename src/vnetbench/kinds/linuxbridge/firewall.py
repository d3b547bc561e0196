"""Security groups on a linuxbridge host, as the linuxbridge agent enforces them:
Neutron's own iptables firewall driver (``SecurityGroupAgentRpc`` + the iptables driver
of Debian's python3-neutron, ``vnetbench.kinds.neutron.sg_agent``) running in the host's
namespace, per-port chains with ``physdev`` matches on the VM ports, ipsets for remote
groups, a conntrack zone per network. The bridge filters bridged IPv4 through iptables
(``net.bridge.bridge-nf-call-iptables``, per namespace).

Everything it makes (chains, ipsets, conntrack entries) lives in the host's namespace
and goes with it; the agent is a journaled daemon stopped by its pidfile.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from vnetbench.kinds.neutron import sg as neutron_sg, sg_control as neutron_sg_control
from vnetbench.linux import proc

AGENT = neutron_sg_control.Agent(
    driver="iptables",
    binary="neutron-linuxbridge-agent",      # chain names: neutron-linuxbri-*
    device=lambda ctx: lambda vm, n: ctx.names.vm_port(ctx.vm_index(vm), n),
    bridge=lambda ctx: lambda vnet: ctx.names.lb_bridge(ctx.vnet_index(vnet)))


def why_not(caps) -> str | None:
    """What this machine lacks to run Neutron's iptables firewall in a namespace."""
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        return "the kernel's bridge netfilter (br_netfilter: net.bridge.bridge-nf-call-iptables) is missing"
    for prog, pkg in (("iptables", "iptables"), ("ipset", "ipset")):
        if not shutil.which(prog):
            return f"{prog} not found on PATH (Debian package {pkg}; 'make install' installs it)"
    return neutron_sg.neutron_python_missing()


def start(ctx) -> None:
    """On every host: bridged IPv4 through iptables, then the agent."""
    for host in ctx.testbed.hosts:
        proc.run(proc.in_netns(ctx.names.host_ns(host.name),
                               ["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"]),
                 what=f"bridge netfilter on {host.name}")
    neutron_sg_control.start(AGENT, ctx)


def rules_updated(ctx, groups) -> None:
    neutron_sg_control.rules_updated(AGENT, ctx, groups)
