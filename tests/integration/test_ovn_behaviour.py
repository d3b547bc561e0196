"""OVN behaviours, measured. Control plane down, through the fault API: the flows
ovn-controller installed keep forwarding while ovn-northd and then the SB
database are down (or while the host is cut from the SB over the management
network), and a logical port created meanwhile cannot come up until the
control plane returns (REFERENCE §5). Geneve under OVN costs 58 bytes, exactly. A
standby ovn-northd takes over when the active one dies; without one, nothing carries an
NB change into the SB."""

import json
import subprocess
import time

import pytest

from vnetbench.errors import VnetbenchError
from vnetbench.faults import Faults, control
from vnetbench.functional import measure, verdict
from vnetbench.functional.verdict import Status
from vnetbench.testbed.loader import loads
from vnetbench.kinds.ovn import netns as ovn
from vnetbench.traffic import ping

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
def dep(netns_up):
    return netns_up(loads(TESTBED, source="<ovn-faults>", online_cpus=[0, 1]))


def _reaches(dep, src, dst, count=5):
    argv = ping.command(ping.PingParams(dest=dep.ip(dst), count=count, interval_s=0.1,
                                        reply_timeout_s=0.5))
    return ping.parse(dep.exec(src, argv).stdout)["received"]


def _outage(f, dep, kind):
    """Take the control plane away in two steps; after each, the caller checks."""
    if kind == "northd-then-sb":
        f.controller_stop("northd")
        assert not ovn.running(dep, "northd")
        daemons = dep.status()["controller"]["daemons"]
        assert daemons["ovn-northd"] is None and daemons["ovsdb-server-sb"] > 0
        yield "ovn-northd down"
        f.controller_kill("sb")
        assert not ovn.running(dep, "sb")
        yield "ovn-northd and the SB database down"
        f.controller_start("sb")
        f.controller_start("northd")
    else:                      # the host of the new port loses its management link
        f.partition("h2")
        yield "h2 cut from the SB database"
        yield "h2 still cut"
        f.heal("h2")


@pytest.mark.parametrize("kind", ["northd-then-sb", "partition"])
def test_established_traffic_survives_new_port_waits(dep, kind, tmp_path):
    """Through the fault API (vnetbench.faults): each step is a fault record."""
    from vnetbench.faults import Faults
    # the very first packet crosses: bring-up left no tunnel neighbour to resolve
    assert _reaches(dep, "a", "b", count=1) == 1
    f = Faults(dep, results=tmp_path / "faults.jsonl")
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
    steps = _outage(f, dep, kind)
    next(steps)
    central.nbctl("lsp-add", "vnet1", lsp, "--", "lsp-set-addresses", lsp, f"{nic.mac} {nic.ip}",
                  "--", "lsp-set-port-security", lsp, f"{nic.mac} {nic.ip}")
    for state in steps:
        time.sleep(2)
        assert _reaches(dep, "late", "a") == 0, f"a new port came up with {state}"
    out, _ = flow.communicate(timeout=30)
    steady = ping.parse(out)
    assert steady["transmitted"] >= count * 0.9
    assert steady["loss_pct"] <= 1.0, \
        f"established traffic lost {steady['loss_pct']:.1f}% during the outage ({kind})"
    print(f"{kind}: steady ping {steady['received']}/{steady['transmitted']} received")

    central.nbctl("wait-until", "Logical_Switch_Port", lsp, "up=true", timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _reaches(dep, "late", "a", count=2):
        pass
    assert _reaches(dep, "late", "a") > 0, f"the new port did not come up after the outage ({kind})"
    nb = central.pid(ovn.NB)
    ovn.start(dep, "nb")                 # starting a running component leaves it alone
    assert central.pid(ovn.NB) == nb
    faults = [json.loads(line) for line in (tmp_path / "faults.jsonl").read_text().splitlines()]
    assert all(r["test"] == "fault" and r["started"] <= r["finished"] for r in faults)
    assert [r["labels"]["fault"] for r in faults] == (
        ["controller-stop", "controller-kill", "controller-start", "controller-start"]
        if kind == "northd-then-sb" else ["partition", "heal"])


def test_ovn_geneve_costs_58_bytes(dep):
    """The tenant MTU (underlay - 58) is exact: with the VMs' own MTU raised past it,
    a DF packet of the tenant MTU crosses and one byte more is lost on the underlay
    (OVN's Geneve header carries an 8-byte option beyond the 50 of plain Geneve)."""
    tb, n = dep.testbed, dep.names
    mtu = tb.network.tenant_mtu
    assert mtu == tb.network.underlay_mtu - 58
    for i, vm in enumerate(tb.vms):
        for ns, dev in ((n.vm_ns(vm.name), "eth0"), (n.host_ns(vm.host), n.vm_port(i, 0))):
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", dev, "mtu", str(mtu + 8)],
                           check=True)

    def crosses(size):
        argv = ["ping", "-n", "-c", "2", "-W", "1", "-M", "do", "-s", str(size - 28), dep.ip("b")]
        return ping.parse(dep.exec("a", argv).stdout)["received"]
    assert crosses(mtu) > 0, f"a {mtu}-byte packet did not cross"
    assert crosses(mtu + 1) == 0, f"a {mtu + 1}-byte packet crossed: OVN adds less than 58 bytes"


def test_ovn_native_dhcp_is_answered_by_ovn_controller(dep):
    """A VM's DHCP client is answered from the vnet's DHCP_Options (server_id and
    server_mac as neutron's OVN driver sets them), by ovn-controller: the request never
    reaches the control server in the other VM. Without the port's dhcpv4_options the
    same probe hears only that control (N/A): the row measures OVN, not the probe."""
    server_id, server_mac = ovn.dhcp_servers(dep.testbed)["vnet1"]
    m = measure.dhcp_answers(dep, "a", "b")
    assert verdict.dhcp(m).status is Status.PASS, m
    assert {(r["src_mac"], r["src"]) for r in m["replies"]} == {(server_mac, server_id)}, m
    central = ovn.Central(dep)
    central.nbctl("clear", "Logical_Switch_Port", ovn.port_name("a", 0), "dhcpv4_options")
    central.nbctl("--wait=hv", "sync")
    m = measure.dhcp_answers(dep, "a", "b")
    v = verdict.dhcp(m)
    assert v.status is Status.NA and "only the control server" in v.detail, m


@pytest.mark.parametrize("northd", [2, 1])
def test_a_standby_northd_takes_over_when_the_active_one_is_killed(netns_up, northd):
    """Two instances: one active (the SB lock), one standby; SIGKILL the active one and
    the next NB change still reaches the SB, carried by the other. One instance (the
    control): the same kill leaves no one to carry it, so the probe would catch a
    standby that never takes over. Started again, the killed one carries changes again."""
    dep = netns_up(loads(f"vswitch: {{kind: ovn, ovn: {{northd: {northd}}}}}\n"
                         "network: {type: geneve}\n", source="<ovn-northd>", online_cpus=[0, 1]))
    names = [w for w in control.components(dep) if w.startswith("northd")]
    assert sorted(ovn.northd_status(dep, w) for w in names) == \
        (["active", "standby"] if northd == 2 else ["active"])
    first = control.active(dep)
    assert control.sync(dep, 10) < 5
    Faults(dep).controller_kill(first)
    if northd == 2:
        assert control.sync(dep, 10) < 5
        assert control.active(dep) == next(w for w in names if w != first)
    else:
        with pytest.raises(VnetbenchError, match="no ovn-northd carried an NB change"):
            control.sync(dep, 3)
    Faults(dep).controller_start(first)
    assert control.sync(dep, 10) < 5
