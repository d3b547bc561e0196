"""Netlink requests sent as one batch: compiled by pyroute2 (``IPBatch``), written on
one socket of the namespace they are for, every one acknowledged, the first error
raised naming its request.

Why: a request through pyroute2's ``IPRoute`` costs about 1 ms (its asyncio round trip),
and a name-to-index lookup is one more; a 1,024-VM testbed made 18,000 of them (12 s of
its bring-up, issue 24). The kernel runs every message of one write in order and acks
each, so a VM's namespace is set up in one write. Requests name devices by index where
the builder chose it (a VM's NICs: ``VM_NIC_INDEX`` + k) or by name (RTM_SETLINK takes
IFLA_IFNAME with index 0), so nothing is looked up.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading

from pyroute2.iproute.linux import IPBatch
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST
from pyroute2.netlink.rtnl import RTM_NEWADDR, RTM_NEWLINK, RTM_SETLINK
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import IFF_UP, ifinfmsg

from vnetbench.linux import nsops

NETLINK_ROUTE, SOL_NETLINK, NETLINK_CAP_ACK = 0, 270, 10
NLMSG_ERROR = 2
_HDR = struct.Struct("=IHHII")
CHUNK = 256                 # messages per write: their acks fit the default receive buffer
ACK_TIMEOUT_S = 10.0
#: a VM's k-th NIC is made with ifindex VM_NIC_INDEX + k in its own namespace (lo is 1)
VM_NIC_INDEX = 2

_lock = threading.Lock()
_compiler: IPBatch | None = None
_seq = 0                    # the sequence number of the last request _encoded made


def _encoded(msg, kind: int, flags: int = 0) -> bytes:
    """A pyroute2 message object as request KIND (acked), encoded by pyroute2 itself: the
    VMs' requests (thousands) take this path, ~4x cheaper than IPBatch's request layer."""
    msg["header"]["type"] = kind
    msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | flags
    with _lock:
        global _seq
        _seq = _seq % 0x7FFFFFFF + 1
        msg["header"]["sequence_number"] = _seq
    msg.encode()
    return bytes(msg.data)



def _compile(method: str, *args, **kwargs) -> bytes:
    """One request as pyroute2 encodes it (no socket I/O: IPBatch only compiles)."""
    global _compiler
    with _lock:
        if _compiler is None:
            _compiler = IPBatch()
        _compiler.reset()
        getattr(_compiler, method)(*args, **kwargs)
        return bytes(_compiler.batch)


class Batch:
    """Requests for namespace ``ns``, in order; ``what`` names each in an error."""

    def __init__(self, ns: str):
        self.ns = ns
        self.requests: list[tuple[str, bytes]] = []

    def veth(self, what: str, index: int, ifname: str, mtu: int, mac: str, peer: str, peer_ns_fd: int) -> "Batch":
        """A veth IFNAME (ifindex INDEX, MAC, MTU, up) whose other end PEER is born in the
        namespace open at PEER_NS_FD."""
        msg = ifinfmsg()
        msg["index"], msg["flags"], msg["change"] = index, IFF_UP, IFF_UP
        peer_attrs = [("IFLA_IFNAME", peer), ("IFLA_MTU", mtu), ("IFLA_NET_NS_FD", peer_ns_fd)]
        msg["attrs"] = [("IFLA_IFNAME", ifname), ("IFLA_MTU", mtu), ("IFLA_ADDRESS", mac),
                        ("IFLA_LINKINFO", {"attrs": [
                            ("IFLA_INFO_KIND", "veth"),
                            ("IFLA_INFO_DATA", {"attrs": [("VETH_INFO_PEER", {"attrs": peer_attrs})]})]})]
        self.requests.append((what, _encoded(msg, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL)))
        return self

    def set(self, what: str, index: int = 0, ifname: str | None = None, up: bool | None = None,
            alias: str | None = None, master: int | None = None) -> "Batch":
        """Change a link named by INDEX, or by IFNAME with index 0 (no lookup)."""
        msg = ifinfmsg()
        msg["index"] = index
        if up is not None:
            msg["flags"], msg["change"] = IFF_UP if up else 0, IFF_UP
        attrs = [("IFLA_IFNAME", ifname)] if ifname else []
        attrs += [("IFLA_IFALIAS", alias)] if alias is not None else []
        attrs += [("IFLA_MASTER", master)] if master is not None else []
        msg["attrs"] = attrs
        self.requests.append((what, _encoded(msg, RTM_SETLINK)))
        return self

    def address(self, what: str, index: int, ip, prefixlen: int) -> "Batch":
        """IPv4 address IP/PREFIXLEN on link INDEX."""
        msg = ifaddrmsg()
        msg["index"], msg["family"], msg["prefixlen"] = index, socket.AF_INET, prefixlen
        msg["attrs"] = [("IFA_LOCAL", str(ip)), ("IFA_ADDRESS", str(ip))]
        self.requests.append((what, _encoded(msg, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL)))
        return self

    def link(self, what: str, *args, **kwargs) -> "Batch":
        self.requests.append((what, _compile("link", *args, **kwargs)))
        return self

    def fdb(self, what: str, *args, **kwargs) -> "Batch":
        self.requests.append((what, _compile("fdb", *args, **kwargs)))
        return self

    def send(self) -> None:
        """Write the batch from a thread inside ``ns``."""
        if self.requests:
            nsops.in_netns(self.ns, self.send_here)

    def send_here(self) -> None:
        """Write the batch on this thread's namespace (a thread that entered ``ns``)."""
        if not self.requests:
            return
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        try:
            sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
            sock.bind((0, 0))
            sock.settimeout(ACK_TIMEOUT_S)
            for i in range(0, len(self.requests), CHUNK):
                self._write(sock, self.requests[i:i + CHUNK])
        finally:
            sock.close()

    def _write(self, sock, chunk) -> None:
        """The kernel acks a write's requests one by one, in order: the i-th ack is the
        i-th request's (its sequence number must agree: pyroute2's counter wraps, so it
        cannot name the request alone)."""
        sock.send(b"".join(data for _, data in chunk))
        first = None
        for (what, data), (seq, err) in zip(chunk, _acks(sock, len(chunk))):
            if seq != _HDR.unpack_from(data)[3]:
                raise OSError(errno.EPROTO, f"in namespace {self.ns}: the ack of '{what}' carries "
                                            f"sequence number {seq}, not its own")
            if err and first is None:
                first = (what, err)
        if first:
            what, err = first
            raise OSError(-err, f"in namespace {self.ns}: {what}: {os.strerror(-err)}")


def _acks(sock, count: int):
    """(sequence number, error: 0 or -errno) of the next COUNT acks on SOCK."""
    got = 0
    while got < count:
        try:
            data = sock.recv(1 << 16)
        except socket.timeout:
            raise OSError(errno.ETIMEDOUT, f"netlink: {count - got} of {count} requests "
                                           f"unacknowledged after {ACK_TIMEOUT_S:.0f} s") from None
        off = 0
        while off + _HDR.size <= len(data):
            length, kind, _flags, seq, _pid = _HDR.unpack_from(data, off)
            if kind == NLMSG_ERROR:
                (err,) = struct.unpack_from("=i", data, off + _HDR.size)
                got += 1
                yield seq, err
            off += max((length + 3) & ~3, _HDR.size)
