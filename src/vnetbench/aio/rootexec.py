"""The all-in-one cloud's programs from its release's root (Debian 13's packages for
Epoxy), on this machine's kernel, in its namespaces.

Why each command gets a mount namespace of its own (``unshare --mount``) around a chroot
rather than one for the whole cloud: a daemon keeps its pid through ``unshare``, ``sh``,
``chroot`` and ``env`` (each execs the next), so the AIO's journal holds the daemon
itself, and its mounts go with it however it ends -- nothing is left mounted to undo.
Inside, the root is bound onto itself (``ip netns exec`` remounts "/", which a plain
chroot refuses), with fresh proc and sysfs (sysfs of the network namespace it starts in:
an emulated node's links), the machine's /dev, /run (network namespaces, libvirtd's
socket), /tmp and /var/tmp, the AIO's state dir at its own path (every configuration
file, socket and database names it), and the AIO's hosts file. The cached root is read,
never written, but for the mount point of a state dir outside those directories.

What stays the machine's: MariaDB, RabbitMQ, libvirtd and QEMU (Nova 31 needs libvirt
>= 8.0 and QEMU >= 6.2; Debian 12 has 9.0 and 7.2), the kernel's tools (ip, ethtool) and
vnetbench's own helpers; everything OpenStack, OVS and OVN comes from the root.
"""

from __future__ import annotations

import sys
from pathlib import Path

# run as they are, from the machine (the argv's first word, as the AIO names it)
HOST_PROGRAMS = frozenset({
    "ip", "ethtool", "nsenter", "unshare", "sh", "cat", "virsh", "libvirtd", "virtlogd",
    "mariadb-install-db", "mariadbd", "mariadb", "epmd", "/usr/lib/rabbitmq/bin/rabbitmq-server"})
COVERED = ("/run/", "/tmp/", "/var/tmp/")        # bound whole: a state dir under one needs no mount point
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SETUP = ('set -eu; r=$1 s=$2 h=$3; shift 3; mount --bind "$r" "$r"; '
         'mount -t proc proc "$r/proc"; mount -t sysfs sysfs "$r/sys"; '
         'for d in dev run tmp var/tmp; do mount --rbind "/$d" "$r/$d"; done; '
         'case "$s/" in /run/*|/tmp/*|/var/tmp/*) ;; *) mkdir -p "$r$s"; mount --rbind "$s" "$r$s";; esac; '
         'mount --bind "$h" "$r/etc/hosts"; '
         'exec chroot "$r" /usr/bin/env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV '
         f'PATH={PATH} LC_ALL=C.UTF-8 "$@"')


class RootExec:
    """argv -> the argv that runs it from ROOT (None: the machine's own packages, Zed)."""

    def __init__(self, root: Path | None, state: Path, hosts_file: Path):
        self.root, self.state, self.hosts_file = root, state, hosts_file

    def __call__(self, argv) -> list[str]:
        argv = [str(a) for a in argv]
        if self.root is None or argv[0] in HOST_PROGRAMS or argv[0] == sys.executable:
            return argv
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", SETUP,
                "vnb-root", str(self.root), str(self.state), str(self.hosts_file), *argv]
