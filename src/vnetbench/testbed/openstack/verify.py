"""After boot, check what the tests assume: each pair where its placement says (same host
or not) and each VM's vCPUs pinned, from the Nova API. Pure: servers and topologies in,
facts and problems out (the builder fetches them, tests feed recorded replies)."""

from __future__ import annotations

from dataclasses import dataclass, field

ADMIN_HOST = "OS-EXT-SRV-ATTR:host"


@dataclass
class Verdict:
    facts: dict = field(default_factory=dict)      # recorded in the run's meta
    problems: list = field(default_factory=list)   # each one makes the bring-up fail
    misplaced: dict = field(default_factory=dict)  # pair -> its problem: where Nova put it is wrong
    warnings: list = field(default_factory=list)   # what could not be verified, and why


def placement(pairs, servers: dict[str, dict], admin: bool) -> Verdict:
    """PAIRS: (name, placement, vm_a, vm_b); SERVERS: vm -> {"host": OS-EXT-SRV-ATTR:host
    or None, "host_id": hostId}. As admin the compute host names decide; otherwise the
    hostId (a per-project hash of the host, equal for equal hosts)."""
    v = Verdict()
    key = "host" if admin else "host_id"
    v.facts["placement_by"] = ADMIN_HOST if admin else "hostId"
    v.facts["hosts"] = {vm: s.get(key) for vm, s in servers.items()}
    for name, where, a, b in pairs:
        ha, hb = servers[a].get(key), servers[b].get(key)
        if not ha or not hb:
            v.problems.append(f"pair {name}: Nova reports no {v.facts['placement_by']} for "
                              f"{a if not ha else b}; cannot tell where it runs")
        elif where == "same-host" and ha != hb:
            v.misplaced[name] = (f"pair {name}: same-host, but {a} is on {ha} and {b} on {hb} "
                                 "(server group affinity not enforced: check the scheduler's "
                                 "ServerGroupAffinityFilter)")
        elif where == "cross-host" and ha == hb:
            v.misplaced[name] = (f"pair {name}: cross-host, but {a} and {b} are both on {ha} "
                                 "(ServerGroupAntiAffinityFilter, or only one compute node)")
    v.problems += v.misplaced.values()
    return v


def host_groups(vms: list[tuple[str, str]], servers: dict[str, dict], admin: bool,
                explicit: list[str]) -> Verdict:
    """VMS: (vm, testbed host) of the VMs in no pair. The VMs of one testbed host share a
    compute node (its affinity server group); with EXPLICIT compute hosts (the testbed's
    hosts in order, zone:host) each is there. Two testbed hosts on one compute node are
    a warning when the scheduler chose (a one-node cloud has no other), naming what it
    means for the tests, and a problem when distinct hosts were asked for."""
    v = Verdict()
    key = "host" if admin else "host_id"
    by_host: dict[str, set] = {}
    for vm, host in vms:
        got = servers[vm].get(key)
        if not got:
            v.problems.append(f"VM {vm}: Nova reports no {'host' if admin else 'hostId'}; "
                              "cannot tell where it runs")
            continue
        by_host.setdefault(host, set()).add(got)
    order = list(dict.fromkeys(h for _, h in vms))
    v.facts["testbed_hosts"] = {h: sorted(by_host.get(h, ())) for h in order}
    for h in order:
        nodes = by_host.get(h, set())
        if len(nodes) > 1:
            v.problems.append(f"testbed host {h}: its VMs are on {len(nodes)} compute nodes "
                              f"({', '.join(sorted(nodes))}); server group affinity not enforced "
                              "(check the scheduler's ServerGroupAffinityFilter)")
        elif explicit and admin and nodes and order.index(h) < len(explicit) \
                and nodes != {explicit[order.index(h)]}:
            v.problems.append(f"testbed host {h}: its VMs are on {next(iter(nodes))}, not on "
                              f"{explicit[order.index(h)]} as asked")
    shared: dict[str, list] = {}
    for h in order:
        if len(by_host.get(h, ())) == 1:
            shared.setdefault(next(iter(by_host[h])), []).append(h)
    for node, hs in shared.items():
        if len(hs) < 2 or (explicit and len(set(explicit)) == 1):     # one host, as asked
            continue
        text = (f"testbed hosts {', '.join(hs)} are one compute node ({node}): traffic between "
                "them does not cross hosts")
        if len(set(explicit)) >= 2:
            v.problems.append(text + " although distinct hosts were asked for")
        else:
            v.warnings.append(text + " (the scheduler placed them: one compute node, or name "
                              "the hosts with --host-a/--host-b as admin)")
    return v


def pinning(topologies: dict[str, dict | None], vcpus: dict[str, int], hosts: dict[str, str],
            admin: bool) -> Verdict:
    """TOPOLOGIES: vm -> the server topology API's reply (microversion 2.78) or None when
    the API is not there. Admin sees ``cpu_pinning`` {vcpu: host cpu}: each vCPU on its
    own host CPU, and no host CPU shared by two VMs of one host. Without admin, Nova hides
    the host side: pinning stays unverified (a warning, not a pass)."""
    v = Verdict()
    used: dict[tuple, str] = {}
    for vm, topo in topologies.items():
        if topo is None:
            v.warnings.append(f"{vm}: the server topology API (compute microversion 2.78) is "
                              "not available; CPU pinning unverified")
            continue
        nodes = topo.get("nodes") or []
        if not nodes:
            v.problems.append(f"{vm}: Nova reports no NUMA topology, so its vCPUs are not "
                              "pinned; use a flavor with hw:cpu_policy=dedicated")
            continue
        if not admin or any("cpu_pinning" not in n for n in nodes):
            v.warnings.append(f"{vm}: CPU pinning unverified: Nova shows the host CPUs only to "
                              "admins (os_compute_api:os-server-topology:host:index)")
            continue
        pins = {int(c): int(h) for n in nodes for c, h in (n.get("cpu_pinning") or {}).items()}
        v.facts[vm] = {str(c): h for c, h in sorted(pins.items())}
        if sorted(pins) != list(range(vcpus[vm])):
            v.problems.append(f"{vm}: vCPUs {sorted(pins)} pinned, the flavor has {vcpus[vm]}; "
                              "use a flavor with hw:cpu_policy=dedicated")
        if len(set(pins.values())) != len(pins):
            v.problems.append(f"{vm}: two vCPUs share a host CPU ({pins})")
        for c, h in pins.items():
            other = used.setdefault((hosts.get(vm), h), vm)
            if other != vm:
                v.problems.append(f"{vm}: host CPU {h} of {hosts.get(vm)} is also {other}'s "
                                  "(dedicated CPUs shared: check cpu_dedicated_set)")
    return v


def unpinned() -> Verdict:
    """Pinning asked off (--unpinned): nothing to verify, and the run says so."""
    return Verdict(facts={"pinning": "off (--unpinned)"},
                   warnings=["CPU pinning off (--unpinned): the guests share host CPUs; "
                             "functional verdicts do not depend on it, throughput and CPU "
                             "figures do"])


def distinct_host_pairs(vms: list[tuple[str, str]], wanted: int) -> list[tuple[str, str]]:
    """Shaker's non-admin fallback: VMS booted without hints, as (vm, hostId); pairs of
    VMs on different hosts, each VM used once, at most WANTED, one pair per pair of
    distinct hostIds first (so pairs spread over the hosts)."""
    by_host: dict[str, list[str]] = {}
    for vm, host in vms:
        by_host.setdefault(host, []).append(vm)
    pairs = []
    while len(pairs) < wanted:
        hosts = sorted((h for h in by_host if by_host[h]), key=lambda h: -len(by_host[h]))
        if len(hosts) < 2:
            break
        pairs.append((by_host[hosts[0]].pop(0), by_host[hosts[1]].pop(0)))
    return pairs
