"""How fast a new port carries traffic as the network grows (issue 48): the port_ready
family (vnetbench.battery.portready, the code ``vnetbench compare --test port_ready``
runs) per kind, on HOSTS emulated hosts with one VM each (the peers), STEPS steps of
PORTS new ports placed round-robin over the hosts; per step the min/p50/p95/p99/max of
each stage, the ports never ready and the control plane's CPU; the family's wall time
(build excluded) beside. The vnet is a /20, so thousands of ports fit.

    .venv/bin/python bench/bench_port_ready.py [--kinds ovn ovs linuxbridge] [--hosts 4]
        [--ports 50] [--steps 3] [--concurrency 8] [--deadline-ms 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, fmt, load_testbed, online_cpus, show, write_json  # noqa: E402

from vnetbench.battery import portready  # noqa: E402
from vnetbench.testbed import capabilities  # noqa: E402

NETWORK = {"ovn": "geneve", "ovs": "vxlan", "linuxbridge": "vxlan"}


def testbed(kind: str, hosts: int) -> str:
    cpus = online_cpus()
    hs = ", ".join(f"{{name: h{i + 1}, cpus: [{cpus[i % len(cpus)]}]}}" for i in range(hosts))
    vms = "".join(f"  - {{name: v{i + 1}, host: h{i + 1}, vnets: [vnet1]}}\n" for i in range(hosts))
    return (f"name: port-ready-{kind}\nvswitch: {kind}\nnetwork: {{type: {NETWORK[kind]}}}\n"
            f"hosts: [{hs}]\nvnets: [{{name: vnet1, cidr: 198.19.16.0/20}}]\nvms:\n{vms}")


def row(kind, r) -> list:
    m = {k: v[0] for k, v in r.samples.items()}
    return [kind, r.extra["existing_ports"], m["ports"], m["not_ready"],
            *(fmt(m.get(f"{s}_{q}_ms"), ".0f") for s in ("requested", "programmed", "first_packet")
              for q in ("p50", "p95", "max")),
            fmt(m.get("cpu_controller_pct"), ".0f"), fmt(m.get("cpu_vswitch_pct"), ".0f"),
            fmt(r.extra["poll_period_ms"], ".0f")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=["ovn", "ovs", "linuxbridge"], choices=sorted(NETWORK))
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--ports", type=int, default=50)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--deadline-ms", type=float, default=20000)
    a = ap.parse_args(argv)
    portready.check(a.ports, a.steps, a.concurrency, a.deadline_ms, 1.0, capacity=4000)
    caps = capabilities.probe()
    rows, out = [], {}
    for kind in a.kinds:
        tb = load_testbed(testbed(kind, a.hosts), source=f"<bench port-ready {kind}>")
        why = caps.why_not(tb.vswitch.kind, tb.network.type)
        if why:
            print(f"{kind}: N/A ({why})")
            continue
        with deployed(tb, caps) as dep:
            t0 = time.monotonic()
            results = portready.run(dep, a.ports, a.steps, a.concurrency, a.deadline_ms)
            wall = time.monotonic() - t0
        rows += [row(kind, r) for r in results]
        out[kind] = {"wall_s": wall, "steps": [{"existing": r.extra["existing_ports"],
                                                "metrics": {k: v[0] for k, v in r.samples.items()},
                                                "never_ready": r.extra["never_ready"],
                                                "poll_period_ms": r.extra["poll_period_ms"]}
                                               for r in results]}
        print(f"{kind}: {a.steps} steps of {a.ports} ports on {a.hosts} hosts in {wall:.0f} s", flush=True)
    heads = ["kind", "existing", "new", "never ready",
             *(f"{s} {q}" for s in ("requested", "programmed", "first pkt") for q in ("p50", "p95", "max")),
             "ctl CPU %", "hosts' daemons CPU %", "poll ms"]
    show(heads, rows, title="ms from the request; probe every 1 ms")
    write_json("port_ready", {"args": vars(a), "kinds": out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
