"""Keeps the VM taps of the all-in-one cloud's integration bridge up.

Why: the AIO runs OVS's userspace (netdev) datapath with plain taps (there is no OVS
kernel module here; a production netdev datapath uses vhost-user instead). os-vif adds
the VM's port to the bridge before libvirt creates the tap; libvirt then creates it and
sets it up while ovs-vswitchd, opening the new device, turns on IFF_PROMISC. Seen once in
a clean-clone test run: a new server's tap with PROMISC and without UP,
the guest's 12 frames dropped (libvirt's tx drops; its link 'up'), the server never
answering; setting the tap up was all it took. The likely cause is a read-modify-write
of the interface flags from a copy that predates libvirt's IFF_UP (ovs-vswitchd's
netdev-linux keeps such a cached copy); it was not reproduced on demand. This daemon does what libvirt
meant: a tap of a Neutron VM port on the bridge found without IFF_UP is set up, and
logged. It touches only ports of its bridge that carry Neutron's iface-id.

    python -m vnetbench.aio.tapkeeper --db unix:SOCK --bridge BR [--every 0.25]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

IFF_UP = 0x1
REFRESH_S = 2.0


def vm_ports(db: str, bridge: str) -> set[str]:
    """The bridge's ports that are Neutron VM ports (an iface-id); empty until it exists."""
    done = subprocess.run(["ovs-vsctl", f"--db={db}", "--timeout=5", "--format=csv", "--no-headings",
                           "--columns=name", "find", "Interface", "external_ids:iface-id!=[]"],
                          capture_output=True, text=True, timeout=10)
    names = {n.strip().strip('"') for n in done.stdout.splitlines() if n.strip()}
    ports = subprocess.run(["ovs-vsctl", f"--db={db}", "--timeout=5", "list-ports", bridge],
                           capture_output=True, text=True, timeout=10)
    return names & set(ports.stdout.split()) if ports.returncode == 0 else set()


def is_down(name: str, sysfs: Path = Path("/sys/class/net")) -> bool:
    """The link exists and is not administratively up."""
    try:
        return not int((sysfs / name / "flags").read_text().strip(), 16) & IFF_UP
    except (OSError, ValueError):
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--bridge", required=True)
    ap.add_argument("--every", type=float, default=0.25)
    a = ap.parse_args(argv)
    ports, refreshed = set(), 0.0
    while True:
        if time.monotonic() - refreshed > REFRESH_S:
            try:
                ports, refreshed = vm_ports(a.db, a.bridge), time.monotonic()
            except subprocess.TimeoutExpired:
                pass
        for name in sorted(ports):
            if is_down(name):
                done = subprocess.run(["ip", "link", "set", "dev", name, "up"], capture_output=True, text=True)
                print(f"tapkeeper: {name} found without IFF_UP (a VM port of {a.bridge}); "
                      f"set up: {'ok' if done.returncode == 0 else done.stderr.strip()}", flush=True)
        time.sleep(a.every)


if __name__ == "__main__":
    sys.exit(main())
