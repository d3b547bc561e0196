"""Netlink helpers over pyroute2, used inside one namespace at a time."""

from __future__ import annotations

import pyroute2.config
from pyroute2 import NetNS

# Namespaces are entered by threads (nsops), never by pyroute2's forked children;
# should any pyroute2 path still fork, its child gets default signal handlers.
pyroute2.config.disable_mp_signal = True


def index(ns: NetNS, ifname: str) -> int:
    found = ns.link_lookup(ifname=ifname)
    if not found:
        raise LookupError(f"interface {ifname} not found")
    return found[0]


def veth(ns: NetNS, name: str, peer: str, peer_ns: str, mtu: int, alias: str) -> None:
    """A veth pair whose ends are born in their namespaces: nothing touches the root one."""
    ns.link("add", ifname=name, kind="veth", mtu=mtu,
            peer={"ifname": peer, "net_ns_fd": peer_ns, "mtu": mtu})
    stamp(ns, name, alias)


def stamp(ns: NetNS, ifname: str, alias: str) -> None:
    ns.link("set", index=index(ns, ifname), ifalias=alias)


def up(ns: NetNS, ifname: str, master: str | None = None, mtu: int | None = None) -> None:
    attrs = {"state": "up"}
    if master:
        attrs["master"] = index(ns, master)
    if mtu:
        attrs["mtu"] = mtu
    ns.link("set", index=index(ns, ifname), **attrs)


def bridge(ns: NetNS, name: str, mtu: int, alias: str) -> None:
    ns.link("add", ifname=name, kind="bridge", mtu=mtu, br_stp_state=0, br_forward_delay=0)
    stamp(ns, name, alias)
    up(ns, name)


def address(ns: NetNS, ifname: str, ip, prefixlen: int) -> None:
    ns.addr("add", index=index(ns, ifname), address=str(ip), prefixlen=prefixlen)


def ifb(ns: NetNS, name: str, alias: str) -> None:
    ns.link("add", ifname=name, kind="ifb")
    stamp(ns, name, alias)
    up(ns, name)


def redirect_ingress(ns: NetNS, ifname: str, to: str) -> None:
    """Everything arriving on ``ifname`` goes through ``to``'s egress qdiscs first (an
    ingress qdisc, a match-all u32 filter, mirred redirect): how a shaper reaches traffic
    a port receives, without tc police."""
    idx = index(ns, ifname)
    ns.tc("add", "ingress", idx, "ffff:")
    ns.tc("add-filter", "u32", idx, parent="ffff:", protocol=0x0003, prio=1, target=0x10001,
          keys=["0x0/0x0+0"], action={"kind": "mirred", "direction": "egress",
                                      "action": "redirect", "ifindex": index(ns, to)})


def shape(ns: NetNS, ifname: str, kbps: int, burst_kbits: int, latency_ms: int = 50) -> None:
    """A TBF root qdisc: what leaves ``ifname`` is held to ``kbps`` (bucket ``burst_kbits``)."""
    ns.tc("add", "tbf", index(ns, ifname), handle="1:", rate=f"{kbps}kbit",
          burst=burst_kbits * 1000 // 8, latency=f"{latency_ms}ms")
