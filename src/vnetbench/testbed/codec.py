"""Testbed <-> plain JSON, so a run's state file can rebuild its Testbed."""

from __future__ import annotations

import dataclasses
import ipaddress

from vnetbench.testbed.model import (
    Host, Network, NetType, Nic, OpenFlow, Ovn, Pair, Qos, Testbed, Vm, Vnet, VRouter, VSwitch,
    VSwitchKind,
)


def to_dict(tb: Testbed) -> dict:
    def plain(x):
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, (int, float, bool)) or x is None:
            return x
        return str(x)
    return plain(dataclasses.asdict(tb))


def from_dict(d: dict) -> Testbed:
    net = d["network"]
    return Testbed(
        name=d["name"],
        vswitch=VSwitch(VSwitchKind(d["vswitch"]["kind"]), d["vswitch"]["datapath"],
                        openflow=_openflow(d["vswitch"].get("openflow")),
                        vrouter=_vrouter(d["vswitch"].get("vrouter")),
                        ovn=_ovn(d["vswitch"].get("ovn"))),
        network=Network(NetType(net["type"]), net["underlay_mtu"], net["tenant_mtu"],
                        ipaddress.IPv4Network(net["underlay_cidr"])),
        hosts=tuple(Host(h["name"], tuple(h["cpus"]), ipaddress.IPv4Address(h["underlay_ip"]))
                    for h in d["hosts"]),
        vnets=tuple(Vnet(v["name"], ipaddress.IPv4Network(v["cidr"]), v["segmentation_id"])
                    for v in d["vnets"]),
        vms=tuple(Vm(m["name"], m["host"], tuple(m["cpus"]),
                     tuple(Nic(n["vnet"], ipaddress.IPv4Address(n["ip"]), n["mac"],
                               Qos(**n["qos"]) if n.get("qos") else None)
                           for n in m["nics"]))
                  for m in d["vms"]),
        pairs=tuple(Pair(p["name"], p["placement"], p["vnet"], tuple(p["vms"]))
                    for p in d["pairs"]),
        source=d.get("source", "<state>"),
    )


def _openflow(d):
    if d is None:
        return None
    return OpenFlow(**d)


def _vrouter(d):
    return None if d is None else VRouter(**d)


def _ovn(d):
    return None if d is None else Ovn(**d)
