"""What a run may have left behind, found by looking (never used to delete anything)."""

import os
from pathlib import Path

from pyroute2 import netns


def namespaces_of(run_id: str) -> list[str]:
    return [n for n in netns.listnetns() if n.startswith(f"vnb-{run_id}-")]


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmd:
                found.append(f"{entry.name}: {cmd[:120]}")
    return found


def decoys_touched(decoys) -> list[str]:
    """What cleanup did to the ``decoys`` fixture's namespace and bridges (should be nothing)."""
    from pyroute2 import IPRoute, NetNS
    ns_name, br_name = decoys
    if ns_name not in netns.listnetns():
        return ["cleanup removed a namespace it did not create"]
    touched = []
    with NetNS(ns_name, flags=0) as ns:
        if not ns.link_lookup(ifname=br_name):
            touched.append("cleanup touched a bridge inside a foreign namespace")
    with IPRoute() as ipr:
        if not ipr.link_lookup(ifname=br_name):
            touched.append("cleanup removed a root-namespace bridge it did not create")
    return touched


def leftovers(run_id: str, run_dir: Path) -> dict:
    left = {"namespaces": namespaces_of(run_id),
            "processes": processes_mentioning(str(run_dir)),
            "state": [str(run_dir)] if run_dir.exists() else []}
    return {k: v for k, v in left.items() if v}
