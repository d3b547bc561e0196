"""Control-plane faults: stop, kill, start, restart a kind's controller processes, and
cut or heal the management network. Generic: each kind lists its components and
how to stop/start one (its driver's ``NetnsDriver.control``); the management network is the same for all."""

from __future__ import annotations

from vnetbench import kinds
from vnetbench.errors import VnetbenchError


def _ops(dep) -> dict:
    ops = kinds.netns_driver(dep).control() if kinds.of(dep).controlled else None
    if ops is None:
        having = [k.name for k in kinds.all_kinds() if k.controlled]
        raise VnetbenchError(f"run {dep.run_id} ({dep.testbed.vswitch.kind}) has no controller; "
                             f"controller faults apply to: {', '.join(having)}")
    return ops


def components(dep) -> list[str]:
    return _ops(dep)["components"](dep)


def active(dep) -> str:
    """The instance doing the work (OVN: the ovn-northd holding the SB lock); a kind
    without standby instances: its first (ovs-openflow's master)."""
    find = _ops(dep).get("active")
    return find(dep) if find else components(dep)[0]


def sync(dep, timeout: float = 10.0) -> float | None:
    """Seconds until the control plane has carried a new configuration change through
    (OVN: NB -> northd -> SB); None for a kind without such a probe (a reactive
    controller shows its work by new flows: a new pair's ping)."""
    probe = _ops(dep).get("sync")
    return probe(dep, timeout) if probe else None


def _pick(dep, component: str | None) -> list[str]:
    names = components(dep)
    if component is None:
        return names
    if component not in names:
        raise VnetbenchError(f"run {dep.run_id}: no controller component {component!r}; "
                             f"use one of: {', '.join(names)}")
    return [component]


def stop(dep, component: str | None = None, graceful: bool = True) -> list[str]:
    """SIGTERM (``graceful``) or SIGKILL; every component when none is named."""
    picked = _pick(dep, component)
    for name in picked:
        _ops(dep)["stop"](dep, name, graceful=graceful)
    return picked


def start(dep, component: str | None = None) -> list[str]:
    picked = _pick(dep, component)
    for name in reversed(picked):         # databases before the daemons that need them
        _ops(dep)["start"](dep, name)
    return picked


def partition(dep, host: str | None = None, heal: bool = False) -> list[str]:
    """Cut (or heal) the management link of ``host`` (every host when None) at the
    controller's bridge; the tenant underlay is untouched."""
    if not kinds.of(dep.testbed).controlled:     # only a controlled kind has a management network
        raise VnetbenchError(f"run {dep.run_id} ({dep.testbed.vswitch.kind}) has no management "
                             "network to partition")
    hosts = [dep.testbed.host(host).name] if host else [h.name for h in dep.testbed.hosts]
    for h in hosts:
        dep.set_mgmt_link(h, up=heal)
    return hosts
