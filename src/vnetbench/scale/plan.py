"""Where a scale run's pairs go, the testbed that puts them there, and the pair counts its
steps run. Pure: the same words give the same placement on every backend.

Placement follows Shaker's ``generate_agents`` (``shaker/engine/deploy.py``): with ``n``
hosts and ``density`` d there are ``n * d`` iterations (halved for ``single_room``); pair
i's ends go to host ``(2i, 2i+1)`` (single_room), ``(i, i)`` (double_room) or
``(i, i+1)`` (mixed_room), modulo n. So single_room with 2 hosts and density 2 gives two
pairs h1->h2, both the same way, as Shaker would; density 4 gives four.
"""

from __future__ import annotations

from dataclasses import dataclass

from vnetbench.errors import VnetbenchError

ROOMS = ("single_room", "double_room", "mixed_room")
PROGRESSIONS = ("linear", "geometric")
MAX_PAIRS = 512                      # 1,024 VMs: the suite's own scale target (issue 24)
PAIRS_PER_VNET = 100                 # 200 VMs in a default /24 vnet


class PlanError(VnetbenchError):
    """A scale argument that cannot be planned: names the argument and the fix."""

    def __init__(self, where: str, problem: str, fix: str):
        super().__init__(f"scale: {where}: {problem}; {fix}")


@dataclass(frozen=True)
class Accommodation:
    room: str = "single_room"
    density: int = 1                 # pairs per host (Shaker: agents per compute node)
    hosts: int = 2                   # Shaker: compute_nodes
    best_effort: bool = False        # accept fewer hosts than asked


def accommodation(spec=None, **over) -> Accommodation:
    """Shaker's list form (``[pair, single_room, {density: 2}, {compute_nodes: 4},
    best_effort]``) or a mapping (``{room, density, hosts, best_effort}``); ``over``
    (task arguments ``density``, ``hosts``) wins over both."""
    words: dict = {}
    if isinstance(spec, str):
        spec = [spec]
    if isinstance(spec, dict):
        words.update(spec)
    elif spec is not None:
        if not isinstance(spec, (list, tuple)):
            raise PlanError("accommodation", f"{spec!r} is neither a list of Shaker's words nor a "
                            "mapping", "e.g. [pair, single_room, {density: 2}]")
        for item in spec:
            if isinstance(item, dict):
                words.update(item)
            elif item in ROOMS:
                words["room"] = item
            elif item == "best_effort":
                words["best_effort"] = True
            elif item != "pair":
                raise PlanError("accommodation", f"unknown word {item!r}",
                                f"use pair, {', '.join(ROOMS)}, best_effort, {{density: N}}, "
                                "{compute_nodes: N}")
    if "compute_nodes" in words:
        words["hosts"] = words.pop("compute_nodes")
    words.update({k: v for k, v in over.items() if v is not None})
    unknown = set(words) - {"room", "density", "hosts", "best_effort"}
    if unknown:
        raise PlanError("accommodation", f"unknown keys {sorted(unknown)}",
                        "use room, density, hosts (compute_nodes), best_effort")
    acc = Accommodation(**words)
    if acc.room not in ROOMS:
        raise PlanError("accommodation.room", f"{acc.room!r} is not a room", f"use one of {', '.join(ROOMS)}")
    for field in ("density", "hosts"):
        v = getattr(acc, field)
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_PAIRS:
            raise PlanError(f"accommodation.{field}", f"{v!r} is not a whole number in 1..{MAX_PAIRS}",
                            f"give {field} as a positive integer")
    if not isinstance(acc.best_effort, bool):
        raise PlanError("accommodation.best_effort", f"{acc.best_effort!r} is not true/false",
                        "write best_effort: true or leave it out")
    return acc


def placements(acc: Accommodation, hosts: list[str]) -> list[tuple[str, str]]:
    """(host of end a, host of end b) for every pair, from the available ``hosts``."""
    if len(hosts) < acc.hosts and not acc.best_effort:
        raise PlanError("accommodation.hosts", f"asks for {acc.hosts} hosts, {len(hosts)} are available",
                        "ask for fewer or add best_effort")
    use = list(hosts[:acc.hosts])
    n = len(use)
    if not n:
        raise PlanError("accommodation.hosts", "no host is available", "give the testbed hosts")
    iterations = n * acc.density
    if acc.room == "single_room":
        if n == 1 and not acc.best_effort:
            raise PlanError("accommodation", "single_room puts a pair's ends on two hosts; one is "
                            "available", "use double_room, more hosts, or best_effort")
        if not (acc.best_effort and iterations == 1):
            iterations //= 2
    ends = {"single_room": lambda i: (2 * i, 2 * i + 1), "double_room": lambda i: (i, i),
            "mixed_room": lambda i: (i, i + 1)}[acc.room]
    out = [(use[a % n], use[b % n]) for a, b in map(ends, range(iterations))]
    if not out:
        raise PlanError("accommodation", f"{acc.room} with {n} host(s) and density {acc.density} "
                        "places no pair", "raise density or hosts")
    if len(out) > MAX_PAIRS:
        raise PlanError("accommodation", f"{len(out)} pairs, more than {MAX_PAIRS}",
                        "lower density or hosts")
    return out


def progression(spec, total: int) -> list[int]:
    """The pair count of every step: ``linear`` 1, 2, ... total; ``geometric`` 1, 2, 4, ...
    and total (Shaker halves down from the total: 6 pairs gives it 1, 3, 6, here 1, 2, 4,
    6); a list of counts, each in 1..total; None: one step with every pair."""
    if spec is None:
        return [total]
    if spec == "linear":
        return list(range(1, total + 1))
    if spec == "geometric":
        steps, n = [], 1
        while n < total:
            steps.append(n)
            n *= 2
        return steps + [total]
    if isinstance(spec, (list, tuple)) and spec:
        bad = [x for x in spec if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x <= total]
        if bad:
            raise PlanError("progression", f"pair counts {bad} are not in 1..{total} (the plan has "
                            f"{total} pairs)", "raise density/hosts or lower the counts")
        return sorted(set(spec))
    raise PlanError("progression", f"{spec!r} is not a progression",
                    f"use {', '.join(PROGRESSIONS)} or a list of pair counts")


def testbed(acc: Accommodation, vswitch, network: str, online_cpus: list[int],
            name: str = "scale") -> dict:
    """The testbed document (validated by the published schema like any other) that puts
    every planned pair in place: hosts h1..hN (one online CPU each, round robin), one vnet
    per PAIRS_PER_VNET pairs, pair k named p<k> with its placement."""
    if not online_cpus:
        raise PlanError("cpus", "no online CPU", "run on a machine with CPUs online")
    hosts = [f"h{i + 1}" for i in range(acc.hosts)]
    pairs = placements(acc, hosts)
    vnets = [f"s{i + 1}" for i in range((len(pairs) + PAIRS_PER_VNET - 1) // PAIRS_PER_VNET)]
    used = sorted({h for p in pairs for h in p}, key=hosts.index)
    return {
        "name": name, "vswitch": vswitch, "network": {"type": network},
        "hosts": [{"name": h, "cpus": [online_cpus[i % len(online_cpus)]]} for i, h in enumerate(used)],
        "vnets": [{"name": v} for v in vnets],
        "pairs": [{"name": f"p{k + 1}", "vnet": vnets[k // PAIRS_PER_VNET],
                   **({"placement": "same-host", "hosts": [a]} if a == b else
                      {"placement": "cross-host", "hosts": [a, b]})}
                  for k, (a, b) in enumerate(pairs)],
    }
