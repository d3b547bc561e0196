"""What this machine can build: probed, never assumed.

Kernel link kinds are probed in a throwaway, unnamed network namespace owned by
a forked child: it vanishes with the child, so probing can leave nothing behind.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from vnetbench import kinds
from vnetbench.errors import PrerequisiteError, UnsupportedError
from vnetbench.testbed.model import ROUTER, NetType, Testbed, VSwitchKind

CLONE_NEWNET = 0x40000000
AF_XDP = 44          # socket.AF_XDP is not in Python's socket module

# program -> Debian package that ships it
PACKAGES = {
    "ip": "iproute2", "taskset": "util-linux", "ping": "iputils-ping",
    "ethtool": "ethtool", "ovs-vswitchd": "openvswitch-switch",
    "ovsdb-server": "openvswitch-switch", "ovsdb-tool": "openvswitch-switch",
    "ovs-vsctl": "openvswitch-switch", "ovs-appctl": "openvswitch-common",
    "ovn-northd": "ovn-central", "ovn-controller": "ovn-host", "ovn-nbctl": "ovn-common",
}
# link kind probed -> (what it is, kernel option)
LINK_KINDS = {
    "veth": ("veth pairs", "CONFIG_VETH"),
    "bridge": ("Linux bridges", "CONFIG_BRIDGE"),
    "bridge-vlan-filtering": ("bridge VLAN filtering", "CONFIG_BRIDGE_VLAN_FILTERING"),
    "vlan": ("802.1q VLAN devices", "CONFIG_VLAN_8021Q"),
    "vxlan": ("VXLAN devices", "CONFIG_VXLAN"),
    "gretap": ("gretap devices", "CONFIG_NET_IPGRE"),
    "geneve": ("Geneve devices", "CONFIG_GENEVE"),
    "ifb": ("IFB devices", "CONFIG_IFB"),
}


@dataclass(frozen=True)
class Capabilities:
    root: bool
    binaries: dict          # program -> path or None
    links: dict             # link kind -> None when supported, else the kernel's error
    ovs_kernel: bool        # the openvswitch kernel datapath is present
    ovs_version: str | None
    xdp_sockets: bool = False   # AF_XDP sockets (OVS ``type=afxdp`` ports) can be opened

    @cached_property
    def ovs_datapath(self) -> str:
        return "system" if self.ovs_kernel else "netdev"

    def missing_programs(self, kind) -> list[str]:
        return [p for p in kinds.get(kind).programs if not self.binaries.get(p)]

    def link_missing(self, link: str) -> str:
        what, option = LINK_KINDS[link]
        return f"kernel lacks {what} ({option}): {self.links[link]}"

    def why_not(self, kind, ntype: NetType, datapath="auto") -> str | None:
        """None when the combination can be built here, else the missing feature: programs
        and veth/bridge support for every kind, then what the kind itself needs."""
        missing = self.missing_programs(kind)
        if missing:
            return (f"{missing[0]} not found on PATH (Debian package "
                    f"{PACKAGES[missing[0]]}; 'make install' installs it)")
        for link in ("veth", "bridge"):
            if self.links.get(link):
                return self.link_missing(link)
        return kinds.get(kind).why_not(self, NetType(ntype), datapath)

    def require(self, testbed: Testbed) -> None:
        """Refuse, in one line, what cannot be built here."""
        if not self.root:
            raise PrerequisiteError("building a testbed needs root (CAP_NET_ADMIN and "
                                    "CAP_SYS_ADMIN for namespaces); run it as root or with sudo")
        reason = self.why_not(testbed.vswitch.kind, testbed.network.type, testbed.vswitch.datapath) \
            or self.why_not_egress(testbed) or self.why_not_security_groups(testbed) \
            or self.why_not_ports(testbed) or self.why_not_routers(testbed)
        if reason:
            raise UnsupportedError(f"{testbed.source}: {testbed.vswitch.kind} + "
                                   f"{testbed.network.type} cannot run here: {reason}")

    def why_not_egress(self, testbed: Testbed) -> str | None:
        """An egress bandwidth limit (from the VM) where this kind or kernel cannot shape it."""
        if not any(n.qos and n.qos.egress for vm in testbed.vms for n in vm.nics):
            return None
        return kinds.of(testbed).why_not_egress(self)

    def why_not_ports(self, testbed: Testbed) -> str | None:
        """AF_XDP ports asked for on a kernel without XDP sockets."""
        if testbed.vswitch.ports == "afxdp" and not self.xdp_sockets:
            return ("OVS 'afxdp' ports need AF_XDP sockets (CONFIG_XDP_SOCKETS), which this "
                    "kernel lacks; use 'ports: afpacket' or 'auto'")
        return None

    def why_not_routers(self, testbed: Testbed) -> str | None:
        """Routers, an external network or floating IPs where this kind does not route yet."""
        if not (testbed.routers or testbed.external):
            return None
        kind = kinds.of(testbed)
        own = [r for r in testbed.routers if r.routing == ROUTER]
        if not kind.routers and (own or testbed.external):
            return kind.no_routers or f"{kind.name} does not realise routers on the embedded testbed yet"
        north_south = testbed.external or testbed.floating_ips or any(r.gateway for r in own)
        why = kind.why_not_north_south(testbed) if north_south else None
        if why:
            return why
        for r in testbed.routers:
            why = kind.why_not_switch_routing(self, r.routing) if r.routing != ROUTER else None
            if why:
                where = ", ".join(f"{k.name} ({', '.join(k.switch_routing)})" for k in kinds.all_kinds()
                                  if k.switch_routing)
                return f"router {r.name!r}: {why} (realised on {where})"
        return None

    def why_not_security_groups(self, testbed: Testbed) -> str | None:
        """Filtered ports where this kind cannot enforce security groups."""
        if not testbed.port_security:
            return None
        return kinds.of(testbed).why_not_security_groups(self)

    def matrix(self):
        """(vswitch, network type, reason-or-None) for every combination."""
        return [(k, t, self.why_not(k, t)) for k in VSwitchKind for t in NetType]

    def to_dict(self) -> dict:
        return {"root": self.root, "binaries": self.binaries, "links": self.links,
                "ovs_kernel_datapath": self.ovs_kernel, "ovs_version": self.ovs_version,
                "matrix": [{"vswitch": k.value, "network": t.value, "supported": r is None,
                            "reason": r} for k, t, r in self.matrix()]}


def probe() -> Capabilities:
    root = os.geteuid() == 0
    binaries = {p: shutil.which(p) for p in PACKAGES}
    kernel = _kernel_facts() if root else {
        "links": {k: "not probed: needs root" for k in LINK_KINDS}, "ovs_kernel": False}
    return Capabilities(root=root, binaries=binaries, links=kernel["links"],
                        ovs_kernel=kernel["ovs_kernel"], ovs_version=_ovs_version(binaries),
                        xdp_sockets=kernel.get("xdp_sockets", False))


def _ovs_version(binaries):
    if not binaries.get("ovs-vswitchd"):
        return None
    out = subprocess.run([binaries["ovs-vswitchd"], "--version"], capture_output=True, text=True)
    return out.stdout.split()[-1] if out.returncode == 0 and out.stdout else None


def _kernel_facts() -> dict:
    """Kernel features change only with a reboot or a module load: cache per both."""
    key = hashlib.sha256(FACTS_VERSION + _read("/proc/sys/kernel/random/boot_id")
                         + _read("/proc/modules")).hexdigest()[:16]
    cache = Path(os.environ.get("VNETBENCH_CACHE_DIR", "/run/vnetbench-cache")) / f"kernel-{key}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, json.JSONDecodeError):
        pass
    facts = _probe_kernel()
    if not any(str(v).startswith("probe failed") for v in facts["links"].values()):
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(facts))
            os.replace(tmp, cache)
        except OSError:
            pass
    return facts


#: what a cached probe holds; a new fact changes it, so an older cache is not read as "absent"
FACTS_VERSION = b"2: links, ovs_kernel, xdp_sockets"


def _read(path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def _probe_kernel() -> dict:
    """Probe in a fresh interpreter (forking a threaded process can deadlock) that
    moves itself into a new unnamed netns, tries each link kind and reports JSON."""
    done = subprocess.run([sys.executable, "-m", "vnetbench.testbed.capabilities"],
                          capture_output=True, text=True, timeout=30)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"links": {k: f"probe failed: {detail}" for k in LINK_KINDS}, "ovs_kernel": False}


def _probe_in_fresh_netns() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = os.strerror(ctypes.get_errno())
        return {"links": {k: f"unshare failed: {err}" for k in LINK_KINDS}, "ovs_kernel": False}
    from pyroute2 import IPRoute
    specs = {
        "veth": {"kind": "veth", "peer": "p1"},
        "bridge": {"kind": "bridge"},
        "bridge-vlan-filtering": {"kind": "bridge", "br_vlan_filtering": 1},
        "vlan": {"kind": "vlan", "link": None, "vlan_id": 10},
        "vxlan": {"kind": "vxlan", "vxlan_id": 10, "vxlan_port": 4789},
        "gretap": {"kind": "gretap", "gre_local": "198.18.0.1", "gre_remote": "198.18.0.2"},
        "geneve": {"kind": "geneve", "geneve_id": 10, "geneve_remote": "198.18.0.2"},
        "ifb": {"kind": "ifb"},
    }
    links = {}
    with IPRoute() as ipr:
        for kind, spec in specs.items():   # veth first: it is the lower device of vlan
            if kind == "vlan" and links["veth"] is None:
                spec = {**spec, "link": ipr.link_lookup(ifname="pveth")[0]}
            try:
                ipr.link("add", ifname=f"p{kind[:12]}", **spec)
                links[kind] = None
            except Exception as exc:
                links[kind] = _reason(exc)
    return {"links": links, "ovs_kernel": _ovs_genl_family(), "xdp_sockets": _xdp_sockets()}


def _xdp_sockets() -> bool:
    """An AF_XDP socket opens (CONFIG_XDP_SOCKETS): OVS's ``afxdp`` ports need it."""
    try:
        socket.socket(AF_XDP, socket.SOCK_RAW, 0).close()
        return True
    except OSError:
        return False


def _reason(exc) -> str:
    if len(exc.args) == 2 and isinstance(exc.args[0], int):   # NetlinkError(code, text)
        return str(exc.args[1])
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]


def _ovs_genl_family() -> bool:
    from pyroute2.netlink.generic import GenericNetlinkSocket
    sock = GenericNetlinkSocket()
    try:
        sock.bind("ovs_datapath", None)
        return True
    except Exception:
        return False
    finally:
        sock.close()


if __name__ == "__main__":
    print(json.dumps(_probe_in_fresh_netns()))
