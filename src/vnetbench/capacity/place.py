"""Where a workload's VMs go, two ways, and what each host's vSwitch is then asked to do.

- ``agnostic``: the seed's Figure 1 (``SIMPLECOUNT``): VMs in the order given fill the
  current host while its cores and memory last, then the next host. Nothing about
  traffic: what most cloud schedulers still do.
- ``aware``: the seed's Figure 9 idea -- a host whose vSwitch would become the
  bottleneck is no candidate -- with the measured capacity profile as the switch model,
  and improved: flows are placed heaviest first, each end on the candidate host that
  keeps every host within its measured vSwitch capacity and adds the least data-plane
  CPU over all hosts (so a heavy pair shares a host when the same-host path costs less
  than a tunnel's two ends, and is split when that host's vSwitch has no room), then
  fills the fewest hosts. Never past a host's measured capacity: a workload that cannot
  be placed so is refused, naming the flow or VM and why. Each decision tries a bounded
  set of hosts (``_options``, found through ``freeindex`` and a heap, never by scanning
  every host), so a plan's time grows with its flows, not with hosts x VMs x VMs: hosts
  that all differ cost no more than alike ones.

The switch model (``Model``) per host and role (``vnetbench.capacity.profile``):
utilisation = sum over roles of load / capacity (each role's capacity scaled by the
host's data-plane CPUs over the measured host's), which is the seed's Equation 3
(``BW_out = min(sum VM_i, saturation bw)``) with one saturation bandwidth per role; the
data-plane CPU predicted by the measured CPU-vs-load curve of each role (linear between
measured points, through the origin, the last point's cost per Gbit/s beyond it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from vnetbench.capacity.files import HostSpec, Hosts, Workload
from vnetbench.capacity.freeindex import FreeIndex
from vnetbench.errors import VnetbenchError
from vnetbench.results.bound import SATURATED_PCT

ROLE_OF = {"same": "same-host", "tx": "cross-host", "rx": "cross-host"}


class PlanInfeasible(VnetbenchError):
    """No placement within the hosts' cores, memory and measured vSwitch capacity."""


class Curve:
    """One role of one cell: capacity (Gbit/s) and the data plane's CPU at a load."""

    def __init__(self, role: dict):
        self.capacity = role["capacity_gbps"]["mean"]
        self.how = role["capacity_gbps"]["how"]
        self.cpus = role.get("dataplane_cpus", 1)
        self.points = [(p["load_gbps"]["mean"], p["cpu_pct"]["mean"]) for p in role["points"]]
        self.measured_to = self.points[-1][0]

    def cpu(self, load: float) -> float:
        """% of one CPU at ``load`` Gbit/s."""
        if load <= 0:
            return 0.0
        prev = (0.0, 0.0)
        for x, y in self.points:
            if load <= x:
                return prev[1] + (y - prev[1]) * (load - prev[0]) / (x - prev[0])
            prev = (x, y)
        x, y = self.points[-1]
        return y / x * load


class Model:
    """The capacity profile's cell of each host (by its vSwitch kind and the network type)."""

    def __init__(self, profile: dict, hosts: Hosts, source: str = "the capacity profile"):
        self.source = source
        self.cells, self.curves = {}, {}
        for h in hosts.hosts:
            key = (h.vswitch, hosts.network)
            if key not in self.cells:
                self.cells[key] = _cell(profile, *key, source)
                self.curves[key] = {r: Curve(v) for r, v in self.cells[key]["roles"].items()}

    def curve(self, host: HostSpec, network: str, role: str) -> Curve:
        curves = self.curves[(host.vswitch, network)]
        if role not in curves:
            room = "double_room" if role == "same" else "single_room"
            raise PlanInfeasible(f"{self.source}: {host.vswitch}/{network} has no '{role}' role ("
                                 f"{ROLE_OF[role]} pairs were never measured); run rally-tasks/"
                                 f"scale.yaml with accommodation [pair, {room}] and rebuild the profile")
        return curves[role]

    def capacity(self, host: HostSpec, network: str, role: str) -> float | None:
        """Gbit/s ``host``'s vSwitch carries in ``role`` alone: the measured capacity scaled
        by its data-plane CPUs over the measured host's (None: the role was never measured)."""
        c = self.curves[(host.vswitch, network)].get(role)
        return None if c is None else c.capacity * host.dataplane_cpus / c.cpus

    def conn_capacity(self, host: HostSpec, network: str, placement: str) -> float | None:
        f = (self.cells[(host.vswitch, network)].get("new_conn_s") or {}).get(placement)
        return None if f is None else f["mean"]


def _cell(profile: dict, vswitch: str, network: str, source: str) -> dict:
    found = [c for c in profile["cells"] if c["vswitch"] == vswitch and c["network"] == network
             and c["roles"]]        # a cell of single-pair figures only has no host capacity
    if not found:
        have = ", ".join(sorted({f"{c['vswitch']}/{c['network']}" for c in profile["cells"]})) or "none"
        raise PlanInfeasible(f"{source}: no cell for {vswitch}/{network} (it has {have}); measure it "
                             "(rally-tasks/scale.yaml) and rebuild the profile, or plan for a kind it has")
    if len(found) > 1:
        what = "; ".join(f"backend {c.get('backend')}, datapath {c.get('datapath')}, MTU "
                         f"{c.get('tenant_mtu')}, security groups {c.get('security_groups')}" for c in found)
        raise PlanInfeasible(f"{source}: {len(found)} cells for {vswitch}/{network} ({what}); "
                             "build the profile from the records of the one that applies")
    return found[0]


@dataclass
class HostLoad:
    """What one host is asked to carry under a placement."""
    host: HostSpec
    vms: list = field(default_factory=list)
    cores: int = 0
    memory_mb: int = 0
    gbps: dict = field(default_factory=lambda: {"tx": 0.0, "rx": 0.0, "same": 0.0})
    conn: dict = field(default_factory=lambda: {"same-host": 0.0, "cross-host": 0.0})

    def fits(self, vm) -> bool:
        return (self.cores + vm.vcpus <= self.host.cores
                and self.memory_mb + vm.memory_mb <= self.host.memory_mb)

    def add_vm(self, vm) -> None:
        self.vms.append(vm.name)
        self.cores += vm.vcpus
        self.memory_mb += vm.memory_mb


class State:
    """A placement being built: VM -> host and every host's load, kept incrementally."""

    def __init__(self, workload: Workload, hosts: Hosts, model: Model | None):
        self.workload, self.hosts, self.model = workload, hosts, model
        self.where: dict[str, str] = {}
        self.load = {h.name: HostLoad(h) for h in hosts.hosts}
        self.used: set[str] = set()
        self.order = {h.name: i for i, h in enumerate(hosts.hosts)}
        self._vms = {v.name: v for v in workload.vms}
        self.flows_of: dict[str, list] = {v.name: [] for v in workload.vms}
        for f in workload.flows:
            self.flows_of[f.src].append(f)
            self.flows_of[f.dst].append(f)
        # indexes by free capacity (``freeindex``): the first host that fits, the first
        # empty one of each vSwitch kind (most data-plane CPUs first), the least-loaded in use
        self.free = FreeIndex([h.name for h in hosts.hosts], [(h.cores, h.memory_mb) for h in hosts.hosts])
        by_kind: dict[str, list] = {}
        for h in hosts.hosts:
            by_kind.setdefault(h.vswitch, []).append(h)
        self.empty = {kind: FreeIndex([h.name for h in hs], [(h.cores, h.memory_mb) for h in hs])
                      for kind, hs in ((k, sorted(v, key=lambda h: (-h.dataplane_cpus, self.order[h.name])))
                                       for k, v in by_kind.items())}
        self.smallest = (min((v.vcpus for v in workload.vms), default=1),
                         min((v.memory_mb for v in workload.vms), default=1))
        self._heap: list = []          # (load, order, version, host): stale entries skipped
        self._version: dict[str, int] = {}
        self._cpu: dict[str, tuple] = {}     # host -> (version, data-plane CPU as loaded)

    def deltas(self, moves: dict[str, str]) -> dict:
        """host -> ({role: Gbit/s}, {placement: conn/s}) added by placing ``moves``
        (VM -> host). A flow whose other end is not placed yet is *reserved* on the
        placed end's host as if its peer went elsewhere (tx or rx: the dearer case), so a
        host is never filled so full that its VMs' peers can go nowhere; once the peer is
        placed, the reservation becomes the flow's real roles."""
        out: dict = {}
        seen = set()

        def add(host, role, f, sign=1.0):
            g, c = out.setdefault(host, ({}, {}))
            g[role] = g.get(role, 0.0) + sign * f.gbps
            c[ROLE_OF[role]] = c.get(ROLE_OF[role], 0.0) + sign * f.new_conn_s

        for vm in moves:
            for f in self.flows_of[vm]:
                if id(f) in seen:
                    continue
                seen.add(id(f))
                a = moves.get(f.src) or self.where.get(f.src)
                b = moves.get(f.dst) or self.where.get(f.dst)
                if a is None or b is None:          # reserve on the end placed now
                    add(a or b, "tx" if a else "rx", f)
                    continue
                if f.src in self.where:              # was reserved on its host: release
                    add(a, "tx", f, -1.0)
                elif f.dst in self.where:
                    add(b, "rx", f, -1.0)
                for host, role in ([(a, "same")] if a == b else [(a, "tx"), (b, "rx")]):
                    add(host, role, f)
        return out

    def place(self, moves: dict[str, str]) -> None:
        touched = set(moves.values())
        for host, (g, c) in self.deltas(moves).items():
            touched.add(host)
            hl = self.load[host]
            for r, x in g.items():
                hl.gbps[r] += x
            for p, x in c.items():
                hl.conn[p] += x
        for vm, host in moves.items():
            self.where[vm] = host
            if host not in self.used:
                self.used.add(host)
                self.empty[self.load[host].host.vswitch].set(host, -1, -1)
            self.load[host].add_vm(self._vms[vm])
        for host in moves.values():
            hl = self.load[host]
            self.free.set(host, hl.host.cores - hl.cores, hl.host.memory_mb - hl.memory_mb)
        for host in touched:
            self._version[host] = self._version.get(host, 0) + 1
            if self._room(host):
                heapq.heappush(self._heap, (sum(self.load[host].gbps.values()), self.order[host],
                                            self._version[host], host))

    def _room(self, host: str) -> bool:
        """Whether ``host`` still fits the workload's smallest VM (a full host leaves the heap)."""
        hl = self.load[host]
        return (hl.host.cores - hl.cores >= self.smallest[0]
                and hl.host.memory_mb - hl.memory_mb >= self.smallest[1])

    def least_loaded(self, k: int, vms, exclude=()) -> list[str]:
        """Up to ``k`` hosts in use with the least vSwitch load that fit one of ``vms``,
        popping at most ``4 k`` entries of the heap (stale ones are dropped)."""
        out, popped, valid = [], 0, []
        while self._heap and len(out) < k and popped < 4 * k:
            entry = heapq.heappop(self._heap)
            host = entry[3]
            if entry[2] != self._version.get(host) or not self._room(host):
                continue
            popped += 1
            valid.append(entry)
            if host not in exclude and any(self.load[host].fits(v) for v in vms):
                out.append(host)
        for entry in valid:
            heapq.heappush(self._heap, entry)
        return out

    def utilisation(self, host: str, extra=({}, {})) -> tuple[float, float | None]:
        """(vSwitch bandwidth utilisation, new-connection utilisation or None) of
        ``host`` with ``extra`` loads added."""
        hl, net = self.load[host], self.hosts.network
        util = 0.0
        for role, x in hl.gbps.items():
            x += extra[0].get(role, 0.0)
            if x > 0:
                self.model.curve(hl.host, net, role)        # a role never measured: named
                util += x / self.model.capacity(hl.host, net, role)
        conn, known = 0.0, False
        for placement, x in hl.conn.items():
            x += extra[1].get(placement, 0.0)
            cap = self.model.conn_capacity(hl.host, net, placement)
            if x > 0 and cap:
                conn += x / (cap * hl.host.dataplane_cpus)
                known = True
        return util, (conn if known else None)

    def cpu(self, host: str, extra=({}, {})) -> float:
        hl = self.load[host]
        if not extra[0]:            # the host as it is: asked once per option scored, cached
            cached = self._cpu.get(host)
            if cached is not None and cached[0] == self._version.get(host):
                return cached[1]
            value = sum(self.model.curve(hl.host, self.hosts.network, r).cpu(x)
                        for r, x in hl.gbps.items() if x > 0)
            self._cpu[host] = (self._version.get(host), value)
            return value
        return sum(self.model.curve(hl.host, self.hosts.network, r).cpu(x + extra[0].get(r, 0.0))
                   for r, x in hl.gbps.items() if x + extra[0].get(r, 0.0) > 0)


def agnostic(workload: Workload, hosts: Hosts) -> dict[str, str]:
    """The seed's Figure 1 on every host in turn: VM -> host."""
    state = State(workload, hosts, None)
    i = 0
    for vm in workload.vms:
        while i < len(hosts.hosts) and not state.load[hosts.hosts[i].name].fits(vm):
            i += 1
        if i == len(hosts.hosts):
            raise PlanInfeasible(f"network-agnostic packing: VM {vm.name} ({vm.vcpus} vCPUs, "
                                 f"{vm.memory_mb} MB) fits on no host after {len(state.where)} VMs "
                                 "(cores or memory run out); add hosts or shrink the workload")
        state.place({vm.name: hosts.hosts[i].name})
    return state.where


def aware(workload: Workload, hosts: Hosts, model: Model) -> dict[str, str]:
    """Heaviest flow first, each unplaced end where the measured vSwitch capacity holds
    and the least data-plane CPU is added: VM -> host."""
    state = State(workload, hosts, model)
    _peaks(workload, hosts, model)
    wide = WIDE_SEARCHES
    for f in sorted(workload.flows, key=lambda f: (-f.gbps, -f.new_conn_s)):
        new = [v for v in (f.src, f.dst) if v not in state.where]
        if not new:
            continue
        best = _best(state, new, _options(state, new))
        if best is None and wide > 0:   # a wider search before refusing, a bounded number of times
            wide -= 1
            best = _best(state, new, _options(state, new, wide=True))
        if best is None:
            searched = "" if wide else (f" (searched its peers' hosts, the {NEAREST} least-loaded in use and "
                                        "an empty host of each kind: the wider searches are spent)")
            raise PlanInfeasible(f"network-aware placement: flow {f.src} -> {f.dst} ({f.gbps:g} Gbit/s) "
                                 f"fits no host{searched}: {_why(state, new)}; add hosts, give them more "
                                 "data-plane CPUs, or lower the load")
        state.place(best[1])
    for vm in workload.vms:           # VMs that send nothing: cores and memory only
        if vm.name in state.where:
            continue
        host = state.free.first(vm.vcpus, vm.memory_mb)
        if host is None:
            raise PlanInfeasible(f"network-aware placement: VM {vm.name} ({vm.vcpus} vCPUs, "
                                 f"{vm.memory_mb} MB) fits on no host (cores or memory run out); "
                                 "add hosts or shrink the workload")
        state.place({vm.name: host})
    return state.where


def _peaks(workload, hosts, model) -> None:
    """The seed's first check: a flow's peak must fit one host's vSwitch at all."""
    kinds = {(h.vswitch, h.dataplane_cpus): h for h in hosts.hosts}.values()
    best = max((model.capacity(h, hosts.network, role) or 0.0
                for h in kinds for role in ("same", "tx", "rx")), default=0.0)
    for f in workload.flows:
        if f.peak_gbps > best:
            raise PlanInfeasible(f"network-aware placement: flow {f.src} -> {f.dst} peaks at "
                                 f"{f.peak_gbps:g} Gbit/s, more than any host's vSwitch carries "
                                 f"({best:.3g} Gbit/s measured); split the flow or use a faster vSwitch")


NEAREST = 16        # least-loaded hosts in use tried for a flow's new ends, beside its peers' hosts
PEERS = 16          # hosts of a VM's placed peers tried (a hub VM has thousands)
WIDE = 64           # least-loaded hosts in use tried by a wider search before refusing
WIDE_SEARCHES = 32  # wider searches per plan (each scores a few times WIDE options)
SPLIT = 4           # best hosts for a pair's first VM tried with every host for the second


def _options(state: State, new: list[str], wide: bool = False):
    """The moves tried for a flow's unplaced ends, as a scheduler's filter and weigher
    would pick hosts, bounded whatever the data centre's size: the hosts of the VMs'
    placed peers (where they may share a host with them), the ``NEAREST`` least-loaded
    hosts in use that fit, and of each vSwitch kind the first empty host that fits (empty
    hosts of one kind are alike but for their data-plane CPUs: the most first). A pair
    of new VMs may share one host or take two."""
    vms = [state._vms[v] for v in new]
    peers: list[str] = []
    for vm in new:
        for f in state.flows_of.get(vm, ()):
            h = state.where.get(f.dst if f.src == vm else f.src)
            if h is not None and h not in peers and len(peers) < PEERS:
                peers.append(h)
    used = state.least_loaded(WIDE if wide else NEAREST, vms, exclude=set(peers))
    common = sorted(peers + used, key=state.order.get)
    if len(vms) == 1:
        v = vms[0]
        hosts = common + [e for e in (idx.first(v.vcpus, v.memory_mb) for idx in state.empty.values()) if e]
        for h in hosts:
            if state.load[h].fits(v):
                yield {v.name: h}
        return
    a, b = vms
    empty_a, empty_b = [], []
    for idx in state.empty.values():
        both = idx.first(a.vcpus + b.vcpus, a.memory_mb + b.memory_mb)
        if both:
            yield {a.name: both, b.name: both}
        ea = idx.first(a.vcpus, a.memory_mb)
        eb = idx.first(b.vcpus, b.memory_mb, skip=ea)       # two ends on two empty hosts
        empty_a += [ea] if ea else []
        empty_b += [eb] if eb else []
    for h in common:
        if _fits_both(state.load[h], a, b):
            yield {a.name: h, b.name: h}
    # split: the SPLIT best hosts for a alone (its flow to b reserved as if b went
    # elsewhere), each with every host for b -- linear in the candidates, not quadratic
    firsts = sorted((score, state.order[h], h) for h in common + empty_a if state.load[h].fits(a)
                    for score in [_score(state, {a.name: h})] if score is not None)
    for _, _, ha in firsts[:SPLIT]:
        for hb in common + empty_b:
            if hb != ha and state.load[hb].fits(b):
                yield {a.name: ha, b.name: hb}


def _fits_both(hl: HostLoad, a, b) -> bool:
    return (hl.cores + a.vcpus + b.vcpus <= hl.host.cores
            and hl.memory_mb + a.memory_mb + b.memory_mb <= hl.host.memory_mb)


def _best(state: State, new: list[str], options):
    best = None
    for moves in options:
        score = _score(state, moves)
        if score is not None and (best is None or score < best[0]):
            best = (score, moves)
    return best


def _score(state: State, moves: dict) -> tuple | None:
    """(data-plane CPU added over all hosts, hosts in use, worst utilisation), or None
    when a host would exceed its measured vSwitch capacity."""
    deltas = state.deltas(moves)
    added, worst = 0.0, 0.0
    for host, extra in deltas.items():
        util, conn = state.utilisation(host, extra)
        if util > 1 + 1e-9 or (conn is not None and conn > 1 + 1e-9):
            return None
        worst = max(worst, util, conn or 0.0)
        added += state.cpu(host, extra) - state.cpu(host)
    in_use = len(state.used) + len({h for h in moves.values() if h not in state.used})
    return (round(added, 6), in_use, worst)


def _why(state: State, new: list[str]) -> str:
    room = [h for h in state.hosts.hosts if all(state.load[h.name].fits(state._vms[v]) for v in new)]
    if not room:
        return "no host has the cores and memory left"
    return f"{len(room)} host(s) have the cores and memory, but the load would exceed their measured vSwitch capacity"


def predict(workload: Workload, hosts: Hosts, model: Model, where: dict[str, str]) -> list[dict]:
    """Per host: its VMs, cores and memory used, the Gbit/s offered to its vSwitch by role,
    utilisation of its measured capacity, whether (and by how much) it is overloaded, and
    what it then carries: each host past its capacity passes capacity/offered of every
    flow through it (Equation 3: min(offered, capacity)), a flow gets the least share of
    its two hosts, and the predicted data-plane CPU is that of the carried load."""
    state = State(workload, hosts, model)
    state.place(dict(where))
    util = {h: state.utilisation(h) for h, hl in state.load.items() if hl.vms}
    share = {h: 1.0 / max(u[0], u[1] or 0.0, 1.0) for h, u in util.items()}
    carried = {h: {"tx": 0.0, "rx": 0.0, "same": 0.0} for h in util}
    for f in workload.flows:
        a, b = where[f.src], where[f.dst]
        g = f.gbps * min(share[a], share[b])
        for host, role in ([(a, "same")] if a == b else [(a, "tx"), (b, "rx")]):
            carried[host][role] += g
    rows = []
    for h in hosts.hosts:
        if h.name not in util:
            continue
        hl, (u, conn) = state.load[h.name], util[h.name]
        worst = max(u, conn or 0.0)
        curve = lambda r: state.model.curve(h, hosts.network, r)  # noqa: E731
        rows.append({
            "host": h.name, "vms": list(hl.vms), "cores": [hl.cores, h.cores],
            "memory_mb": [hl.memory_mb, h.memory_mb],
            "gbps": {r: round(x, 6) for r, x in hl.gbps.items() if x},
            "offered_gbps": round(sum(hl.gbps.values()), 6),
            "utilisation": round(u, 4), "conn_utilisation": None if conn is None else round(conn, 4),
            "overloaded_pct": round(100 * (worst - 1), 1) if worst > 1 else 0.0,
            "delivered_gbps": round(sum(carried[h.name].values()), 6),
            "carried_gbps": {r: round(x, 6) for r, x in carried[h.name].items() if x},
            "cpu_pct": round(sum(curve(r).cpu(x) for r, x in carried[h.name].items() if x > 0), 2),
            "ceiling_pct": SATURATED_PCT * h.dataplane_cpus,
            "beyond_measured": [r for r, x in carried[h.name].items() if x > curve(r).measured_to * 1.001],
            "capacity_how": sorted({curve(r).how for r, x in hl.gbps.items() if x}),
        })
    return rows
