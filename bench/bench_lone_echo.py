"""The lone echo after the flows idled out on ovs-openflow, many times, with what could
lose it recorded beside each one (docs/sdn.md, "the occasional lost lone echo").

A two-host VXLAN ``ovs-openflow`` testbed with ``idle_timeout: 1``; cross-a pings
cross-b once after each gap (default 2.5 s as in tests/integration/test_openflow.py;
``--sweep`` cycles 1.0..2.5 s in 0.1 s steps to hit the flow-expiry edges). Per echo:
the RTT with a 3 s reply timeout (an echo later than 1 s is what ``ping -W 1`` -- the
test's -- would call lost), both VMs' ARP entries for each other before it (ip neigh),
and the packet-in meters' band drops on both bridges during it (ovs-ofctl meter-stats).

    .venv/bin/python bench/bench_lone_echo.py [--echoes 80] [--sweep]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import deployed, load_testbed, show, write_json  # noqa: E402

from vnetbench.traffic import ping  # noqa: E402

TESTBED = ("name: lone-echo\nvswitch: {kind: ovs-openflow, openflow: {idle_timeout: 1}}\n"
           "network: {type: vxlan}\n")
METER = re.compile(r"meter:(\d+) .*?packet_in_count:(\d+).*?\n0: packet_count:(\d+)", re.S)


def lone(dep) -> float | None:
    argv = ping.command(ping.PingParams(dest=dep.ip("cross-b"), count=1, reply_timeout_s=3))
    got = ping.parse(dep.exec("cross-a", argv, timeout=30).stdout)["samples_ms"]
    return got[0] if got else None


def neighbour(dep, vm: str, peer: str) -> str:
    out = dep.exec(vm, ["ip", "neigh", "show", dep.ip(peer)], timeout=10).stdout.split()
    return out[-1] if out else "NONE"


def meter_drops(dep) -> dict:
    """(host, meter) -> packets dropped by its band so far."""
    out = {}
    for h in dep.testbed.hosts:
        sock = dep.host_file(h.name, f"{dep.names.ovs_int}.mgmt")
        text = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "meter-stats", f"unix:{sock}"],
                              capture_output=True, text=True, timeout=10).stdout
        out.update({(h.name, int(m[1])): int(m[3]) for m in METER.finditer(text)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--echoes", type=int, default=80)
    ap.add_argument("--sweep", action="store_true", help="gaps 1.0..2.5 s instead of 2.5 s")
    a = ap.parse_args()
    echoes = []
    with deployed(load_testbed(TESTBED)) as dep:
        for _ in range(3):
            lone(dep)                                           # ARP + flows, as the test
        for i in range(a.echoes):
            gap = 1.0 + (i % 16) * 0.1 if a.sweep else 2.5
            time.sleep(gap)
            arp = (neighbour(dep, "cross-a", "cross-b"), neighbour(dep, "cross-b", "cross-a"))
            before = meter_drops(dep)
            rtt = lone(dep)
            after = meter_drops(dep)
            dropped = sum(after[k] - before.get(k, 0) for k in after)
            echoes.append({"gap_s": gap, "rtt_ms": rtt, "arp_a": arp[0], "arp_b": arp[1],
                           "meter_drops": dropped})
            print(f"{i:3d} gap {gap:.1f} s  arp {arp[0]}/{arp[1]}  rtt {rtt}  "
                  f"meter drops {dropped}", flush=True)
    late = [e for e in echoes if e["rtt_ms"] is None or e["rtt_ms"] > 1000]
    rtts = sorted(e["rtt_ms"] for e in echoes if e["rtt_ms"] is not None)
    show(["echoes", "lost or > 1 s", "meter drops", "rtt max ms", "with ARP re-resolution"],
         [[len(echoes), len(late), sum(e["meter_drops"] for e in echoes),
           rtts[-1] if rtts else None,
           sum(e["arp_a"] != "REACHABLE" or e["arp_b"] != "REACHABLE" for e in echoes)]],
         title="lone echo after the flows idled out (ovs-openflow, idle_timeout 1)")
    write_json("bench_lone_echo", {"sweep": a.sweep, "echoes": echoes, "late": len(late)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
