"""Netlink batches (``nlbatch``) against the kernel: every request of a batch larger than
one write is made, an error names the request and the namespace, the builder's VM
namespaces come out as the per-request path made them, and offloads go off through the
ioctl exactly as ``ethtool -K`` turns them off."""

import os
import secrets
import subprocess

import pytest
from pyroute2 import netns

from vnetbench.linux import nlbatch, nsops, offloads


@pytest.fixture
def spaces():
    made = []

    def make(n=1):
        names = [f"vnb-{secrets.token_hex(3)}-nlb" for _ in range(n)]
        for name in names:
            nsops.create(name)
            made.append(name)
        return names
    yield make
    for name in made:
        netns.remove(name)


def _sh(ns, cmd) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", cmd], capture_output=True,
                          text=True, check=True).stdout


def test_a_batch_longer_than_one_write_makes_every_request(spaces):
    (ns,) = spaces()
    count = nlbatch.CHUNK + 7
    batch = nlbatch.Batch(ns)
    for i in range(count):
        batch.link(f"veth {i}", "add", ifname=f"v{i}", kind="veth", peer={"ifname": f"p{i}"})
    batch.send()
    assert len(_sh(ns, "ls /sys/class/net").split()) == 2 * count + 1


def test_an_error_names_its_request_and_namespace_and_the_rest_is_done(spaces):
    (ns,) = spaces()
    batch = (nlbatch.Batch(ns)
             .link("first bridge", "add", ifname="a1", kind="bridge")
             .link("the same name again", "add", ifname="a1", kind="bridge")
             .link("after the error", "add", ifname="a2", kind="bridge"))
    with pytest.raises(OSError) as err:
        batch.send()
    assert f"in namespace {ns}: the same name again: File exists" in str(err.value)
    assert set(_sh(ns, "ls /sys/class/net").split()) == {"lo", "a1", "a2"}


def test_a_vm_nic_made_from_inside_its_namespace(spaces):
    """The builder's way: the namespace is made and its NIC with it, on one thread; the
    NIC's ifindex, MAC, MTU, address and state are the batch's, the host end is born in the
    host's namespace."""
    (host,) = spaces()
    vm = f"vnb-{secrets.token_hex(3)}-nlb"
    fd = os.open(nsops.path(host), os.O_RDONLY)
    try:
        inside = (nlbatch.Batch(vm).set("lo up", index=1, up=True)
                  .veth("veth", nlbatch.VM_NIC_INDEX, "eth0", 1400, "02:00:00:00:00:09", "port0", fd)
                  .set("alias", index=nlbatch.VM_NIC_INDEX, alias="vnetbench test nic")
                  .address("address", nlbatch.VM_NIC_INDEX, "198.18.9.9", 24))
        nsops.create(vm, then=inside.send_here)
    finally:
        os.close(fd)
    try:
        nlbatch.Batch(host).set("port up", ifname="port0", up=True).send()
        link = _sh(vm, "ip -o link show eth0")
        assert link.startswith(f"{nlbatch.VM_NIC_INDEX}: eth0@") and "mtu 1400" in link and "02:00:00:00:00:09" in link
        assert "inet 198.18.9.9/24" in _sh(vm, "ip -o -4 addr show eth0")
        assert ",UP" in _sh(host, "ip -o link show port0")
        assert "UP" in _sh(vm, "ip -o link show lo")
        assert "alias vnetbench test nic" in _sh(vm, "ip -d link show eth0")
    finally:
        netns.remove(vm)


def test_offloads_off_as_ethtool_turns_them_off(spaces):
    a, b = spaces(2)
    fd = os.open(nsops.path(b), os.O_RDONLY)
    try:
        nlbatch.Batch(a).link("pair 1", "add", ifname="x1", kind="veth", peer={"ifname": "y1", "net_ns_fd": fd}) \
            .link("pair 2", "add", ifname="x2", kind="veth", peer={"ifname": "y2", "net_ns_fd": fd}).send()
    finally:
        os.close(fd)
    subprocess.run(["ip", "netns", "exec", a, "ethtool", "-K", "x1", "tx", "off", "txvlan", "off"], check=True,
                   capture_output=True)
    offloads.off(a, [("x2", ("tx", "txvlan"))])
    features = [_sh(a, f"ethtool -k {dev}").splitlines()[1:] for dev in ("x1", "x2")]
    assert features[0] == features[1]
    assert "tx-checksumming: off" in features[1] and "tx-vlan-offload: off" in features[1]
    with pytest.raises(OSError, match="offloads tx off on nosuch"):
        offloads.off(a, [("nosuch", ("tx",))])
