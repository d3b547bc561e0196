"""How fast a new port carries traffic as the network grows (issue 48, docs/control-plane.md).

The running testbed grows in STEPS of PORTS new ports each (``Deployment.add_port``: a
port plugged as the kind's agent or os-vif plugs a VM's NIC, no VM behind it); the
ports of earlier steps stay, so step k measures its new ports against k x PORTS
existing ones. CONCURRENCY ports are in flight at once. Each new port's timeline, from
the moment it is requested (t0):

* ``requested_ms``: the plug returned (the model's API call: Neutron's port create on
  OVN, the vSwitch port, the namespace);
* ``programmed_ms``: the kind's own readiness signal (vnetbench.testbed.readiness),
  polled per host, one query for all its pending ports: at the time the system says
  (OVN's ``ovn-installed-ts``, ms), else when the poll saw it (resolution: the measured
  poll period, ``poll_period_ms``; each timeline says which, ``programmed_by``);
* ``first_packet_ms``: the first echo reply from a peer VM on another host: ping probes
  every PROBE_INTERVAL_MS from the port (resolution: one interval), with permanent
  neighbour entries on both sides, so ARP's one-second retries are not measured.

A port that has not both within DEADLINE_MS is never ready, named in the record. Per
step: min/p50/p95/p99/max of each stage, ``not_ready``, and the control plane's CPU over
the step (vnetbench.cpu's window: ``cpu_controller_pct`` northd and databases or the
SDN controller and the hosts' ovn-controllers and agents, ``cpu_vswitch_pct`` the hosts'
ovs-vswitchd and ovsdb-server; disjoint parts, nothing counted twice; and per
daemon, ``cpu_ovn_northd_pct``, ``cpu_ovsdb_server_sb_pct``, ``cpu_ovn_controller_pct``
(all hosts') ...: a breakdown of those parts), and the same daemons' resident memory
(vnetbench.memory: MiB at the step's end, ``rss_<daemon>_mib``, and its growth over the
step, ``rss_<daemon>_growth_mib``, per daemon summed over the hosts and per part,
``rss_controller_mib``, ``rss_vswitch_mib``). The added ports are removed at the end.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from vnetbench import cpu, kinds, memory
from vnetbench.battery.common import labels
from vnetbench.errors import VnetbenchError
from vnetbench.results import provenance
from vnetbench.results.record import Result, now
from vnetbench.testbed.model import L2

TEST = "port_ready"
STAGES = ("requested_ms", "programmed_ms", "first_packet_ms")
QUANTILES = (("min", 0.0), ("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
POLL_S = 0.005                  # the readiness poller's pause between two queries of a host
ADDRESS_SPACE = 253             # a default vnet (/24) less its first address: the CLI's bound
_REPLY = re.compile(r"^\[(\d+\.\d+)\] \d+ bytes from")


def check(ports, steps, concurrency, deadline_ms, probe_interval_ms, capacity=ADDRESS_SPACE) -> None:
    """The family's arguments, each refused by name before anything is built."""
    for name, value in (("ports", ports), ("steps", steps), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise VnetbenchError(f"port_ready: {name} = {value!r}: give a whole number of at least 1")
    for name, value in (("probe_interval_ms", probe_interval_ms), ("deadline_ms", deadline_ms)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or value > 3_600_000:
            raise VnetbenchError(f"port_ready: {name} = {value!r}: give milliseconds above 0 "
                                 "and at most an hour")
    if deadline_ms < probe_interval_ms:
        raise VnetbenchError(f"port_ready: deadline_ms = {deadline_ms:g} is shorter than the probe "
                             f"interval ({probe_interval_ms:g} ms): give a longer deadline")
    if ports * steps > capacity:
        raise VnetbenchError(f"port_ready: ports x steps = {ports * steps} exceeds the vnet's "
                             f"{capacity} free addresses: give fewer ports or steps")


def placement(testbed, hosts=None) -> list[tuple[str, str, str]]:
    """(host, vnet, peer VM) for new ports, round-robin over HOSTS (default: every host),
    each peer a VM of the same vnet on another host (first packet crosses the network)."""
    names = list(hosts or [h.name for h in testbed.hosts])
    out = []
    for h in names:
        testbed.host(h)
        peer = next(((v.name, n.vnet) for v in testbed.vms if v.host != h for n in v.nics[:1]), None)
        if peer is None:
            raise VnetbenchError(f"port_ready: host {h!r} has no VM on another host to probe; "
                                 "the testbed needs VMs on two hosts")
        out.append((h, peer[1], peer[0]))
    return out


def quantile(xs, q: float):
    """Nearest-rank quantile of XS (None when empty)."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def summary(timelines, deadline_ms) -> dict:
    """Per stage min/p50/p95/p99/max over the ports ready in time; ``not_ready`` and
    their names."""
    ready = [t for t in timelines if _in_time(t, deadline_ms)]
    out = {"ports": len(timelines), "not_ready": len(timelines) - len(ready)}
    for stage in STAGES:
        xs = [t[stage] for t in ready]
        for q, at in QUANTILES:
            out[f"{stage[:-3]}_{q}_ms"] = quantile(xs, at)
    return out


def _in_time(t, deadline_ms) -> bool:
    return all(t.get(s) is not None and t[s] <= deadline_ms for s in STAGES)


def first_reply(ping_out: str) -> float | None:
    """The wall-clock time of ping -D's first reply line."""
    for line in ping_out.splitlines():
        m = _REPLY.match(line.strip())
        if m:
            return float(m.group(1))
    return None


class Poller:
    """One thread per host asks the kind's readiness of all its pending ports at once."""

    def __init__(self, dep):
        self.dep, self.pending, self.seen, self.said = dep, {}, {}, {}
        self.lock, self.stop, self.periods = threading.Lock(), threading.Event(), []
        self.threads = [threading.Thread(target=self._loop, args=(h.name,), daemon=True)
                        for h in dep.testbed.hosts]
        self.errors = []

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def watch(self, host: str, name: str) -> None:
        with self.lock:
            self.pending.setdefault(host, set()).add(name)

    def forget(self, name: str) -> None:
        with self.lock:
            for names in self.pending.values():
                names.discard(name)

    def _loop(self, host: str) -> None:
        """A port seen ready at the end of a query became ready at most one query and one
        pause earlier: ``periods`` holds that bound per query."""
        while not self.stop.is_set():
            with self.lock:
                names = sorted(self.pending.get(host, ()))
            if names:
                asked = time.time()
                try:
                    found = self.dep.ports_ready(host, names)
                except Exception as exc:    # recorded; the ports then miss their deadline
                    self.errors.append(f"{host}: {exc}")
                    found = {}
                at = time.time()
                with self.lock:
                    for n, said in found.items():   # the system's own time, else ours
                        self.seen.setdefault(n, said if said is not None else at)
                        self.said[n] = said is not None
                        self.pending[host].discard(n)
                self.periods.append(at - asked + POLL_S)
            self.stop.wait(POLL_S)


def _one(dep, poller, host, vnet, peer, deadline_ms, probe_ms, peers_set) -> dict:
    t0 = time.time()
    port = dep.add_port(host, vnet)
    t_req = time.time()
    name = port["name"]
    poller.watch(host, name)
    peer_ip, peer_mac = dep.ip(peer), dep.testbed.vm(peer).nics[0].mac
    left_s = max(probe_ms / 1000, deadline_ms / 1000 - (t_req - t0))
    probe = (f"ip neigh replace {peer_ip} lladdr {peer_mac} nud permanent dev eth0 && "
             f"exec ping -D -n -c 1 -i {probe_ms / 1000:.4f} -w {max(1, int(left_s + 0.999))} {peer_ip}")
    ping = dep.port_popen(name, ["sh", "-c", probe], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    dep.exec(peer, ["ip", "neigh", "replace", port["ip"], "lladdr", port["mac"], "nud", "permanent",
                    "dev", "eth0"])
    peers_set.append((peer, port["ip"]))
    out, _ = ping.communicate(timeout=left_s + 10)
    first = first_reply(out)
    end = t0 + deadline_ms / 1000
    while name not in poller.seen and time.time() < end:
        time.sleep(POLL_S)
    poller.forget(name)
    seen = poller.seen.get(name)
    ms = lambda t: None if t is None else (t - t0) * 1000.0        # noqa: E731
    return {"name": name, "host": host, "peer": peer, "requested_ms": ms(t_req),
            "programmed_ms": ms(seen), "first_packet_ms": ms(first),
            "programmed_by": "signal" if poller.said.get(name) else "poll"}


def step(dep, plan, ports, concurrency, deadline_ms, probe_ms, peers_set) -> tuple[list, dict, list, dict]:
    """PORTS new ports at CONCURRENCY, placed round-robin on PLAN; their timelines, the
    control plane's CPU and memory over the step, the poll periods, and how the memory
    was read (its RSS is read outside the CPU window: our reads are not the daemons' CPU)."""
    with memory.Window(dep) as mem, cpu.Window(dep) as window, Poller(dep) as poller:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futs = [pool.submit(_one, dep, poller, *plan[i % len(plan)], deadline_ms, probe_ms, peers_set)
                    for i in range(ports)]
            timelines = [f.result() for f in futs]
    if poller.errors:
        raise VnetbenchError(f"port_ready: readiness query failed: {poller.errors[0]}")
    # per daemon where the window read this machine's processes (a cloud's nodes: their
    # collectors' host CPU only)
    split = getattr(window, "split", None)
    figures = {**window.metrics(), **(cpu.daemon_metrics(split) if split else {}), **mem.metrics()}
    return timelines, figures, poller.periods, mem.result


def run(dep, ports=20, steps=2, concurrency=8, deadline_ms=10000, probe_interval_ms=1.0,
        hosts=None) -> list[Result]:
    """STEPS steps of PORTS new ports; one Result per step (point: the existing ports and
    the chassis)."""
    plan = placement(dep.testbed, hosts)
    free = min(_free(dep, vnet) for _, vnet, _ in plan)
    check(ports, steps, concurrency, deadline_ms, probe_interval_ms, capacity=free)
    args = {"ports": ports, "steps": steps, "concurrency": concurrency, "deadline_ms": deadline_ms,
            "probe_interval_ms": probe_interval_ms}
    results, added, peers_set = [], [], []
    base = sum(len(v.nics) for v in dep.testbed.vms)
    before = set(dep.added_ports())
    try:
        for k in range(steps):
            started = now()
            timelines, figures, periods, mem = step(dep, plan, ports, concurrency, deadline_ms,
                                                    probe_interval_ms, peers_set)
            added += [t["name"] for t in timelines]
            results.append(record(dep, args, base + k * ports, timelines, figures,
                                  {"poll_periods": periods, "memory": mem, "started": started,
                                   "port_hosts": [h for h, _, _ in plan]}))
    finally:
        _unwind(dep, added + _stray(dep, before | set(added)), peers_set)
    return results


def chassis(testbed) -> dict:
    """How many hosts a step ran against: each runs the kind's agent (on OVN a chassis,
    what ovn-controller registers; the testbed's light ones among them), and every one
    follows every change, so a step's figures grow with their count (docs/control-plane.md,
    "Many chassis"). ``chassis`` is a parameter of the record, hence of its history cell
    and its report row: steps on 8 and on 50 chassis are never one cell."""
    return {"chassis": len(testbed.hosts), "light_chassis": sum(1 for h in testbed.hosts if h.light)}


def record(dep, args: dict, existing: int, timelines: list, figures: dict, how: dict) -> Result:
    """One step's Result: ARGS (the family's arguments) and the chassis as its
    parameters, the summary and FIGURES (CPU, memory) as samples; HOW: the poll periods,
    the memory window's description, the start time and the hosts the ports went to."""
    counts = chassis(dep.testbed)
    params = {**args, "existing": existing, "chassis": counts["chassis"]}
    pair = SimpleNamespace(name="new-ports", placement="cross-host", path=L2)
    never = [f"{t['name']}@{t['host']}" for t in timelines if not _in_time(t, args["deadline_ms"])]
    periods = how["poll_periods"]
    figures = {**summary(timelines, args["deadline_ms"]), **figures}
    r = Result(test=TEST, labels=labels(dep, pair, TEST, **params),
               samples={k: [v] for k, v in figures.items() if v is not None},
               provenance=provenance.collect(dep, []), started=how["started"], finished=now(),
               extra={"never_ready": never, "timelines": timelines,
                      "signal": kinds.of(dep.testbed).port_ready_signal,
                      "poll_period_ms": 1000 * sum(periods) / len(periods) if periods else None,
                      "probe_resolution_ms": args["probe_interval_ms"], "existing_ports": existing,
                      **counts, "port_hosts": how["port_hosts"], "memory": how["memory"]})
    r.labels["point"] = point(existing, counts["chassis"])
    return r


def point(existing: int, chassis_count: int) -> str:
    """A step's point, as rows and series name it: the ports that exist and the chassis."""
    return f"{existing} existing, {chassis_count} chassis"


def _free(dep, vnet) -> int:
    """Addresses left on VNET for new ports (vnetbench.testbed.netns.ports.free_addresses
    is the backend's: ask the run's count from its meta)."""
    tb = dep.testbed
    used = {str(n.ip) for v in tb.vms for n in v.nics if n.vnet == vnet}
    used |= {p["ip"] for p in dep.added_ports().values() if p["vnet"] == vnet}
    return max(0, tb.vnet(vnet).cidr.num_addresses - 3 - len(used) - len(tb.routers) - 1)


def _stray(dep, known) -> list:
    """Ports this family added but no step returned (a step that failed half-way)."""
    return [n for n in dep.added_ports() if n not in known]


def _unwind(dep, names, peers_set) -> None:
    for name in names:
        dep.remove_port(name)
    for peer, ip in peers_set:
        dep.exec(peer, ["ip", "neigh", "del", ip, "dev", "eth0"])
