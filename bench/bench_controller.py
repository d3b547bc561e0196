"""Packet-in capacity of the ovs-openflow controller with the IVS packet-in limit off:
how many packet-ins per second the emulation handles before it, not the model, is
the bottleneck.

A same-host VM pair on a two-host VXLAN testbed (``packet_in_rate: 0``,
``packet_in_global_rate: 0``: both IVS limits off). The sender
offers ICMP broadcasts at a rate; every frame is a packet-in on its host's bridge
and a packet-out (FLOOD) from the controller (Floodlight sets up no flow for
broadcast), so the frames counted at the receiver are packet-ins handled end to end.
Capacity = the highest delivered rate; the controller's CPU% (one CPU = 100%) is
read over each step from its pidfile.

    .venv/bin/python bench/bench_controller.py [--rates 500 1000 2000 4000 8000] [--seconds 3] [--ports afpacket]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import capacity_args, deployed, load_testbed, show, sweep, write_json  # noqa: E402

from vnetbench.battery.broadcast import _one as broadcast_once  # noqa: E402

TESTBED = ("name: controller-capacity\nvswitch: {kind: ovs-openflow, ports: PORTS, openflow: {packet_in_rate: 0, packet_in_global_rate: 0}}\n"
           "network: {type: vxlan}\npairs: [{placement: same-host}]\n")


def main() -> int:
    a = capacity_args(__doc__, [500, 1000, 2000, 4000, 8000])
    rows, steps = [], []
    with deployed(load_testbed(TESTBED.replace("PORTS", a.ports))) as dep:
        pair = dep.testbed.pair("same")
        for rate, (got, _), m in sweep(dep, a.rates,
                                       lambda rate: broadcast_once(dep, pair, "icmp", rate, a.seconds)):
            ctl = m["cpu_controller_pct"]
            delivered = got["received"] / a.seconds
            steps.append({"offered_pps": rate, "achieved_pps": got["achieved_pps"],
                          "delivered_pps": delivered, "loss_pct": got["loss_pct"],
                          "controller_cpu_pct": ctl})
            rows.append([rate, f"{got['achieved_pps']:.0f}", f"{delivered:.0f}",
                         f"{got['loss_pct']:.1f}", f"{ctl:.0f}"])
    show(["offered/s", "sent/s", "packet-ins handled/s", "loss %", "controller CPU %"], rows,
         title="ovs-openflow controller, packet-in limit off (broadcast = packet-in + packet-out)")
    best = max(steps, key=lambda s: s["delivered_pps"])
    print(f"capacity: {best['delivered_pps']:.0f} packet-ins/s handled "
          f"(offered {best['offered_pps']}/s, controller {best['controller_cpu_pct']:.0f}% CPU)")
    write_json("bench_controller", {"seconds": a.seconds, "steps": steps,
                                    "capacity_pps": best["delivered_pps"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
