"""The test command's two lanes of integration tests, run at the same time.

The integration suite mostly waits: on protocol timers (idle time-outs, controller
back-offs, ARP), on fixed-length measurements and on guests booting; a clean-clone run
left 80 % of this machine's two CPUs idle. So ``make test`` runs it as two pytest
sessions at once, each of them one test at a time:

- ``netns``: the embedded testbed's tests (network namespaces only);
- ``guests``: everything that boots QEMU guests or talks to the machine's libvirtd (the
  libvirt backend, the guest image, the all-in-one cloud), and the module guard's own
  test (its inner suite watches every link and namespace of the machine). The functional
  matrix (``vnetbench functional --quick``) runs in this lane before its pytest session.

The lanes share nothing a test changes: each has its pytest ``--basetemp`` and its
default state root (``VNETBENCH_STATE_DIR``), so a ``cleanup`` of one never sees the
other's runs; libvirtd and the cloud are the guests lane's alone. Each lane's module
guard (leaks.ModuleGuard) counts only its own runs' objects (``owned_run_ids``).

``VNETBENCH_TEST_LANE`` (netns or guests) selects a lane; unset, a session runs every test
and its guard watches the whole machine, as before.
"""

from __future__ import annotations

import os
from pathlib import Path

from vnetbench.state import RUN_ID_RE

ENV = "VNETBENCH_TEST_LANE"
LANES = ("netns", "guests")
HERE = Path(__file__).resolve().parent
GUEST_MODULES = frozenset({"test_libvirt_backend.py", "test_libvirt_remote.py",
                           "test_functional_libvirt.py", "test_guest_image.py",
                           "test_module_guard.py"})


def selected() -> str | None:
    """The lane this session runs (None: every test); a wrong value is a usage error."""
    lane = os.environ.get(ENV) or None
    if lane is not None and lane not in LANES:
        raise ValueError(f"{ENV}={lane!r}: expected one of {', '.join(LANES)} (or unset: every test)")
    return lane


def lane_of(path: Path) -> str:
    path = Path(path)
    if HERE / "openstack" in path.parents or path.name in GUEST_MODULES:
        return "guests"
    return "netns"


def owned_run_ids(roots, depth: int = 4) -> set[str]:
    """Run ids whose run directory (``<id>/journal.jsonl``) lies under one of ROOTS (the
    session's temp tree, its default state root), at most DEPTH levels down: the runs
    this session's tests made, and the session AIO's (its registration, in a state root
    of its own in the temp tree: openstack/conftest.aio_cloud)."""
    found = set()
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            continue
        top = len(base.parts)
        for d, subdirs, files in os.walk(base):
            level = len(Path(d).parts) - top
            if RUN_ID_RE.match(Path(d).name) and "journal.jsonl" in files:
                found.add(Path(d).name)
                subdirs[:] = []
            elif level >= depth:
                subdirs[:] = []
    return found
