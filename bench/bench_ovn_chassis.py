"""OVN with tens of emulated hypervisors (issue 48, ovn-heater's question on one machine):
for each chassis count N, a testbed of two full hosts (one VM each: the probes' peers)
and N light chassis (the ``chassis:`` block: own OVS, AF_PACKET ports, no PMD thread,
ovn-controller, no VM). Per N: the build's wall time, the time until all N + 2 are
Chassis rows (with their Encap) in the SB database (``ovn_chassis_seconds``, from the
daemons' start), what a light chassis costs idle (CPU and resident memory of its
ovsdb-server, ovs-vswitchd and ovn-controller, from /proc over IDLE seconds after
SETTLE_S); then the
port_ready family (vnetbench.battery.portready) with its new ports spread round-robin
over the light chassis: per step each stage's p50/p95/max and the CPU of ovn-northd,
the SB ovsdb-server and all ovn-controllers over the step (the family's CPU window).

    .venv/bin/python bench/bench_ovn_chassis.py [--chassis 10 25 50] [--ports 50]
        [--steps 2] [--concurrency 4] [--deadline-ms 30000] [--idle 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, fmt, load_testbed, show, write_json  # noqa: E402

from vnetbench.battery import portready  # noqa: E402
from vnetbench.testbed import capabilities  # noqa: E402

TARGET_S = 60.0                         # 50 chassis registered within a minute
SETTLE_S = 5.0
DAEMONS = ("cpu_ovn_northd_pct", "cpu_ovsdb_server_sb_pct", "cpu_ovsdb_server_nb_pct",
           "cpu_ovn_controller_pct")


def testbed(n: int) -> str:
    return ("name: ovn-chassis\nvswitch: ovn\nnetwork: {type: geneve}\n"
            f"chassis: {{count: {n}}}\nvnets: [{{name: vnet1, cidr: 198.19.16.0/20}}]\n"
            "vms:\n  - {name: a, host: h1, vnets: [vnet1]}\n  - {name: b, host: h2, vnets: [vnet1]}\n")


def _ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])         # utime + stime


def _rss_kb(pid: int) -> int:
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])


def idle_cost(dep, light: list[str], seconds: float) -> dict:
    """Mean CPU % and MB of one light chassis' three daemons, idle, over SECONDS."""
    pids = [p for h in light for p in dep.vswitch_pids(h).values()]
    time.sleep(SETTLE_S)                # ovn-controllers finish their first full computation
    a, t0 = sum(map(_ticks, pids)), time.monotonic()
    time.sleep(seconds)
    b, dt = sum(map(_ticks, pids)), time.monotonic() - t0
    hz = os.sysconf("SC_CLK_TCK")
    return {"cpu_pct_per_chassis": 100.0 * (b - a) / hz / dt / len(light),
            "rss_mb_per_chassis": sum(map(_rss_kb, pids)) / 1024 / len(light),
            "daemons": len(pids)}


def one(n: int, caps, a) -> dict:
    tb = load_testbed(testbed(n), source=f"<bench ovn-chassis {n}>")
    light = [h.name for h in tb.hosts if h.light]
    t0 = time.monotonic()
    with deployed(tb, caps) as dep:
        up = time.monotonic() - t0
        from vnetbench.kinds.ovn import chassis
        from vnetbench.kinds.ovn.netns import Central
        registered = len(chassis.registered(Central(dep)))
        meta = dep.run.meta()
        out = {"chassis": n, "up_s": up, "registered": registered,
               "chassis_s": meta["ovn_chassis_seconds"], "ovn_ready_s": meta["ovn_ready_seconds"],
               **idle_cost(dep, light, a.idle)}
        print(f"{n} chassis: up {up:.1f} s, {registered} registered in "
              f"{out['chassis_s']:.1f} s", flush=True)
        t1 = time.monotonic()
        results = portready.run(dep, a.ports, a.steps, a.concurrency, a.deadline_ms, hosts=light)
        out["port_ready_s"] = time.monotonic() - t1
    out["steps"] = [{"existing": r.extra["existing_ports"], "never_ready": r.extra["never_ready"],
                     "metrics": {k: v[0] for k, v in r.samples.items()}} for r in results]
    return out


def rows(o) -> list[list]:
    out = []
    for s in o["steps"]:
        m = s["metrics"]
        out.append([o["chassis"], s["existing"], m["ports"], m["not_ready"],
                    *(fmt(m.get(f"{st}_{q}_ms"), ".0f") for st in ("programmed", "first_packet")
                      for q in ("p50", "p95", "max")),
                    *(fmt(m.get(d), ".1f") for d in DAEMONS)])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chassis", type=int, nargs="+", default=[10, 25, 50])
    ap.add_argument("--ports", type=int, default=50)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--deadline-ms", type=float, default=30000)
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of the idle measurement")
    a = ap.parse_args(argv)
    if any(n < 1 or n > 100 for n in a.chassis):
        ap.error("--chassis: counts from 1 to 100 (the testbed schema's bound)")
    portready.check(a.ports, a.steps, a.concurrency, a.deadline_ms, 1.0, capacity=4000)
    caps = capabilities.probe()
    probe = load_testbed(testbed(1))
    why = caps.why_not(probe.vswitch.kind, probe.network.type)
    if why:
        print(f"ovn: N/A ({why})")
        return 1
    runs = [one(n, caps, a) for n in a.chassis]
    show(["chassis", "up s", "registered", "in SB after s", "idle CPU %/chassis", "MB/chassis",
          "verdict"],
         [[o["chassis"], fmt(o["up_s"], ".1f"), o["registered"], fmt(o["chassis_s"], ".1f"),
           fmt(o["cpu_pct_per_chassis"], ".2f"), fmt(o["rss_mb_per_chassis"], ".0f"),
           ("PASS" if o["chassis_s"] <= TARGET_S else "FAIL") if o["chassis"] >= 50 else ""]
          for o in runs], title=f"chassis registration (target: 50 in <= {TARGET_S:.0f} s)")
    show(["chassis", "existing", "new", "never ready",
          *(f"{s} {q}" for s in ("programmed", "first pkt") for q in ("p50", "p95", "max")),
          "northd %", "SB db %", "NB db %", "ovn-controllers %"],
         [r for o in runs for r in rows(o)], title="port_ready over the light chassis (ms)")
    write_json("ovn_chassis", {"args": vars(a), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
