"""OVN kind without a system: the NB and OVS transactions it sends, its MTU, its
collectors (pure argv)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench.errors import TestbedFileError as FileError
from vnetbench.monitor import watch
from vnetbench.testbed.loader import loads
from vnetbench.kinds import encap_overhead
from vnetbench.testbed.model import NetType, VSwitchKind
from vnetbench.kinds.ovn import netns as ovn
from vnetbench.testbed.netns import mgmt
from vnetbench.testbed.netns.names import Names

TWO_VNETS = """
vswitch: ovn
network: {{type: {ntype}}}
vnets: [{{name: red, cidr: 198.19.1.0/24}}, {{name: blue, cidr: 198.19.1.0/24, segmentation_id: {seg}}}]
pairs: [{{name: r, placement: cross-host, vnet: red}}, {{name: b, placement: cross-host, vnet: blue}}]
"""


def make_testbed(ntype="geneve", seg=5000):
    return loads(TWO_VNETS.format(ntype=ntype, seg=seg), source="<ovn>", online_cpus=[0, 1])


def ctx(tb, tmp=Path("/run/x")):
    return SimpleNamespace(testbed=tb, names=Names("abc123"),
                           run=SimpleNamespace(run_id="abc123", dir=tmp / "abc123"))


def test_ovn_geneve_carries_an_8_byte_option_so_the_tenant_mtu_is_underlay_minus_58():
    assert encap_overhead(VSwitchKind.OVN, NetType.GENEVE) == 58
    assert encap_overhead(VSwitchKind.OVS, NetType.GENEVE) == 50
    assert encap_overhead(VSwitchKind.OVN, NetType.VXLAN) == 50
    assert make_testbed().network.tenant_mtu == 1442
    with pytest.raises(FileError, match="58 bytes of geneve"):
        loads("vswitch: ovn\nnetwork: {type: geneve, tenant_mtu: 1450}\n", source="x.yaml")


def test_nb_transaction_one_switch_per_vnet_one_port_per_nic_with_port_security():
    tb = make_testbed()
    tx = ovn.nb_transaction(tb, "abc123")
    text = " ".join(tx)
    assert tx[0] == "ls-add" and text.count("ls-add") == 2
    assert "other_config:requested-tnl-key=5000" in tx     # blue's segmentation id
    for vm in tb.vms:
        nic, lsp = vm.nics[0], ovn.port_name(vm.name, 0)
        i = tx.index(lsp)
        assert tx[i - 2:i] == ["lsp-add", nic.vnet]
        assert ["lsp-set-addresses", lsp, f"{nic.mac} {nic.ip}"] == tx[i + 2:i + 5]
        assert ["lsp-set-port-security", lsp, f"{nic.mac} {nic.ip}"] == tx[i + 6:i + 9]
    assert text.count("external_ids:vnetbench-run=abc123") == 2 + 2 + len(tb.vms)   # + DHCP_Options


def test_native_dhcp_as_neutron_sets_it_one_options_row_per_vnet_on_every_vm_port():
    tb = make_testbed()
    tx = ovn.nb_transaction(tb, "abc123")
    servers = ovn.dhcp_servers(tb)
    for vi, vnet in enumerate(tb.vnets):
        server_id, server_mac = servers[vnet.name]
        assert server_id == "198.19.1.254" and server_mac.startswith("fa:16:3e:")
        i = tx.index(f"--id=@dhcp{vi}")
        assert tx[i + 1:i + 4] == ["create", "DHCP_Options", 'cidr="198.19.1.0/24"']
        assert tx[i + 4] == (f'options={{server_id="{server_id}",server_mac="{server_mac}",'
                             f'lease_time="43200",mtu="{tb.network.tenant_mtu}"}}')
    assert len({mac for _, mac in servers.values()}) == 2
    assert not {mac for _, mac in servers.values()} & {n.mac for vm in tb.vms for n in vm.nics}
    for vm in tb.vms:
        lsp, vi = ovn.port_name(vm.name, 0), [v.name for v in tb.vnets].index(vm.nics[0].vnet)
        sets = [i for i in range(len(tx) - 3) if tx[i:i + 2] == ["Logical_Switch_Port", lsp]]
        assert tx[sets[0] + 3] == f"dhcpv4_options=@dhcp{vi}"


def test_dhcp_server_takes_the_highest_free_address_and_none_when_full():
    tb = loads("vswitch: ovn\nnetwork: {type: geneve}\nvnets: [{name: v, cidr: 198.19.1.0/30}]\n"
               "vms: [{name: a, host: h1, vnets: [{name: v, ip: 198.19.1.2}]}]\n",
               source="<ovn>", online_cpus=[0, 1])
    assert ovn.dhcp_servers(tb)["v"][0] == "198.19.1.1"
    full = loads("vswitch: ovn\nnetwork: {type: geneve}\nvnets: [{name: v, cidr: 198.19.1.0/30}]\n"
                 "vms: [{name: a, host: h1}, {name: b, host: h2}]\n", source="<ovn>", online_cpus=[0, 1])
    assert ovn.dhcp_servers(full) == {}
    assert not any(a.startswith("dhcpv4_options") for a in ovn.nb_transaction(full, "abc123"))


def test_vxlan_mode_requests_no_tunnel_key_beyond_12_bits():
    tx = ovn.nb_transaction(make_testbed("vxlan", seg=5000), "abc123")
    assert "other_config:requested-tnl-key=5000" not in tx
    assert "other_config:requested-tnl-key=1001" in tx      # red's default id fits


def test_host_transaction_points_ovn_controller_at_the_sb_over_management():
    tb = make_testbed()
    c = ctx(tb)
    host = ovn.OvnHost(c, tb.hosts[0], ovn.Central(c))
    tx = host._transaction("netdev")
    sb = f"tcp:{mgmt.controller_ip(tb)}:{ovn.SB_PORT}"
    for col in (f"external_ids:ovn-remote={sb}", "external_ids:ovn-encap-type=geneve",
                f"external_ids:ovn-encap-ip={tb.hosts[0].underlay_ip}",
                "external_ids:ovn-bridge-datapath-type=netdev", "external_ids:system-id=abc123-h1",
                f"external_ids:ovn-bridge={c.names.ovs_int}", "fail_mode=secure"):
        assert col in tx
    vm_i = [i for i, vm in enumerate(tb.vms) if vm.host == "h1"]
    for i in vm_i:
        port = c.names.vm_port(i, 0)
        assert f"external_ids:iface-id={ovn.port_name(tb.vms[i].name, 0)}" in tx[tx.index(port, tx.index("Interface")):]
    assert c.names.uplink in tx and f"mtu_request={tb.network.underlay_mtu}" in tx


def test_central_daemons_listen_on_the_management_address():
    tb = make_testbed()
    central = ovn.Central(ctx(tb))
    prog, args = central.argv(ovn.SB)
    assert prog == "ovsdb-server" and f"--remote=ptcp:{ovn.SB_PORT}:{mgmt.controller_ip(tb)}" in args
    prog, args = central.argv(ovn.NORTHD)
    assert prog == "ovn-northd" and args[0] == f"--ovnnb-db={central.nb}"
    assert not mgmt.cidr(tb).overlaps(tb.network.underlay_cidr)


def test_management_network_avoids_an_underlay_on_its_first_choice():
    tb = loads("vswitch: ovn\nnetwork: {type: geneve, underlay_cidr: 198.19.255.0/24}\n"
               "vnets: [{name: v, cidr: 198.19.1.0/24}]\n", source="<x>")
    assert str(mgmt.cidr(tb)) == "198.18.255.0/24"


def test_collectors_count_ovn_controller_on_its_host_and_northd_dbs_as_controller(tmp_path):
    run = tmp_path / "run"
    (run / "controller").mkdir(parents=True)
    for name, pid in (("ovsdb-server-nb", 7), ("ovsdb-server-sb", 8), ("ovn-northd", 9)):
        (run / "controller" / f"{name}.pid").write_text(f"{pid}\n")
    from vnetbench.testbed.netns.deployment import Deployment
    dep = SimpleNamespace(run=SimpleNamespace(dir=run),
                          testbed=SimpleNamespace(vswitch=SimpleNamespace(kind=VSwitchKind.OVN)),
                          vswitch_pids=lambda h: {"ovs-vswitchd": 1, "ovsdb-server": 2, "ovn-controller": 3},
                          host_file=lambda h, name: run / h / name, vm_pidfiles=lambda h: [])
    dep.controller_pids = lambda: Deployment.controller_pids(dep)
    assert dep.controller_pids() == {"ovn-northd": 9, "ovsdb-server-nb": 7, "ovsdb-server-sb": 8}
    argv = watch.collector_argv(dep, SimpleNamespace(name="h1", cpus=(0,)), run / "c.port")
    assert f"--pidfile={run}/h1/ovn-controller.pid" in argv
    ctl = watch.controller_argv(dep, run / "ctl.port")
    assert ctl[ctl.index("--host") + 1] == "controller" and ctl[ctl.index("--cpus") + 1] == ""
    assert {a for a in ctl if a.startswith("--pidfile")} == {
        f"--pidfile={run}/controller/{n}.pid" for n in ("ovn-northd", "ovsdb-server-nb", "ovsdb-server-sb")}


@pytest.mark.parametrize("ntype, seg, tags, maps", [
    ("flat", "", set(), "physnet0:{b0},physnet1:{b1}"),
    ("vlan", ", segmentation_id: 300", {"tag=101", "tag=300"}, "physnet:{b}")])
def test_flat_and_vlan_reach_the_provider_network_through_localnet_ports(ntype, seg, tags, maps):
    tb = loads(f"vswitch: ovn\nnetwork: {{type: {ntype}}}\n"
               f"vnets: [{{name: red}}, {{name: blue{seg}}}]\n"
               "pairs: [{name: r, placement: cross-host, vnet: red}, {name: b, placement: cross-host, vnet: blue}]\n",
               source="<ovn>", online_cpus=[0, 1])
    tx = ovn.nb_transaction(tb, "abc123")
    for vnet in ("red", "blue"):
        i = tx.index(f"ln-{vnet}")
        assert tx[i - 2:i] == ["lsp-add", vnet]
        assert tx[i + 2:i + 5] == ["lsp-set-type", f"ln-{vnet}", "localnet"]
    assert {a for a in tx if a.startswith("tag=")} == tags
    c = ctx(tb)
    c.vnet_index = {v.name: i for i, v in enumerate(tb.vnets)}.__getitem__
    htx = ovn.OvnHost(c, tb.hosts[0], ovn.Central(c))._transaction("netdev")
    n = c.names
    want = maps.format(b0=n.provider_bridge(0), b1=n.provider_bridge(1), b=n.provider_bridge())
    assert f'external_ids:ovn-bridge-mappings="{want}"' in htx
    assert n.ovs_phy not in htx


def test_faults_name_the_kind_and_the_components():
    from vnetbench.errors import BuildError
    dep = SimpleNamespace(run_id="abc123", testbed=SimpleNamespace(
        vswitch=SimpleNamespace(kind=VSwitchKind.OVS, options=None)))
    with pytest.raises(BuildError, match="is ovs, not ovn"):
        ovn.stop(dep, "northd")
    dep.testbed.vswitch.kind = VSwitchKind.OVN
    with pytest.raises(BuildError, match="use one of: northd, sb, nb"):
        ovn.start(dep, "southd")
