"""Testbed <-> plain JSON, so a run's state file can rebuild its Testbed."""

from __future__ import annotations

import dataclasses
import ipaddress

from vnetbench import kinds
from vnetbench.testbed.model import (
    ROUTER, External, ExternalHost, FloatingIp, Host, Network, NetType, Nic, Pair, Qos, Router, RouterPort,
    SecurityGroup, SgRule, Testbed, Vm, Vnet, VSwitch, VSwitchKind,
)

_ip = ipaddress.IPv4Address


def _opt_ip(text):
    return None if text is None else _ip(text)


def to_dict(tb: Testbed) -> dict:
    def plain(x):
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, (int, float, bool)) or x is None:
            return x
        return str(x)
    d = plain(dataclasses.asdict(tb))
    d["vswitch"] = _vswitch(d["vswitch"])
    return d


def _vswitch(d: dict) -> dict:
    """The kind's options under the kind's own key, as a testbed file writes them (every
    kind's key present, None but for this kind's: the state files' form)."""
    opts = d.pop("options")
    own = kinds.get(d["kind"]).options_key
    d.update({k.options_key: (opts if k.options_key == own else None)
              for k in kinds.all_kinds() if k.options_key})
    return d


def from_dict(d: dict) -> Testbed:
    net = d["network"]
    return Testbed(
        name=d["name"],
        vswitch=_from_vswitch(d["vswitch"]),
        network=Network(NetType(net["type"]), net["underlay_mtu"], net["tenant_mtu"],
                        ipaddress.IPv4Network(net["underlay_cidr"])),
        hosts=tuple(Host(h["name"], tuple(h["cpus"]), ipaddress.IPv4Address(h["underlay_ip"]),
                         h.get("light", False)) for h in d["hosts"]),
        vnets=tuple(Vnet(v["name"], ipaddress.IPv4Network(v["cidr"]), v["segmentation_id"])
                    for v in d["vnets"]),
        vms=tuple(Vm(m["name"], m["host"], tuple(m["cpus"]),
                     tuple(Nic(n["vnet"], ipaddress.IPv4Address(n["ip"]), n["mac"],
                               Qos(**n["qos"]) if n.get("qos") else None,
                               n.get("port_security", False), tuple(n.get("security_groups", ())))
                           for n in m["nics"]))
                  for m in d["vms"]),
        pairs=tuple(Pair(p["name"], p["placement"], p["vnet"], tuple(p["vms"]), p.get("path", "l2"),
                         p.get("peer_vnet")) for p in d["pairs"]),
        security_groups=tuple(SecurityGroup(g["name"], tuple(rule_from_dict(r) for r in g["rules"]))
                              for g in d.get("security_groups", ())),
        **_routing(d),
        source=d.get("source", "<state>"),
    )


def _routing(d: dict) -> dict:
    """Routers, external network, external hosts and floating IPs (absent from state
    files written before routers existed)."""
    ext = d.get("external")
    return {
        "routers": tuple(Router(r["name"], r["host"], tuple(RouterPort(p["vnet"], _ip(p["ip"]), p["mac"])
                                                          for p in r["ports"]),
                                _opt_ip(r["gateway"]), r["gateway_mac"], r["snat"], r.get("routing", ROUTER))
                         for r in d.get("routers", ())),
        "external": None if ext is None else External(ipaddress.IPv4Network(ext["cidr"]), _ip(ext["gateway"])),
        "external_hosts": tuple(ExternalHost(h["name"], _ip(h["ip"]), h["mac"])
                                for h in d.get("external_hosts", ())),
        "floating_ips": tuple(FloatingIp(f["vm"], f["vnet"], _ip(f["ip"])) for f in d.get("floating_ips", ())),
    }


def rule_from_dict(r: dict) -> SgRule:
    prefix = r.get("remote_ip_prefix")
    return SgRule(r["direction"], r.get("protocol"), r.get("port_range_min"), r.get("port_range_max"),
                  None if prefix is None else ipaddress.IPv4Network(prefix), r.get("remote_group"))


def rule_to_dict(r: SgRule) -> dict:
    """A rule as the state file (and the vRouter agent's configuration) write it."""
    d = dataclasses.asdict(r)
    d["remote_ip_prefix"] = None if r.remote_ip_prefix is None else str(r.remote_ip_prefix)
    return d


def _from_vswitch(d: dict) -> VSwitch:
    kind = kinds.get(d["kind"])
    raw = d.get(kind.options_key) if kind.options_key else None
    return VSwitch(VSwitchKind(d["kind"]), d["datapath"], d.get("ports", "auto"),
                   options=None if raw is None else kind.options(**raw))
