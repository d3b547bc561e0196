"""The libvirt backend's pure parts: names within IFNAMSIZ, the management address a
guest derives from its MAC, and the domain XML for every testbed shape."""

import ipaddress
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.loader import load

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def test_names_fit_ifnamsiz():
    n = dom.Names("abcdef")
    assert len(n.tap(999, 9)) <= 15 and len(n.mgmt_tap(999)) <= 15
    assert n.mgmt_ns.startswith("vnb-abcdef-") and n.domain("same-a") == "vnb-abcdef-same-a"


def test_link_local_is_the_eui64_of_the_mac():
    mac = dom.mgmt_mac("0a1b2c", 3)
    assert mac == "0a:0a:1b:2c:00:03"
    addr = ipaddress.IPv6Address(dom.link_local(mac))
    assert addr.is_link_local and str(addr) == "fe80::80a:1bff:fe2c:3"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_domain_xml_for_every_example(path):
    tb = load(path, online_cpus=list(range(64)))
    n = dom.Names("abc123")
    for vm_i, vm in enumerate(tb.vms):
        taps = tuple((n.tap(vm_i, k), nic.mac) for k, nic in enumerate(vm.nics))
        g = dom.Guest(name=n.domain(vm.name), run_id="abc123", vcpus=vm.cpus, memory_mib=256,
                      kernel="/i/vmlinuz", initrd="/i/initrd.img", cmdline="console=ttyS0 a=<b&c>",
                      nics=(*taps, (n.mgmt_tap(vm_i), dom.mgmt_mac("abc123", vm_i))),
                      console="/r/console.log")
        xml = dom.domain_xml(g)
        root = ET.fromstring(xml)
        assert root.get("type") == "qemu" and root.findtext("name") == n.domain(vm.name)
        assert dom.run_of(xml) == "abc123"
        assert dom.pinning(xml) == {i: str(c) for i, c in enumerate(vm.cpus)}
        assert root.find("./cputune/emulatorpin").get("cpuset") == ",".join(map(str, vm.cpus))
        assert int(root.findtext("vcpu")) == len(vm.cpus)
        ifaces = root.findall("./devices/interface")
        assert [(i.find("target").get("dev"), i.find("mac").get("address")) for i in ifaces] == list(g.nics)
        assert all(i.get("type") == "ethernet" and i.find("target").get("managed") == "no" for i in ifaces)
        assert root.findtext("./os/cmdline") == "console=ttyS0 a=<b&c>"       # escaped, round-trips
        # a clock finer than jiffies for the guest (its RTTs): ACPI PM timer and HPET
        assert root.find("./features/acpi") is not None
        assert root.find("./clock/timer[@name='hpet']").get("present") == "yes"


def test_a_foreign_domain_has_no_run():
    assert dom.run_of("<domain type='kvm'><name>prod-db</name></domain>") is None


def test_a_libvirt_uri_per_host():
    from vnetbench.errors import VnetbenchError
    from vnetbench.testbed.libvirt.builder import host_uris
    tb = load(EXAMPLES[0], online_cpus=[0, 1])
    hosts = [h.name for h in tb.hosts]
    assert host_uris(tb, None) == dict.fromkeys(hosts, "qemu:///system")
    ssh = "qemu+ssh://root@localhost/system"
    assert host_uris(tb, ssh) == dict.fromkeys(hosts, ssh)
    assert host_uris(tb, {hosts[-1]: ssh})[hosts[-1]] == ssh
    assert host_uris(tb, {hosts[-1]: ssh})[hosts[0]] == "qemu:///system" or len(hosts) == 1
    with pytest.raises(VnetbenchError, match="host 'nohost': the testbed has no such host"):
        host_uris(tb, {"nohost": ssh})


def test_cli_libvirt_uri_forms():
    from vnetbench.cli import libvirt_uris
    from vnetbench.errors import VnetbenchError
    one = "qemu+ssh://root@localhost:2222/system?keyfile=/k&no_verify=1"
    assert libvirt_uris(None) is None and libvirt_uris([one]) == one
    assert libvirt_uris([f"h2={one}", "h1=qemu:///system"]) == {"h2": one, "h1": "qemu:///system"}
    with pytest.raises(VnetbenchError, match="write each as HOST=URI"):
        libvirt_uris([one, one])
