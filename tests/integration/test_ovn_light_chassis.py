"""Many OVN chassis on one machine (issue 48): ten light chassis (the ``chassis:`` block)
come up as their own OVS and ovn-controller, each registered in the SB database with
its tunnel address and none running a PMD thread; a new port on the farthest chassis
gets its first packet from a VM on a full host. Teardown leaves nothing (the fixture)."""

from pathlib import Path

import pytest

from vnetbench.battery import portready
from vnetbench.kinds.ovn import chassis
from vnetbench.kinds.ovn.netns import Central
from vnetbench.kinds.ovn.routers import chassis as chassis_name
from vnetbench.testbed.loader import loads

TEN = """
vswitch: ovn
network: {type: geneve}
chassis: {count: 10}
vms:
  - {name: a, host: h1, vnets: [vnet1]}
  - {name: b, host: h2, vnets: [vnet1]}
"""


def _threads(pid: int) -> list[str]:
    return [(t / "comm").read_text().strip() for t in Path(f"/proc/{pid}/task").iterdir()]


@pytest.mark.whole_machine          # the far port ready within the deadline: a time verdict
def test_ten_light_chassis_register_and_a_port_on_the_last_carries_traffic(netns_up):
    tb = loads(TEN, source="<ten light chassis>", online_cpus=[0, 1])
    dep = netns_up(tb)
    known = chassis.registered(Central(dep))
    assert {chassis_name(dep.run_id, h.name): ("geneve", str(h.underlay_ip)) for h in tb.hosts} \
        .items() <= known.items()
    assert dep.run.meta()["ovn_chassis_seconds"] > 0
    for h in tb.hosts:
        pids = dep.vswitch_pids(h.name)
        assert set(pids) == {"ovsdb-server", "ovs-vswitchd", "ovn-controller"}
        pmd = [t for t in _threads(pids["ovs-vswitchd"]) if t.startswith("pmd")]
        if h.light:
            assert pmd == [], (h.name, pmd)
    [r] = portready.run(dep, ports=2, steps=1, concurrency=2, deadline_ms=15000, hosts=["ch10"])
    assert r.samples["not_ready"] == [0], r.extra["never_ready"]
    assert {t["host"] for t in r.extra["timelines"]} == {"ch10"}
    assert r.samples["cpu_ovn_northd_pct"][0] >= 0 and "cpu_ovn_controller_pct" in r.samples
