"""What every test family shares: labels, repetitions with CPU windows, records."""

from __future__ import annotations

from vnetbench import cpu
from vnetbench.results import provenance
from vnetbench.results.record import Result, now
from vnetbench.testbed.model import L2, SWITCH_ROUTINGS


def labels(dep, pair, test: str, **params) -> dict:
    tb = dep.testbed
    routing = seed000_routing(tb)
    return {"test": test, "run_id": dep.run_id, "testbed": tb.name,
            "vswitch": tb.vswitch.kind.value, "network": tb.network.type.value,
            "placement": pair.placement, "pair": pair.name, "params": params,
            **({"path": pair.path} if pair.path != L2 else {}),
            **({"routing": routing} if routing else {})}


def seed000_routing(tb) -> str | None:
    """svi or stick when the testbed routes by one of seed 000's testbeds: its records are
    a column of their own ("ovs/vlan svi"), not the kind's router's."""
    return next((r.routing for r in tb.routers if r.routing in SWITCH_ROUTINGS), None)


def collect(times: int, measure) -> tuple[dict, list]:
    """Call ``measure()`` (-> metrics dict, extra) ``times`` times; return
    metric -> list of values (one per repetition) and the extras."""
    samples: dict = {}
    extras = []
    for _ in range(times):
        metrics, extra = measure()
        for k, v in metrics.items():
            samples.setdefault(k, []).append(v)
        extras.append(extra)
    return samples, extras


def repeat(dep, times: int, measure) -> tuple[dict, list]:
    """Call ``measure()`` (-> metrics dict, extra) ``times`` times, each inside a CPU
    window; return metric -> list of values and the extras.

    cpu_pct is the host-side data-plane CPU (docs/metrics.md), the sum of disjoint
    parts kept beside it (cpu_vswitch_pct, cpu_softirq_in_vswitch_pct, ...; see
    vnetbench.cpu), with its uncertainty cpu_pct_err. 100% = one CPU."""
    def windowed():
        settled = dep.settle()            # the last load's backlog is not this measurement's
        with cpu.Window(dep) as window:
            metrics, extra = measure()
        return {**metrics, **window.metrics()}, {**extra, "cpu": window.result, "settled_s": settled}
    return collect(times, windowed)


def static_arp(dep, a: str, b: str) -> None:
    """Permanent neighbour entries both ways on the pair's eth0: no ARP in the test. Across
    a router the neighbour is the router's interface on the sender's vnet; an external
    host (no VM of the testbed) resolves its next hop itself."""
    tb = dep.testbed
    vms = {v.name: v for v in tb.vms}
    for x, y in ((a, b), (b, a)):
        if x not in vms:
            continue
        own = vms[x].nics[0]
        peer = vms[y].nics[0] if y in vms else None
        if peer is None or peer.vnet != own.vnet:      # off-link: the gateway is the neighbour
            router = tb.router_of(own.vnet)
            if router is None:
                continue
            peer = router.port(own.vnet)
        dep.exec(x, ["ip", "neigh", "replace", str(peer.ip), "lladdr", peer.mac, "nud", "permanent",
                     "dev", "eth0"])


def not_applicable(dep, pair, test, why: str, **params) -> Result:
    """A test this pair cannot have, recorded as N/A with the reason (never a skip)."""
    r = Result(test=test, labels=labels(dep, pair, test, **params), samples={}, started=now(),
               finished=now(), extra={"not_applicable": why})
    if "kind" in params:
        r.labels["point"] = params["kind"]
    return r


def result(dep, pair, test, params, samples, extras, started) -> Result:
    return Result(test=test, labels=labels(dep, pair, test, **params), samples=samples,
                  provenance=provenance.collect(dep, pair.vms), started=started,
                  finished=now(), extra={"repetitions": extras})
