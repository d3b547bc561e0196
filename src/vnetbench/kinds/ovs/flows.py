"""OpenFlow dumps made comparable across deployments: the firewall flows Neutron's OVS
agent left on a real cloud's integration bridge (recorded on the all-in-one cloud,
tests/data/ovs-firewall/) against those the ``ovs`` kind's agent leaves on an emulated
host for the same security groups. What differs by deployment and not by rule -- counters,
cookies, OpenFlow port numbers, MAC and IP addresses, the network's conntrack zone and
local VLAN, conjunction ids -- is replaced by names."""

from __future__ import annotations

import ipaddress
import re

STATS = re.compile(r"\b(cookie|duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]+,?\s*")
TABLE = re.compile(r"\btable=(\d+)")
MAC = re.compile(r"\b(?:[0-9a-f]{2}:){5}[0-9a-f]{2}\b")
IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
IPV6_LL = re.compile(r"\bfe80::[0-9a-f:]+\b")
PORT = re.compile(r"(in_port=|output:|reg5=0x|load:0x)([0-9a-f]+)(->NXM_NX_REG5\[\])?")
ZONE = re.compile(r"(reg6=0x|load:0x)([0-9a-f]+)(->NXM_NX_REG6\[\])?")
VLAN = re.compile(r"(dl_vlan=|mod_vlan_vid:)(\d+)")
CT_ZONE = re.compile(r"\bct_zone=\d+")
OTHER_PORT = re.compile(r"(?:in_port=|output:|reg5=|load:)port\d+\b")
CONJ = re.compile(r"(conjunction\(|conj_id=|load:0x)([0-9a-f]+)(,\d/\d\)|->NXM_NX_REG7\[\])?")
#: the driver's tables (neutron.agent.linux.openflow_firewall.constants): base egress 71
#: to accepted/dropped 94; table 60 also holds the agent's own flows
FIREWALL_TABLES = range(71, 95)


def link_local(mac: str) -> str:
    """The IPv6 link-local address of MAC (EUI-64), as the driver writes it."""
    b = bytearray(int(x, 16) for x in mac.split(":"))
    b[0] ^= 0x02
    eui = bytes(b[:3]) + b"\xff\xfe" + bytes(b[3:])
    return str(ipaddress.IPv6Address(b"\xfe\x80" + b"\x00" * 6 + eui))


def names_of(ports: dict[str, dict]) -> dict[str, str]:
    """{token: name} for ``ports``: {vm: {"ofport": N, "mac": ..., "ip": ...}}."""
    out = {}
    for vm, p in ports.items():
        out[f"port:{p['ofport']}"] = vm
        out[p["mac"].lower()] = f"{vm}-mac"
        out[p["ip"]] = f"{vm}-ip"
        out[link_local(p["mac"])] = f"{vm}-ll"
    return out


def normalise(dump: str, names: dict[str, str], tables=FIREWALL_TABLES) -> list[str]:
    """The flows of ``tables`` in ``dump`` (ovs-ofctl dump-flows), counters dropped,
    ports/MACs/IPs named by ``names`` (``names_of``; a flow of any other port left out),
    the zone and local VLAN as ZONE and VLAN, conjunction ids numbered in order of
    appearance; sorted."""
    lines = []
    for raw in dump.splitlines():
        m = TABLE.search(raw)
        if not m or int(m.group(1)) not in tables:
            continue
        line = STATS.sub("", raw.strip())
        line = _ports(line, names)
        line = ZONE.sub(lambda z: f"{z.group(1).removesuffix('0x')}ZONE{z.group(3) or ''}"
                        if z.group(1) == "reg6=0x" or z.group(3) else z.group(0), line)
        if OTHER_PORT.search(line):
            continue                        # a port that is not one of ``names``' (another VM's)
        line = VLAN.sub(lambda v: f"{v.group(1)}VLAN", line)
        line = CT_ZONE.sub("ct_zone=ZONE", line)
        line = IPV6_LL.sub(lambda a: names.get(str(ipaddress.IPv6Address(a.group(0))), a.group(0)), line)
        line = MAC.sub(lambda a: names.get(a.group(0), a.group(0)), line)
        line = IPV4.sub(lambda a: names.get(a.group(0), a.group(0)), line)
        lines.append(line)
    return _conjunctions(sorted(lines))


def _ports(line: str, names: dict) -> str:
    def sub(m):
        if m.group(1) == "load:0x" and not m.group(3):
            return m.group(0)               # a load into another register
        n = int(m.group(2), 16) if m.group(1) in ("reg5=0x", "load:0x") else int(m.group(2))
        name = names.get(f"port:{n}", f"port{n}")
        return f"{m.group(1).removesuffix('0x')}{name}{m.group(3) or ''}"
    return PORT.sub(sub, line)


def _conjunctions(lines: list[str]) -> list[str]:
    """Conjunction ids (and the REG7 loads that carry them) renumbered by first use."""
    seen: dict[int, int] = {}

    def sub(m):
        if m.group(1) == "load:0x" and not m.group(3):
            return m.group(0)
        n = int(m.group(2), 16) if m.group(1) == "load:0x" else int(m.group(2))
        k = seen.setdefault(n, len(seen))
        prefix = "load:" if m.group(1) == "load:0x" else m.group(1)
        return f"{prefix}C{k}{m.group(3) or ''}"
    masked = sorted(lines, key=lambda s: CONJ.sub("C", s))
    return sorted(CONJ.sub(sub, s) for s in masked)
