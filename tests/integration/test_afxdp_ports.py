"""AF_XDP ports on OVS's userspace datapath (issue 22: lift the OVS ceiling): what the
build sets up where this kernel has XDP sockets, tagged frames across hosts (the offload
that lost VLAN tags), and the underlay still observable as a wire."""

import json
import subprocess

import pytest

from vnetbench.functional import measure
from vnetbench.testbed.loader import loads


@pytest.fixture
def xdp(caps):
    if not caps.xdp_sockets:
        pytest.skip("this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")


def _types(dep, host):
    out = subprocess.run(["ovs-vsctl", f"--db=unix:{dep.host_file(host, 'db.sock')}", "--format=json",
                          "--columns=name,type", "list", "Interface"], capture_output=True, text=True,
                         check=True).stdout
    return {name: typ for name, typ in json.loads(out)["data"]}


def test_vlan_across_hosts_on_afxdp_ports_with_the_pmd_on_the_hosts_cpus(netns_up, xdp):
    dep = netns_up(loads("vswitch: ovs\nnetwork: {type: vlan}\n", source="<afxdp>"))
    assert dep.run.meta()["ovs_ports"] == "afxdp"
    for i, h in enumerate(dep.testbed.hosts):
        types = _types(dep, h.name)
        ports = [dep.vm_port(v.name)[1] for v in dep.testbed.vms_on(h.name)] + [dep.names.uplink]
        assert {types[p] for p in ports} == {"afxdp"}, types
        conf = subprocess.run(["ovs-vsctl", f"--db=unix:{dep.host_file(h.name, 'db.sock')}", "get",
                               "Open_vSwitch", ".", "other_config:pmd-cpu-mask"],
                              capture_output=True, text=True, check=True).stdout.strip().strip('"')
        assert int(conf, 16) == sum(1 << c for c in h.cpus)
    cross = next(p for p in dep.testbed.pairs if p.placement == "cross-host")
    assert measure.ping_once(dep, cross.vms[0], dep.ip(cross.vms[1]), count=3)["received"] == 3


def test_the_underlay_is_captured_where_the_wire_is(netns_up, xdp):
    """AF_XDP hides the uplink's frames from h1's kernel; the capture runs at the fabric's end."""
    dep = netns_up(loads("vswitch: ovs\nnetwork: {type: vxlan}\n", source="<afxdp>"))
    cross = next(p for p in dep.testbed.pairs if p.placement == "cross-host")
    got = measure.encapsulation(dep, cross.vms[0], cross.vms[1])
    assert got["encaps"] == {"VXLAN": sum(got["frames"].values())} and got["encaps"]["VXLAN"] >= got["sent"] > 0


def test_afpacket_when_asked(netns_up):
    dep = netns_up(loads("vswitch: {kind: ovs, ports: afpacket}\nnetwork: {type: vxlan}\n", source="<afp>"))
    assert dep.run.meta()["ovs_ports"] == "afpacket"
    assert "afxdp" not in _types(dep, "h1").values()
