"""The remote-hypervisor parts that need no hypervisor: which URIs are another machine,
what SSH to it and through it looks like, the run's bridge names and the NICs libvirt
plugs itself."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.remote import Hypervisor, is_remote
from vnetbench.testbed.libvirt.remote_deployment import bridge_names
from vnetbench.testbed.loader import loads


@pytest.mark.parametrize("uri,remote", [
    ("qemu:///system", False), ("qemu+ssh://root@localhost/system", False),
    ("qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k", False), ("qemu+ssh://root@[::1]/system", False),
    ("qemu+ssh://root@198.19.254.2/system", True), ("qemu+ssh://kvm7.example.org/system", True),
    ("qemu+tcp://198.19.254.2/system", False)])
def test_which_uris_are_another_machine(uri, remote):
    assert is_remote(uri) is remote


def test_hypervisor_ssh_takes_the_uris_user_port_and_key():
    hv = Hypervisor.of("qemu+ssh://admin@198.19.254.2:2222/system?keyfile=/k/id&no_tty=1")
    assert (hv.user, hv.host, hv.port, hv.key) == ("admin", "198.19.254.2", 2222, Path("/k/id"))
    argv = hv.ssh(Path("/tmp/m")).argv(["ovs-vsctl", "list-br"])
    assert argv[0] == "ssh" and "admin@198.19.254.2" in argv and "Port=2222" in argv
    assert argv[argv.index("-i") + 1] == "/k/id" and argv[-1] == "ovs-vsctl list-br"
    proxy = hv.proxy()
    assert proxy[-3:] == ("-W", "[%h]:%p", "admin@198.19.254.2") and "/k/id" in proxy
    assert not any(o.startswith("ControlPath") for o in proxy)
    assert "-i" not in Hypervisor.of("qemu+ssh://h.example.org/system").ssh(Path("/tmp/m")).argv(["true"])


def test_bridge_names_fit_ifnamsiz_and_carry_the_run():
    for kind in ("ovs", "linuxbridge"):
        tb = loads(f"vswitch: {kind}\nnetwork: {{type: flat}}\nhosts: [{{name: k}}]\n"
                   "vnets: [{name: a, cidr: 198.19.1.0/24}, {name: b, cidr: 198.19.2.0/24}]\n"
                   "pairs: [{name: pa, placement: same-host, vnet: a}, {name: pb, placement: same-host, vnet: b}]\n",
                   source="<t>", online_cpus=[0, 1])
        names = bridge_names("abc123", tb)
        every = [n for n, _ in names["linux"]] + ([names["ovs"]] if names["ovs"] else [])
        assert all(len(n) <= 15 and "abc123" in n for n in every)
        assert len(set(every)) == len(every)
        assert (names["ovs"] is None) == (kind == "linuxbridge")
        assert len(names["linux"]) == (3 if kind == "linuxbridge" else 1)     # + management


def test_nics_libvirt_plugs_itself():
    ovs = ET.fromstring(dom.nic_xml("vtx-0-0", "fa:16:3e:00:00:01", dom.Plug("vnbabc", ovs=True, vlan=2)))
    assert ovs.get("type") == "bridge" and ovs.find("source").get("bridge") == "vnbabc"
    assert ovs.find("virtualport").get("type") == "openvswitch"
    assert ovs.find("vlan/tag").get("id") == "2" and ovs.find("target").get("dev") == "vtx-0-0"
    lb = ET.fromstring(dom.nic_xml("vtx-0-1", "fa:16:3e:00:00:02", dom.Plug("vnbabcv0")))
    assert lb.find("virtualport") is None and lb.find("vlan") is None
    eth = ET.fromstring(dom.nic_xml("vtx-0-2", "fa:16:3e:00:00:03"))
    assert eth.get("type") == "ethernet" and eth.find("target").get("managed") == "no"
