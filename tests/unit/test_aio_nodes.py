"""The all-in-one cloud's compute nodes (aio up --computes N), from the layout alone: each
node's hosts, sockets, bridges, tunnel endpoint and CPUs in its nova.conf and OVS agent
file, and what stays as it was with one node."""

import configparser
import ipaddress
from pathlib import Path

import pytest

from vnetbench.aio import conf

STATE = Path("/var/tmp/vnbaio-x")
TWO = conf.Layout(STATE, "a1b2c3", port_base=20000, cidr="198.19.250.0/24", host="vm", computes=2)
ONE = conf.Layout(STATE, "a1b2c3", port_base=20000, cidr="198.19.250.0/24", host="vm")


def _parse(text: str) -> configparser.ConfigParser:
    p = configparser.ConfigParser(interpolation=None)
    p.read_string(text)
    return p


def test_one_node_keeps_its_names_and_tunnel_endpoint():
    (node,) = ONE.nodes
    assert node.primary and node.host == "vm" and node.netns is None
    assert (node.br_int, node.br_phys, node.ovsdb) == (ONE.br_int, ONE.br_phys, ONE.ovsdb)
    a = _parse(conf.ovs_agent(ONE))
    assert a["ovs"]["local_ip"] == "198.19.250.1"          # the provider bridge's, as before
    n = _parse(conf.nova(ONE))
    assert n["libvirt"]["connection_uri"] == "qemu:///system"
    assert n["compute"]["cpu_dedicated_set"] == "0-1"
    assert ONE.subnets() == ("198.19.250.0/24", "198.18.250.0/24")
    assert not any("nodes" in p.parts for p in conf.files(ONE))


def test_each_node_has_its_own_host_libvirtd_ovs_and_cpu():
    first, second = TWO.nodes
    n1, n2 = (_parse(conf.nova(TWO, node)) for node in TWO.nodes)
    # Nova's host = libvirtd's hostname (Placement's provider) = the OVS agent's host
    assert n1["DEFAULT"]["host"] == "vm"
    assert n2["DEFAULT"]["host"] == second.host == "c2.vnbaioa1b2c3.test"
    assert "." in second.host                            # libvirt takes it without a lookup
    assert n2["libvirt"]["connection_uri"] == \
        f"qemu+unix:///system?socket={STATE}/sockets/198.18.150.10/libvirt-sock"
    assert n1["libvirt"]["connection_uri"] == "qemu:///system"
    assert n2["os_vif_ovs"]["ovsdb_connection"] == f"unix:{STATE}/nodes/c2/ovs/db.sock"
    assert n1["os_vif_ovs"]["ovsdb_connection"] == f"unix:{STATE}/ovs/db.sock"
    # os-vif's privileged device work (tap MTU, delete on unplug) in the node's netns
    helper = n2["vif_plug_ovs_privileged"]["helper_command"]
    assert helper.startswith("nsenter --net=/run/netns/vnbaioa1b2c3-c2 -- privsep-helper")
    assert "vif_plug_ovs_privileged" not in n1
    # one CPU each: two pinned guests on two nodes never share a core
    assert (n1["compute"]["cpu_dedicated_set"], n2["compute"]["cpu_dedicated_set"]) == ("0", "1")
    # its own state and locks; one instances dir (shared storage, as for live migration)
    assert n1["DEFAULT"]["state_path"] != n2["DEFAULT"]["state_path"]
    assert n1["DEFAULT"]["instances_path"] == n2["DEFAULT"]["instances_path"]
    assert n1["oslo_concurrency"]["lock_path"] != n2["oslo_concurrency"]["lock_path"]
    assert n2["DEFAULT"]["instance_name_template"] == n1["DEFAULT"]["instance_name_template"]


def test_each_nodes_ovs_agent_tunnels_from_its_underlay_address():
    first, second = TWO.nodes
    a1, a2 = (_parse(conf.ovs_agent(TWO, node)) for node in TWO.nodes)
    assert a1["DEFAULT"]["host"] == "vm" and a2["DEFAULT"]["host"] == second.host
    assert a1["ovs"]["local_ip"] == "198.19.150.1" and a2["ovs"]["local_ip"] == "198.19.150.2"
    under = ipaddress.ip_network(TWO.underlay_cidr)
    assert all(ipaddress.ip_address(n.local_ip) in under for n in TWO.nodes)
    assert a2["ovs"]["ovsdb_connection"] == f"unix:{STATE}/nodes/c2/ovs/db.sock"
    # the same bridge names on every node (each in its own OVS and namespace), as br-int is
    # in a cloud: a live migration's destination plugs into the bridge the source's names
    assert a2["ovs"]["integration_bridge"] == "vnba1b2c3-int" == a1["ovs"]["integration_bridge"]
    assert a2["ovs"]["bridge_mappings"] == a1["ovs"]["bridge_mappings"] == f"{conf.PHYSNET}:vnba1b2c3-phy"
    names = [getattr(second, b) for b in ("br_int", "br_tun", "br_phys", "br_underlay")]
    names += [n.link(k) for n in TWO.nodes[1:] for k in "mup"]     # this machine's ends
    assert len(set(names)) == len(names) and all(len(x) <= 15 for x in names)     # IFNAMSIZ
    # node 2's agent reaches RabbitMQ over its management link, node 1's on loopback
    ours, theirs = second.mgmt
    assert a2["DEFAULT"]["transport_url"] == f"rabbit://guest:guest@{ours}:{TWO.port('rabbit')}/"
    assert "transport_url" not in a1["DEFAULT"]
    assert ipaddress.ip_address(ours) in ipaddress.ip_network(f"{theirs}/30", strict=False)


def test_live_migration_reaches_each_libvirtd_by_a_socket_named_by_its_inbound_address():
    """Nova formats live_migration_uri with the destination's live_migration_inbound_addr
    (its QEMU's stream address too): that address names the dir of the destination
    libvirtd's socket, for node 1 the machine's /run/libvirt bound there in node 2."""
    first, second = TWO.nodes
    ours, theirs = second.mgmt
    n1, n2 = (_parse(conf.nova(TWO, node)) for node in TWO.nodes)
    assert n1["libvirt"]["live_migration_inbound_addr"] == ours
    assert n2["libvirt"]["live_migration_inbound_addr"] == theirs
    uri = n1["libvirt"]["live_migration_uri"]
    assert uri == n2["libvirt"]["live_migration_uri"]
    for node in TWO.nodes:
        assert uri % node.migration_addr == f"qemu+unix:///system?socket={node.libvirt_sock_dir}/libvirt-sock"
    assert second.libvirt_uri == f"qemu+unix:///system?socket={second.libvirt_sock_dir}/libvirt-sock"
    assert "live_migration_uri" not in _parse(conf.nova(ONE))["libvirt"]
    # block migration's config-drive copy goes through rsync's remote shell
    assert n1["libvirt"]["remote_filesystem_transport"] == "rsync"


def test_rabbitmq_listens_where_the_nodes_reach_it():
    text = conf.rabbitmq(TWO)
    assert f"127.0.0.1:{TWO.port('rabbit')}" in text
    assert f"{TWO.nodes[1].mgmt[0]}:{TWO.port('rabbit')}" in text
    assert "loopback_users = none" in text and "loopback_users" not in conf.rabbitmq(ONE)


def test_node_files_sockets_and_hidden_dirs_are_the_nodes_own():
    second = TWO.nodes[1]
    files = conf.files(TWO)
    assert {second.conf_path("nova"), second.conf_path("neutron"), second.etc / "libvirtd.conf"} <= set(files)
    assert all(STATE in p.parents for p in files)
    lv = files[second.etc / "libvirtd.conf"]
    assert f'unix_sock_dir = "{second.libvirt_sock_dir}"' in lv and second.host_uuid in lv
    assert second.host_uuid != conf.Node(TWO, 3).host_uuid
    hidden = dict(second.hidden())
    shared = f"{STATE}/data/nova/instances"
    assert set(hidden) == {"/run/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/etc/libvirt/qemu", shared}
    assert all(second.dir in d.parents for p, d in hidden.items() if p != shared)
    # Nova's one instances path, the node's own disks behind it
    assert hidden[shared] == STATE / "data" / "nova-c2" / "instances"
    assert TWO.subnets() == ("198.19.250.0/24", "198.18.250.0/24", "198.19.150.0/24", "198.18.150.0/24")
    assert second.netns == "vnbaioa1b2c3-c2"


def test_cpus_are_shared_out_between_nodes():
    assert conf.split_cpus("0-1", 2) == ["0", "1"]
    assert conf.split_cpus("0-3", 2) == ["0,1", "2,3"]
    assert conf.split_cpus("0,2-4", 3) == ["0,2", "3", "4"]
    assert conf.split_cpus("", 3) == ["", "", ""]
    assert conf.split_cpus("0-1", 1) == ["0-1"]
    with pytest.raises(ValueError, match="1 CPU"):
        conf.split_cpus("0", 2)
