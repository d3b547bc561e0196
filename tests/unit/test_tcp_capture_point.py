"""Where tcp_stream reads the MSS on the wire: the host side of the sender's port when
the backend has one, else (a cloud's compute nodes are not ours) the sender's own NIC."""

from types import SimpleNamespace

from vnetbench.battery import tcp
from vnetbench.errors import UnsupportedError


class _Dep:
    def __init__(self, port=None):
        self.port = port
        self.testbed = SimpleNamespace(external_host=lambda name: SimpleNamespace(name=name)
                                       if name == "outside" else None)

    def vm_port(self, vm, nic=0):
        if self.port is None:
            raise UnsupportedError("openstack: no host-side port")
        return self.port


def test_host_side_port_when_the_backend_has_one():
    assert tcp._capture_point(_Dep(("h1", "vnb1-h1-0")), "a") == ("h1", "vnb1-h1-0", "host port")


def test_the_guests_nic_where_the_hosts_are_not_ours():
    assert tcp._capture_point(_Dep(), "a") == (None, "eth0", "guest eth0")


def test_an_external_hosts_own_nic():
    """The sender of a floating-ip pair is outside the cloud: its own NIC is the wire."""
    assert tcp._capture_point(_Dep(("h1", "vnb1-h1-0")), "outside") == (None, "eth0", "external host eth0")
