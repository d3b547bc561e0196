"""The all-in-one cloud's compute nodes as the tests see them (aio up --computes N): its
layout from the state dir, what of it is left on this machine after `down`, and the
VNIs of a VXLAN capture."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from vnetbench.aio import conf
from vnetbench.aio.conf import Layout
from vnetbench.aio.rootexec import RootExec

VNI = re.compile(r"VXLAN, flags \[I\] \(0x08\), vni (\d+)")


def layout_of(clouds_yaml: Path) -> Layout:
    """The running AIO's Layout, from the meta.json beside its clouds.yaml."""
    meta = json.loads((clouds_yaml.parent / "meta.json").read_text())
    return Layout(clouds_yaml.parent, meta["run_id"], meta["port_base"], meta["cidr"],
                  host=meta["host"], cpus=meta["cpus"], shared_cpus=meta["shared_cpus"],
                  ovs_kpps=meta.get("ovs_kpps"), computes=int(meta.get("computes", 1)),
                  release=meta.get("release", "zed"), ml2=meta.get("ml2", "ovs"))


def root_of(clouds_yaml: Path) -> RootExec:
    """What runs a program of the AIO's release (its root's OVN tools, for one)."""
    meta = json.loads((clouds_yaml.parent / "meta.json").read_text())
    root = meta.get("root")
    return RootExec(Path(root) if root else None, clouds_yaml.parent, clouds_yaml.parent / "etc" / "hosts")


def network_types(lay: Layout) -> tuple[str, ...]:
    """The network types the AIO's mechanism driver offers (conf.ml2 / conf.ml2_ovn)."""
    return conf.OVN_NETWORK_TYPES if lay.ml2 == "ovn" else conf.NETWORK_TYPES


def kind_of(clouds_yaml: Path) -> str:
    """The vSwitch kind of the AIO's mechanism driver: what a testbed on it declares (the
    openstack backend refuses another: its records would name the wrong vSwitch)."""
    return "ovn" if layout_of(clouds_yaml).ml2 == "ovn" else "ovs"


def tenant_type(lay: Layout) -> str:
    """The tunnel type of the AIO's tenant networks: ML2/OVN's Geneve, ML2/OVS's VXLAN."""
    return "geneve" if lay.ml2 == "ovn" else "vxlan"


def skip_unless_offered(lay: Layout, ntype: str) -> None:
    if ntype not in network_types(lay):
        pytest.skip(f"ML2/OVN offers no {ntype} networks (its tenant tunnels are Geneve; "
                    f"OVN's VXLAN serves only its gateways and VTEPs, GRE not at all)")


def ovn_tunnel_key(clouds_yaml: Path, lay: Layout, network_id: str) -> int:
    """The tunnel key OVN gave Neutron's network (its SB Datapath_Binding): what a Geneve
    packet of it carries as its VNI (Neutron's segmentation id is not on the wire)."""
    out = subprocess.run(root_of(clouds_yaml)([
        "ovn-sbctl", f"--db={lay.ovn_db('sb')}", "--bare", "--columns=tunnel_key", "find",
        "Datapath_Binding", f"external_ids:name=neutron-{network_id}"]),
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip().isdigit(), out.stdout + out.stderr
    return int(out.stdout)


def leftovers(lay: Layout) -> list[str]:
    """What of LAY is still on this machine: its namespaces, links (root namespace: the
    nodes' veths, the bridges' taps, its outside link), processes carrying its marker
    or running in a node's namespace, domains of its libvirtds. Empty after `aio down`."""
    from vnetbench.aio.procs import marked
    left = []
    names = [lay.outside_netns, *(n.netns for n in lay.nodes[1:])]
    left += [f"netns {n}" for n in names if Path("/run/netns", n).exists()]
    owned = {lay.outside_link, *(getattr(n, b) for n in lay.nodes
                                 for b in ("br_int", "br_tun", "br_phys", "br_underlay")),
             *(n.link(k) for n in lay.nodes[1:] for k in "mup")}
    left += [f"link {n}" for n in sorted(owned) if Path("/sys/class/net", n).exists()]
    left += [f"process {pid}" for pid in marked(str(lay.state))]
    for node in lay.nodes[1:]:
        left += [f"{p} of node {node.name}" for p in ("libvirt-sock",)
                 if (node.libvirt_sock_dir / p).exists()]
    left += [f"dir {d}" for d in ("nodes", "sockets", "ovs", "ovn", "data") if (lay.state / d).exists()]
    left += _domains(lay.instance_prefix)
    return left


def _domains(prefix: str) -> list[str]:
    """Processes of QEMU whose guest name carries the AIO's prefix (read from
    /proc, signalled by nobody: a leak is reported, not cleaned)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"qemu-system-x86_64") and any(
                a.startswith(f"guest={prefix}".encode()) for a in cmd):
            out.append(f"qemu pid {d.name}")
    return out


def vnis(text: str) -> set[int]:
    """The VNIs of tcpdump's VXLAN lines."""
    return {int(v) for v in VNI.findall(text)}


def computes_wanted() -> str:
    """--computes of the session's AIO (VNETBENCH_AIO_COMPUTES, default 2: the seed's pairs
    are across two servers; 1 stays possible, and the modules then measure same-host)."""
    return os.environ.get("VNETBENCH_AIO_COMPUTES", "2")
