"""What a number depends on: kernel, vSwitch version and datapath, MTUs,
offloads, CPU pinning, tool versions. Collected from the live deployment."""

from __future__ import annotations

import platform
import shutil
import subprocess
import time
from pathlib import Path

from vnetbench import cpu
from vnetbench_collector import procfs

from vnetbench import __version__

TOOLS = {"iperf3": ["iperf3", "--version"], "ping": ["ping", "-V"],
         "ovs-vswitchd": ["ovs-vswitchd", "--version"], "tcpdump": ["tcpdump", "--version"]}


def tool_versions() -> dict:
    out = {}
    for name, argv in TOOLS.items():
        if not shutil.which(argv[0]):
            out[name] = None
            continue
        done = subprocess.run(argv, capture_output=True, text=True)
        text = (done.stdout or done.stderr).strip().splitlines()
        out[name] = text[0] if text else None
    return out


def offloads(deployment, vm: str, nic: str = "eth0") -> dict:
    """The offload features of a VM NIC that change what the datapath sees."""
    done = deployment.exec(vm, ["ethtool", "-k", nic])
    wanted = ("tx-checksumming", "rx-checksumming", "tcp-segmentation-offload",
              "generic-segmentation-offload", "generic-receive-offload")
    feats = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in wanted:
            feats[key.strip()] = value.split()[0] if value.split() else None
    return feats


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The first "model name" of /proc/cpuinfo (what a capacity figure was measured on)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        return None
    return None


def _firewall(tb) -> str:
    from vnetbench import kinds
    return (kinds.of(tb).firewall or "on") if tb.port_security else "off"


def collect(deployment, vms=()) -> dict:
    tb, meta = deployment.testbed, deployment.run.meta()
    return {
        "vnetbench": __version__,
        "backend": getattr(deployment, "backend", None),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),           # the runner's: the hosts' own on netns
        "vswitch": tb.vswitch.kind.value,
        "ovs_datapath": meta.get("ovs_datapath"),
        "ovs_ports": meta.get("ovs_ports"),      # afxdp | afpacket (userspace datapath only)
        "network": tb.network.type.value,
        "underlay_mtu": tb.network.underlay_mtu,
        "tenant_mtu": tb.network.tenant_mtu,
        # what filtered the ports: off (port security off everywhere) or the kind's firewall
        "security_groups": meta.get("security_groups") or _firewall(tb),
        "pinning": {"hosts": {h.name: list(h.cpus) for h in tb.hosts},
                    "vms": {v.name: list(v.cpus) for v in tb.vms}},
        "offloads": {vm: offloads(deployment, vm) for vm in vms},
        # False: task and softirq CPU time overlap (see vnetbench.cpu); None: unknown
        "irq_time_accounting": procfs.irq_time_accounting(Path("/proc")),
        "cpu": cpu.provenance(deployment),     # how cpu_pct was measured (docs/metrics.md)
        # a cloud's series, mechanism driver, and its nodes' OVS and OVN (not the runner's)
        **({"openstack": deployment.cloud_facts()} if hasattr(deployment, "cloud_facts") else {}),
        "tools": tool_versions(),
        "run_id": deployment.run_id,
        "collected": time.time(),
    }
