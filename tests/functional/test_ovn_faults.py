"""OVN's control plane down, measured: the flows ovn-controller installed keep
forwarding while ovn-northd and then the SB database are down, and a logical
port created meanwhile cannot come up until both return (REFERENCE §5)."""

import subprocess
import time

import pytest

from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns import builder, ovn
from vnetbench.traffic import ping

from leaks import leftovers

TESTBED = """
vswitch: ovn
network: {type: geneve}
vms:
  - {name: a, host: h1, vnets: [vnet1]}
  - {name: b, host: h2, vnets: [vnet1]}
  - {name: late, host: h2, vnets: [vnet1]}
"""
INTERVAL = 0.02


@pytest.fixture
def dep(caps, state_dir):
    tb = loads(TESTBED, source="<ovn-faults>", online_cpus=[0, 1])
    reason = caps.why_not(tb.vswitch.kind, tb.network.type)
    if reason:
        pytest.skip(f"ovn/geneve unsupported here: {reason}")
    d = builder.up(tb, caps=caps)
    yield d
    run_dir = d.run.dir
    assert d.down() == []
    assert leftovers(d.run_id, run_dir) == {}


def _reaches(dep, src, dst, count=5):
    argv = ping.command(ping.PingParams(dest=dep.ip(dst), count=count, interval_s=0.1,
                                        reply_timeout_s=0.5))
    return ping.parse(dep.exec(src, argv).stdout)["received"]


def test_established_traffic_survives_northd_and_sb_down_new_port_waits(dep):
    central, lsp = ovn.Central(dep), ovn.port_name("late", 0)
    nic = dep.testbed.vm("late").nics[0]
    # "late" becomes a port that does not exist yet: delete it from the NB database.
    central.nbctl("lsp-del", lsp)
    central.nbctl("--wait=hv", "sync")
    assert _reaches(dep, "late", "a") == 0, "a VM without a logical port forwarded"
    assert _reaches(dep, "a", "b") > 0

    count = int(12 / INTERVAL)          # a steady ping across the whole outage
    flow = dep.popen("a", ping.command(ping.PingParams(dest=dep.ip("b"), count=count,
                                                       interval_s=INTERVAL, reply_timeout_s=1)),
                     stdout=subprocess.PIPE, text=True)
    time.sleep(1)
    ovn.stop(dep, "northd")
    assert not ovn.running(dep, "northd")
    central.nbctl("lsp-add", "vnet1", lsp, "--", "lsp-set-addresses", lsp, f"{nic.mac} {nic.ip}",
                  "--", "lsp-set-port-security", lsp, f"{nic.mac} {nic.ip}")
    time.sleep(2)
    assert _reaches(dep, "late", "a") == 0, "a new port came up without ovn-northd"
    ovn.stop(dep, "sb", graceful=False)
    assert not ovn.running(dep, "sb")
    time.sleep(2)
    assert _reaches(dep, "late", "a") == 0, "a new port came up without the SB database"
    out, _ = flow.communicate(timeout=30)
    steady = ping.parse(out)
    assert steady["transmitted"] >= count * 0.9
    assert steady["loss_pct"] <= 1.0, \
        f"established traffic lost {steady['loss_pct']:.1f}% with northd and the SB database down"

    ovn.start(dep, "sb")
    ovn.start(dep, "northd")
    central.nbctl("wait-until", "Logical_Switch_Port", lsp, "up=true", timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _reaches(dep, "late", "a", count=2):
        pass
    assert _reaches(dep, "late", "a") > 0, "the new port did not come up after northd and SB returned"
