"""What QEMU said, for the errors of whatever starts it (the image lab, the libvirt
backend): QEMU reports why it could not start only on its stderr (before it detaches) or,
under libvirt, in libvirt's per-domain log; a guest that boots but never gets ready says
why on its serial console. An error that carries none of these leaves its reader nothing
to go on (issue 21: a CI run saw only 'exit status 1')."""

from __future__ import annotations

import subprocess
from pathlib import Path

LIBVIRT_LOGS = Path("/var/log/libvirt/qemu")    # libvirtd's <domain>.log: QEMU's stderr


class QemuError(RuntimeError):
    """QEMU did not start; the message carries its own words."""


def tail(text: str, lines: int = 12) -> str:
    """The last LINES non-empty lines of TEXT on one line, ' | ' between them."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


def tail_file(path: Path, lines: int = 12) -> str:
    try:
        return tail(path.read_text(errors="replace"), lines) or "empty"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def libvirt_log(domain: str, lines: int = 12) -> str:
    """The end of libvirtd's log of DOMAIN: the QEMU command line it ran and QEMU's stderr."""
    return tail_file(LIBVIRT_LOGS / f"{domain}.log", lines)


def start_daemonized(ns: str, argv: list[str], console: Path) -> None:
    """Run ARGV (a QEMU with -daemonize) in namespace NS. A failure raises with QEMU's
    stderr and the console's last lines, not just an exit status."""
    p = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True)
    if p.returncode:
        raise QemuError(f"QEMU exited {p.returncode} at start in namespace {ns}: "
                        f"{tail(p.stderr) or 'nothing on stderr'}; console {console}: "
                        f"{tail_file(console)}; command: {' '.join(argv)}")
