"""A scale run on a running deployment: every pair of a step at once, step after step.

Synchronised start without NTP: each pair's iperf3 server listens first; each client is
started behind a gate (a shell that says ``ready`` and waits for one byte on its stdin)
and, once every gate said ready, all are released together. Each gate stamps its clock
the moment it opens, so the start spread across pairs is *measured* (ms): on namespaces
one kernel clock; on guests each guest's monotonic clock mapped onto the runner's
(``functional.measure.clock_offset``, its uncertainty added to the spread).

Tests per step: ``tcp`` and ``udp`` (iperf3; the aggregate in Gbit/s) and ``conn`` (new TCP
connections per second per pair, vnetbench-flowgen open-loop at ``conn_rate``; the
aggregate is the connections set up within flowgen's 1 s deadline, per second, summed:
where a reactive vSwitch's agent or a conntrack table saturates, not the bandwidth).

Beside the load, each pair's source pings its peer every 10 ms (latency under load, as
Flent's RRUL), gated the same way. Each host's data-plane CPU is measured over the step
(``vnetbench.cpu.Window``, every part). A pair whose client failed (its server killed,
a connection refused) is a failed pair of that step, named with iperf3's own words.

Only the Deployment interface is used: the same code runs on netns, libvirt and a cloud.
"""

from __future__ import annotations

import os
import select
import subprocess

from vnetbench import cpu
from vnetbench.battery import session
from vnetbench.battery.common import collect
from vnetbench.results import provenance
from vnetbench.results.record import Result, now
from vnetbench.scale import aggregate, plan
from vnetbench.traffic import flowgen, iperf3, ping, probe

TESTS = ("tcp", "udp", "conn")
#: each test's per-pair figure (and the suffix of its metrics: aggregate_gbps, p50_cps, ...)
UNIT = {"tcp": "gbps", "udp": "gbps", "conn": "cps"}
UNIT_TEXT = {"gbps": "Gbit/s", "cps": "connections/s"}
BASE_PORT = 5300
PING_INTERVAL_S = 0.01          # RRUL's latency probe beside the load
GATE = 'echo ready; read go; {stamp}; exec "$@"'


def gated(argv: list[str], stamp: list[str]) -> list[str]:
    """ARGV behind a gate: prints ``ready``, waits for a line on stdin, prints its clock
    (``stamp``), then becomes ARGV (same process: nothing between release and start)."""
    return ["sh", "-c", GATE.format(stamp=" ".join(stamp)), "gate", *argv]


def stamp_command(dep) -> list[str]:
    """The gate's clock: the runner's kernel clock in a namespace (date, ns), the guest's
    monotonic clock elsewhere (the Go probe tool: guests carry no Python)."""
    from vnetbench.functional.measure import native
    if not native(dep):
        return ["date", "+%s%N"]
    # by name: inside the gate's shell string, where the channel's rewriting of argv[0]
    # (an absolute path on the runner means nothing in a guest) does not reach
    tool, *args = probe.clock_command()
    return [os.path.basename(tool), *args]


def parse_stamp(line: str) -> int:
    line = line.strip()
    return int(line) if line.isdigit() else probe.parse_clock(line)


def client_argv(dep, pair, test: str, seconds: int, port: int, udp_bps: int | None,
                streams: int, conn_rate: float = 100, rate_bps: int | None = None) -> list[str]:
    """``rate_bps``: this pair's offered load (iperf3's -b, TCP too), else ``udp_bps`` for UDP."""
    src, dst = pair.vms
    if test == "conn":
        return flowgen.client_command(flowgen.ClientParams(target=dep.ip(dst), rate=conn_rate,
                                                           duration_s=seconds))
    return iperf3.client_command(iperf3.ClientParams(
        dest=dep.ip(dst), port=port, seconds=seconds, protocol="udp" if test == "udp" else "tcp",
        bitrate_bps=rate_bps or (udp_bps if test == "udp" else None), parallel=streams,
        connect_timeout_ms=5000))


def run(dep, pairs, progression="geometric", tests=("tcp",), seconds=5, repetitions=1,
        udp_bps=None, streams=1, latency=True, accommodation=None, progress=lambda m: None,
        during=None, conn_rate=100, rates=None) -> list:
    """One record per (test, step): ``test`` "scale", ``labels.pairs`` the step's pair count,
    the aggregate and per-pair distribution as metrics, per-pair results in ``extra``.
    ``during(servers)``: called once the step's clients are released, with each pair's
    iperf3 server process by pair name (a fault to inject, e.g. in tests). ``conn_rate``:
    new connections/s each pair offers in the ``conn`` test; ``rates``: bit/s each pair
    offers by name (a planned traffic matrix), else as fast as it can."""
    unknown = set(tests) - set(TESTS)
    if unknown:
        raise plan.PlanError("tests", f"unknown {sorted(unknown)}", f"use {', '.join(TESTS)}")
    steps = plan.progression(progression, len(pairs))
    out = []
    for test in tests:
        records = []
        for n in steps:
            progress(f"scale {test}: {n} pair(s) at once")
            started = now()
            samples, extras = collect(repetitions, lambda: _step(
                dep, pairs[:n], test, seconds, udp_bps, streams, latency, during, conn_rate, rates))
            records.append(_record(dep, pairs[:n], test, n, samples, extras, started, seconds,
                                   udp_bps, streams, accommodation, progression, conn_rate,
                                   {p.name: rates[p.name] for p in pairs[:n] if p.name in rates} if rates else None))
        sat = aggregate.saturation([_curve_point(r) for r in records])
        for r in records:
            r.extra["saturation"] = sat
        out += records
    return out


def _server(dep, pair, test, port) -> subprocess.Popen:
    """The pair's server, listening when this returns."""
    vm = pair.vms[1]
    if test == "conn":
        from vnetbench.battery.flowsetup import start_server
        return start_server(dep, vm)
    argv = iperf3.server_command(iperf3.ServerParams(bind=dep.ip(vm), port=port))
    srv = dep.popen(vm, argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    session.wait_listening(dep, vm, port, server=srv)
    return srv


def _step(dep, pairs, test, seconds, udp_bps, streams, latency, during=None,
          conn_rate=100, rates=None) -> tuple[dict, dict]:
    """Every pair of the step at once: (metrics of the step, its extra)."""
    ports = {p.name: BASE_PORT + i for i, p in enumerate(pairs)}
    servers, gates = {}, {}
    stamp = stamp_command(dep)
    try:
        for p in pairs:
            servers[p.name] = _server(dep, p, test, ports[p.name])
        for p in pairs:
            gates[p.name] = _gate(dep, p.vms[0], gated(
                client_argv(dep, p, test, seconds, ports[p.name], udp_bps, streams, conn_rate,
                            (rates or {}).get(p.name)), stamp))
            if latency:
                count = max(1, int(seconds / PING_INTERVAL_S))
                gates[p.name + "/ping"] = _gate(dep, p.vms[0], gated(ping.command(ping.PingParams(
                    dest=dep.ip(p.vms[1]), count=count, interval_s=PING_INTERVAL_S)), stamp))
        for g in gates.values():
            _ready(g, seconds + 30)
        with cpu.Window(dep) as window:
            for g in gates.values():        # released together: one write each, no waiting
                g.stdin.write("go\n")
                g.stdin.flush()
            if during is not None:
                during(dict(servers))
            outputs = {k: _finish(g, seconds + 30) for k, g in gates.items()}
    finally:
        for g in gates.values():
            session.stop(g)
        for s in servers.values():
            session.stop(s)
    return _summarise(dep, pairs, test, outputs, window)


def _gate(dep, vm, argv) -> subprocess.Popen:
    return dep.popen(vm, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)


def _ready(g, timeout) -> None:
    """Until the gate said ``ready`` (its shell runs, waiting for the release)."""
    if not select.select([g.stdout], [], [], timeout)[0]:
        raise RuntimeError(f"a scale client's gate was not ready after {timeout:.0f} s")
    line = g.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"a scale client's gate did not open (said {line!r}, exit "
                           f"{g.poll()}): {g.stderr.read()[-300:] if g.poll() is not None else ''}")


def _finish(g, timeout) -> dict:
    """The gate's output once it exits; its stdin stays open until then (on a guest,
    closing it would end the command through its SSH session's tie)."""
    stdin, g.stdin = g.stdin, None
    try:
        out, err = g.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        g.kill()
        out, err = g.communicate()
    finally:
        g.stdin = stdin
    first, _, rest = out.partition("\n")
    return {"stamp": first, "out": rest, "err": err, "rc": g.returncode}


def _summarise(dep, pairs, test, outputs, window) -> tuple[dict, dict]:
    per_pair, stamps = [], []
    for p in pairs:
        o = outputs[p.name]
        row = {"pair": p.name, "placement": p.placement, "hosts": [dep.testbed.vm(v).host for v in p.vms]}
        try:
            stamps.append(parse_stamp(o["stamp"]) - _offset(dep, p.vms[0]))
            row.update(ok=True, **_figure(test, o["out"]))
        except (ValueError, KeyError) as exc:
            row.update(ok=False, error=str(exc).splitlines()[0][:200] if str(exc) else
                       (o["err"].strip()[-200:] or f"exit {o['rc']}"))
        lat = outputs.get(p.name + "/ping")
        if lat is not None:
            try:
                r = ping.parse(lat["out"])
                row.update(rtt_ms=r["samples_ms"], echo_loss_pct=r["loss_pct"])
            except ValueError:
                row.update(rtt_ms=[], echo_loss_pct=None)
        per_pair.append(row)
    unit = UNIT[test]
    s = aggregate.step(per_pair, unit)
    spread_ms = (max(stamps) - min(stamps)) / 1e6 if len(stamps) > 1 else 0.0
    # the hypervisors; a controller's namespace (its CPU stays in extra["cpu"]) is no
    # host whose vSwitch a step can saturate
    hypervisors = {h.name for h in dep.testbed.hosts}
    hosts = {}
    for h, v in window.result.get("hosts", {}).items():
        if isinstance(v, dict):         # this machine's emulated hosts (vnetbench.cpu)
            if h in hypervisors:
                hosts[h] = {"dataplane_pct": v.get("dataplane"), "cpus": v.get("cpus"),
                            "busy_pct": v.get("busy_pct"), "components": v.get("components")}
        else:   # a cloud's compute node by its name, % of one CPU through Prometheus (promcpu)
            hosts[h] = {"dataplane_pct": v, "cpus": None, "busy_pct": None, "components": None}
    metrics = {f"aggregate_{unit}": s["sum"], f"min_{unit}": s["min"], f"p5_{unit}": s["p5"],
               f"p50_{unit}": s["p50"], f"p95_{unit}": s["p95"], "jain": s["jain"],
               "pairs_ran": s["ran"], "pairs_failed": len(s["failed"]),
               "loss_pct_max": s["loss_pct_max"], "rtt_p50_ms": s["rtt_p50_ms"],
               "rtt_p99_ms": s["rtt_p99_ms"], "start_spread_ms": spread_ms, **window.metrics()}
    extra = {"pairs": [{k: v for k, v in r.items() if k != "rtt_ms"} | {"echoes": len(r.get("rtt_ms") or [])}
                       for r in per_pair],
             "failed": s["failed"], "hosts": hosts, "cpu": window.result, "start_spread_ms": spread_ms}
    return metrics, extra


def _figure(test: str, out: str) -> dict:
    """A pair's figure from its client's output (ValueError when there is none): Gbit/s
    and UDP loss from iperf3; from flowgen, connections set up within its deadline per
    second (``cps``) and the share that failed or were late (``loss_pct``)."""
    if test == "conn":
        res = flowgen.parse(out)
        window = res.get("window_s") or res["duration_s"]
        return {"cps": res["ok"] / window if window else None, "loss_pct": res["loss_pct"],
                "offered_cps": res["achieved_rate"]}
    res = iperf3.parse(out)
    # the two ends' own CPU (iperf3's rusage, % of one CPU): the workload's share of its
    # hosts' busy CPUs, told apart from other work by plan --verify
    return {"gbps": res["bits_per_second"] / 1e9,
            "loss_pct": res.get("lost_percent") if test == "udp" else None,
            "guest_cpu_pct": [res.get("cpu_host_pct"), res.get("cpu_remote_pct")]}


_OFFSETS: dict = {}


def _offset(dep, vm) -> int:
    """The guest's clock minus the runner's (0 on one kernel), once per run and VM."""
    from vnetbench.functional.measure import clock_offset, native
    if not native(dep):
        return 0
    key = (dep.run_id, vm)
    if key not in _OFFSETS:
        _OFFSETS[key] = clock_offset(dep, vm)["offset_ns"]
    return _OFFSETS[key]


def _record(dep, pairs, test, n, samples, extras, started, seconds, udp_bps, streams,
            accommodation, progression, conn_rate=100, rates=None) -> Result:
    tb = dep.testbed
    params = {"test": test, "unit": UNIT[test], "step": f"{n:04d}",   # step: a label that sorts
              "seconds": seconds, "streams": streams, "udp_bps": udp_bps,
              "conn_rate": conn_rate if test == "conn" else None,
              # offered bit/s per pair (paced: a load, not a search for the ceiling); None: unlimited
              "pair_bps": sorted(set(rates.values())) if rates else None,
              "progression": progression, "accommodation": accommodation,
              "placements": sorted({p.placement for p in pairs})}
    labels = {"test": "scale", "run_id": dep.run_id, "testbed": tb.name,
              "vswitch": tb.vswitch.kind.value, "network": tb.network.type.value,
              "placement": "+".join(params["placements"]), "pair": f"{n} pairs", "pairs": n,
              "point": f"{test} {n} pairs", "params": params}
    per_host = {}
    for e in extras:
        for h, v in e["hosts"].items():
            if v.get("dataplane_pct") is not None:
                per_host.setdefault(h, []).append(v["dataplane_pct"])
    return Result(test="scale", labels=labels, samples=samples,
                  provenance=provenance.collect(dep, [v for p in pairs for v in p.vms][:2]),
                  started=started, finished=now(),
                  extra={"repetitions": extras,        # per_host: published with a host label
                         "per_host": {"host_dataplane_pct": {h: sum(x) / len(x) for h, x in per_host.items()}},
                         # pairs a cloud placed wrong, left out at build time (best_effort)
                         "dropped": dep.run.meta().get("dropped_pairs") or {}})


def _curve_point(r: Result) -> dict:
    """A step for ``aggregate.saturation``: mean aggregate, each host's mean data-plane CPU."""
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None
    reps = r.extra["repetitions"]
    hosts = {}
    for h in {h for e in reps for h in e["hosts"]}:
        hosts[h] = {"dataplane_pct": mean([e["hosts"].get(h, {}).get("dataplane_pct") for e in reps]),
                    "busy_pct": mean([e["hosts"].get(h, {}).get("busy_pct") for e in reps]),
                    "cpus": next((e["hosts"][h].get("cpus") for e in reps if h in e["hosts"]), 1)}
    unit = r.labels["params"].get("unit", "gbps")
    return {"pairs": r.labels["pairs"], "sum": mean(r.samples.get(f"aggregate_{unit}", [])), "hosts": hosts}
