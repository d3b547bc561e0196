"""AF_XDP or AF_PACKET ports for OVS's userspace datapath (issue 22: lift the ceiling): the
choice per testbed, what the build's transaction sets, and the PMD thread in the
emulation-bound rule."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench import kinds
from vnetbench.errors import TestbedFileError as FileError, UnsupportedError
from vnetbench.kinds import ovs as ovs_kind
from vnetbench.kinds.ovs import netns as ovs
from vnetbench.results import bound
from vnetbench.results.record import Result
from vnetbench.testbed.capabilities import LINK_KINDS, PACKAGES, Capabilities
from vnetbench.testbed.codec import from_dict, to_dict
from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns.names import Names

VXLAN = "vswitch: {kind: ovs%s}\nnetwork: {type: vxlan}\n"


def caps(xdp=True, ovs_kernel=False):
    return Capabilities(root=True, binaries={p: f"/usr/bin/{p}" for p in PACKAGES},
                        links={k: None for k in LINK_KINDS}, ovs_kernel=ovs_kernel,
                        ovs_version="3.1.0", xdp_sockets=xdp)


def tb(extra="", text=None):
    return loads(text or VXLAN % extra, source="<t>", online_cpus=[0, 1])


def test_auto_takes_afxdp_where_the_kernel_has_xdp_sockets():
    kind = kinds.get("ovs")
    assert kind.ports(tb(), caps()) == "afxdp"
    assert kind.ports(tb(), caps(xdp=False)) == "afpacket"
    assert kind.ports(tb(", datapath: system"), caps(ovs_kernel=True)) is None
    assert kinds.get("linuxbridge").ports(tb(text="vswitch: linuxbridge\nnetwork: {type: vxlan}\n"), caps()) is None


def test_auto_stays_on_afpacket_where_the_testbed_would_hold_too_many_umems():
    many = "".join(f"  - {{name: v{i}, host: h1}}\n" for i in range(ovs_kind.AFXDP_MAX_PORTS))
    big = tb(text=VXLAN % "" + "vms:\n" + many)
    assert ovs_kind.veth_ports(big, "h1") > ovs_kind.AFXDP_MAX_PORTS
    assert kinds.get("ovs").ports(big, caps()) == "afpacket"
    assert kinds.get("ovs").ports(tb(text=VXLAN % ", ports: afxdp" + "vms:\n" + many), caps()) == "afxdp"
    # the budget is the machine's, not a host's: 8 VMs on each of 2 hosts is 18 ports
    spread = "".join(f"  - {{name: v{i}, host: h{i % 2 + 1}}}\n" for i in range(16))
    wide = tb(text=VXLAN % "" + "vms:\n" + spread)
    assert max(ovs_kind.veth_ports(wide, h.name) for h in wide.hosts) <= ovs_kind.AFXDP_MAX_PORTS
    assert kinds.get("ovs").ports(wide, caps()) == "afpacket"
    assert kinds.get("ovs").ports(tb(), caps()) == "afxdp"          # the default pair testbed


def test_asked_ports_are_kept_and_round_trip_through_the_state_files():
    t = tb(", ports: afpacket")
    assert kinds.get("ovs").ports(t, caps()) == "afpacket"
    assert from_dict(to_dict(t)).vswitch.ports == "afpacket"
    old = to_dict(t)
    del old["vswitch"]["ports"]           # a run written before the field existed
    assert from_dict(old).vswitch.ports == "auto"


@pytest.mark.parametrize("text, fix", [
    ("vswitch: {kind: linuxbridge, ports: afxdp}\nnetwork: {type: vxlan}\n", "use an OVS kind"),
    (VXLAN % ", datapath: system, ports: afxdp", "datapath: netdev"),
    (VXLAN % ", ports: dpdk", None),
])
def test_bad_ports_are_one_line_naming_the_field(text, fix):
    with pytest.raises(FileError) as e:
        loads(text, source="t.yaml", online_cpus=[0, 1])
    line = str(e.value)
    assert "\n" not in line and "t.yaml" in line and "ports" in line
    if fix:
        assert fix in line


def test_afxdp_on_a_kernel_without_xdp_sockets_is_refused():
    with pytest.raises(UnsupportedError, match="CONFIG_XDP_SOCKETS"):
        caps(xdp=False).require(tb(", ports: afxdp"))
    caps(xdp=False).require(tb())          # auto falls back


def _host(text, ports="afxdp"):
    t = loads(text, source="<ovs>", online_cpus=[0, 1])
    names = Names("abc123")
    vm_i = {vm.name: i for i, vm in enumerate(t.vms)}
    vnet_i = {v.name: i for i, v in enumerate(t.vnets)}
    ctx = SimpleNamespace(
        testbed=t, names=names, ports=ports, run=SimpleNamespace(run_id="abc123", dir=Path("/run/x")),
        vnet_index=vnet_i.__getitem__, vm_index=vm_i.__getitem__, host_index=[h.name for h in t.hosts].index,
        vm_ports=lambda h, vnet: [names.vm_port(vm_i[vm.name], k) for vm in t.vms_on(h)
                                  for k, nic in enumerate(vm.nics) if nic.vnet == vnet],
        peers=lambda h, vnet: [p for p in t.hosts if p.name != h],
        qos_ports=lambda h: [(names.vm_port(vm_i[vm.name], n), nic.qos) for vm in t.vms_on(h)
                             for n, nic in enumerate(vm.nics) if nic.qos])
    return ovs.OvsHost(ctx, t.hosts[1]), names


def _sets(tx):
    """{interface: type} of every 'set Interface X type=Y' in an ovs-vsctl transaction."""
    return {tx[i + 2]: tx[i + 3].split("=", 1)[1] for i in range(len(tx) - 3)
            if tx[i:i + 2] == ["set", "Interface"] and tx[i + 3].startswith("type=")}


def test_the_transaction_makes_every_veth_afxdp_but_a_shaped_port():
    host, names = _host("vswitch: ovs\nnetwork: {type: vxlan}\nvnets: [{name: red}]\nvms:\n"
                        "  - {name: a, host: h2, vnets: [{name: red, qos: {max_kbps: 5000}}]}\n"
                        "  - {name: b, host: h2, vnets: [{name: red, qos: {max_kbps: 5000, direction: egress}}]}\n"
                        "  - {name: c, host: h1}\n")
    tx = host._transaction("netdev")
    tx += host.afxdp_columns(tx)
    types = _sets(tx)
    shaped, metered = names.vm_port(0, 0), names.vm_port(1, 0)
    assert types[metered] == "afxdp" and types[names.uplink] == "afxdp"
    assert shaped not in types            # linux-htb shapes in the qdisc, which AF_XDP bypasses
    assert set(types.values()) == {"afxdp", "vxlan"}   # tunnels keep their type
    assert names.vm_port(2, 0) not in types            # another host's VM
    i = len(tx) - tx[::-1].index("Open_vSwitch")    # the last 'set Open_vSwitch .'
    assert tx[i + 1:i + 3] == ["other_config:pmd-cpu-mask=0x2", f"other_config:pmd-maxsleep={ovs.PMD_MAXSLEEP_US}"]


def test_afpacket_adds_nothing():
    host, _ = _host("vswitch: ovs\nnetwork: {type: flat}\n", ports="afpacket")
    calls = []
    host.vsctl = lambda *a: calls.append(a)
    host.apply("netdev")
    assert "type=afxdp" not in calls[0] and not any("pmd" in a for a in calls[0])


def test_cpu_mask():
    assert ovs.cpu_mask([0]) == "0x1" and ovs.cpu_mask([1, 3]) == "0xa"


def test_a_saturated_pmd_thread_marks_on_the_userspace_datapath_only():
    comps = {"vswitch/ovs-vswitchd/pmd": 97.0, "vswitch/ovs-vswitchd/main": 3.0}
    rec = lambda dp: Result(test="tcp_stream", labels={"vswitch": "ovs", "network": "vxlan",  # noqa: E731
                                                        "placement": "cross-host", "params": {}},
                            samples={"gbps": [2.4]}, provenance={"ovs_datapath": dp, "ovs_ports": "afxdp"},
                            extra={"repetitions": [{"cpu": {"components": comps}}]})
    (b,) = bound.bound(rec("netdev"))
    assert b.component == "ovs-vswitchd/pmd" and "AF_XDP" in b.text()
    assert bound.bound(rec("system")) == []


# -- where captures and host-side qdiscs go with AF_XDP ports ---------------------------

class _Run:
    def __init__(self, ports):
        self.meta_ = {"ovs_ports": ports}
        self.recorded = []

    def meta(self):
        return self.meta_

    def record(self, kind, **kw):
        self.recorded.append((kind, kw))


def _netns_dep(ports, text="vswitch: ovs\nnetwork: {type: flat}\n", monkeypatch=None):
    from vnetbench.testbed.netns import deployment
    t = loads(text, source="<t>", online_cpus=[0, 1])
    run = _Run(ports)
    run.run_id = "abc123"
    dep = deployment.Deployment(run, t)
    started = []
    monkeypatch.setattr(deployment.subprocess, "Popen",
                        lambda argv, **kw: started.append(argv) or SimpleNamespace(pid=1))
    monkeypatch.setattr(deployment.proc, "starttime", lambda pid: 0)
    return dep, started


@pytest.mark.parametrize("ports", ["afxdp", "afpacket"])
def test_a_capture_runs_where_the_links_frames_are_seen(monkeypatch, ports):
    """AF_XDP hides a port's frames from its host's kernel: the capture goes to the veth's
    other end (the fabric for underlay links, the VM for its port); AF_PACKET: the host."""
    dep, started = _netns_dep(ports, monkeypatch=monkeypatch)
    n = dep.names
    h2 = dep.testbed.hosts[1]
    vm_i, vm = next((i, v) for i, v in enumerate(dep.testbed.vms) if v.host == "h2")
    cases = {n.uplink: (n.fabric_ns, n.fabric_uplink(1)), n.physnet(0): (n.fabric_ns, n.fabric_physnet(1, 0)),
             n.vm_port(vm_i, 0): (n.vm_ns(vm.name), n.vm_nic(0))}
    for link, (ns, far) in cases.items():
        dep.link_popen("h2", link, lambda iface: ["tcpdump", "-i", iface])
        argv = started[-1]
        want_ns, want_dev = (ns, far) if ports == "afxdp" else (n.host_ns("h2"), link)
        assert argv[:4] == ["ip", "netns", "exec", want_ns] and argv[-2:] == ["-i", want_dev]
        assert dep.run.recorded[-1][1]["host"] == "h2"           # journaled, teardown stops it
    dep.link_popen("h2", "bp-not-a-veth", lambda iface: ["tcpdump", "-i", iface])
    assert started[-1][3] == n.host_ns(h2.name)


def test_a_shaped_port_transmits_through_the_kernel_for_the_block_only(monkeypatch):
    from vnetbench.kinds.ovs import netns as ovs_netns
    calls = []
    types = {"tp": "afxdp"}
    fake = SimpleNamespace(vsctl=lambda *a: calls.append(a) or (f'"{types["tp"]}"\n' if a[0] == "get" else ""))
    monkeypatch.setattr(ovs_netns, "host_of", lambda dep, host: fake)
    host = SimpleNamespace(name="h1")
    with kinds.netns_driver("ovs").kernel_egress(None, host, "tp") as got:
        assert got == ("h1", "tp") and calls[-1] == ("set", "Interface", "tp", "type=system")
    assert calls[-1] == ("set", "Interface", "tp", "type=afxdp")
    calls.clear()
    types["tp"] = ""                     # an AF_PACKET port (or a shaped VM port) is left alone
    with kinds.netns_driver("ovs").kernel_egress(None, host, "tp"):
        pass
    assert [c[0] for c in calls] == ["get"]
