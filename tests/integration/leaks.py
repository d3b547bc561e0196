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


def leftovers(run_id: str, run_dir: Path) -> dict:
    left = {"namespaces": namespaces_of(run_id),
            "processes": processes_mentioning(str(run_dir)),
            "state": [str(run_dir)] if run_dir.exists() else []}
    return {k: v for k, v in left.items() if v}
