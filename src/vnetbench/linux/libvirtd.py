"""This machine's libvirt daemon: a connection to it, started where no systemd starts it.
Shared by the libvirt backend and the all-in-one cloud (its compute nodes' libvirtd)."""

from __future__ import annotations

import os
import subprocess
import time

from vnetbench.errors import PrerequisiteError

URI = "qemu:///system"


def connect(uri: str = URI):
    """A libvirt connection. Where no systemd starts libvirtd (this machine class), root
    starts virtlogd and libvirtd once: system services, not objects of a run."""
    try:
        import libvirt
    except ImportError:
        raise PrerequisiteError("libvirt-python is not installed; run 'make install'") from None
    libvirt.registerErrorHandler(lambda ctx, err: None, None)   # errors arrive as exceptions
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        first = str(exc).splitlines()[0]
    if uri == URI and os.geteuid() == 0 and not os.path.isdir("/run/systemd/system"):
        for daemon in ("virtlogd", "libvirtd"):
            subprocess.run([daemon, "-d"], capture_output=True, timeout=30)
        for _ in range(50):
            try:
                return libvirt.open(uri)
            except libvirt.libvirtError:
                time.sleep(0.1)
    raise PrerequisiteError(f"libvirt at {uri}: {first}; start the daemons (without systemd: "
                            "'virtlogd -d; libvirtd -d')")
