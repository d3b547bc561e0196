"""The faucet kind: real Faucet (from its own environment) switching two emulated hosts'
OVS bridges over a VLAN trunk. Each check would fail without Faucet doing the work: the
bridges are fail_mode secure with no NORMAL flow, so nothing crosses them but what
Faucet's pipeline forwards."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from vnetbench.battery.broadcast import _one as broadcast_once
from vnetbench.faults import Faults
from vnetbench.functional import measure
from vnetbench.kinds.faucet import config, netns as faucet
from vnetbench.testbed.loader import loads

# two vnets on the same addresses: only the VLANs keep them apart
TESTBED = """vswitch: faucet
network: {type: vlan}
vnets:
  - {name: red, cidr: 198.19.1.0/24}
  - {name: blue, cidr: 198.19.1.0/24}
pairs:
  - {name: red, placement: cross-host, vnet: red}
  - {name: blue, placement: cross-host, vnet: blue}
  - {name: new, placement: cross-host, vnet: red}
"""


def _flows(dep, host: str, match: str = "") -> list[str]:
    sock = dep.host_file(host, f"{dep.names.ovs_int}.mgmt")
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", f"unix:{sock}",
                          f"cookie={config.COOKIE:#x}/-1" + (f",{match}" if match else "")],
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "cookie=" in line]


def test_faucet_switches_two_vnets_across_hosts_and_keeps_them_apart(netns_up):
    """And keeps forwarding when it is stopped: its pipeline is installed up front."""
    dep = netns_up(loads(TESTBED, source="<test_faucet>", online_cpus=[0, 1]))
    pid = faucet.running_pid(dep.run.dir)
    assert pid, faucet.report(dep.run.dir)
    cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    assert str(faucet.manager()).encode() in cmdline and b"faucet.faucet" in cmdline

    for a, b in (("red-a", "red-b"), ("red-b", "red-a"), ("blue-a", "blue-b"), ("blue-b", "blue-a")):
        assert measure.ping_once(dep, a, dep.ip(b))["received"], f"{a} -> {b}"

    # Faucet learned each VM where it is: an eth_dst flow for red-a's MAC on both bridges
    mac = dep.testbed.vm("red-a").nics[0].mac
    for host in ("h1", "h2"):
        assert _flows(dep, host, f"dl_dst={mac}"), f"Faucet learned no {mac} on {host}"
        assert not [f for f in _flows(dep, host) if "NORMAL" in f]

    # the same addresses on another VLAN: broadcast stays in its vnet
    inside, _ = broadcast_once(dep, SimpleNamespace(vms=("red-a", "red-b"), vnet="red"), "icmp", 50, 2)
    across, _ = broadcast_once(dep, SimpleNamespace(vms=("red-a", "blue-b"), vnet="red"), "icmp", 50, 2)
    assert inside["received"] > 50, inside
    assert across["received"] == 0, across

    # proactive: with Faucet stopped its pipeline still forwards, for a pair that talked
    # and for one that never did (flooded), where the reactive ovs-openflow needs its
    # controller for every new flow
    Faults(dep).controller_stop()
    assert faucet.running_pid(dep.run.dir) is None
    assert measure.ping_once(dep, "red-a", dep.ip("red-b"))["received"]
    assert measure.ping_once(dep, "new-a", dep.ip("new-b"))["received"]


def test_tunnel_types_are_refused_naming_what_faucet_carries(caps):
    tb = loads(TESTBED.replace("type: vlan", "type: vxlan"), source="<t>", online_cpus=[0, 1])
    reason = caps.why_not(tb.vswitch.kind, tb.network.type)
    assert reason and "use network type vlan" in reason and "flat" in reason
