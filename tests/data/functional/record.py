"""Record the functional verdicts' inputs from real measurements (root; a few seconds).

    VNETBENCH_STATE_DIR=/tmp/rec-state .venv/bin/python tests/data/functional/record.py

Working system: a linuxbridge/vxlan testbed of the isolation and rate-limit shape,
measured as the functional suite does. Failing systems, made on purpose so that a
verdict that cannot fail is caught:

* leak: red-2's port is moved into blue's bridge on h2 (a vSwitch that puts a
  tenant's port on another tenant's segment): blue's broadcast and flood are then
  captured on red-2, and red-1 no longer reaches red-2;
* never stops: "deprovisioning" that changes nothing (a controller that leaves the
  installed flows in place, as the seed saw with Floodlight): the probes go on;
* unlimited: the rate of a port without the limit judged against 10 Mbit/s.

Every file is one measurement dict, as the matrix stores it.
"""

import json
import os
import sys
from pathlib import Path

from pyroute2 import NetNS

from vnetbench.functional import measure
from vnetbench.functional.tests import test_isolation as iso
from vnetbench.functional.tests import test_rate_limit as rate
from vnetbench.linux import links
from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns import builder

OUT = Path(__file__).resolve().parent


def save(name, m):
    (OUT / f"{name}.json").write_text(json.dumps(m, separators=(",", ":")) + "\n")
    print("recorded", name)


def build(text):
    return builder.up(loads(text.format(kind="linuxbridge", ntype="vxlan"), source="<record>",
                            online_cpus=sorted(os.sched_getaffinity(0))))


def pings(dep):
    return {"pings": [measure.ping_pair(dep, v, f"{v}-1", f"{v}-{n}")
                      for v in ("red", "blue") for n in (2, 3)]}


def flood(dep):
    measure.static_arp(dep, "blue-1", iso.UNKNOWN_IP, iso.UNKNOWN_MAC)
    return (iso._leak(dep, "198.19.1.255", ("blue-2", "blue-3"), broadcast=True),
            iso._leak(dep, iso.UNKNOWN_IP, ("blue-2", "blue-3")))


def deprovision(dep, change):
    m = measure.probes_around(dep, "blue-1", "blue-2", change)
    m["new_ping"] = measure.ping_once(dep, "blue-1", dep.ip("blue-2"))
    m["other_vnet_ping"] = measure.ping_once(dep, "red-1", dep.ip("red-2"))
    return m


def isolation():
    dep = build(iso.TESTBED)
    try:
        save("reach-pass", pings(dep))
        bcast, unknown = flood(dep)
        save("broadcast-pass", bcast)
        save("unknown-unicast-pass", unknown)
        save("deprovision-never-stops", deprovision(dep, lambda: None))
        vm_i = [v.name for v in dep.testbed.vms].index("red-2")
        blue_i = [v.name for v in dep.testbed.vnets].index("blue")
        with NetNS(dep.names.host_ns("h2")) as ns:    # red-2 onto blue's segment
            links.up(ns, dep.names.vm_port(vm_i, 0), master=dep.names.lb_bridge(blue_i))
        save("reach-fail", pings(dep))
        bcast, unknown = flood(dep)
        save("broadcast-leak", bcast)
        save("unknown-unicast-leak", unknown)
    finally:
        dep.down()
    dep = build(iso.TESTBED)
    try:
        save("deprovision-pass", deprovision(dep, lambda: dep.remove_vnet("blue")))
    finally:
        dep.down()


def rates():
    dep = build(rate.TESTBED)
    try:
        limit = {"limit_mbps": rate.LIMIT_MBPS}
        udp = 2 * rate.LIMIT_KBPS * 1000
        save("rate-limited", {**limit, **measure.receiver_rate(dep, "red-limited", "red-sender", 7,
                                                               udp_bps=udp)})
        save("rate-unlimited", {**limit, **measure.receiver_rate(dep, "red-free", "red-sender", 7)})
    finally:
        dep.down()


if __name__ == "__main__":
    {"isolation": isolation, "rates": rates}.get(sys.argv[1] if len(sys.argv) > 1 else "",
                                                 lambda: (isolation(), rates()))()
