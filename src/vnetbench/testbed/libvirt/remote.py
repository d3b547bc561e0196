"""A remote hypervisor: the machine behind a ``qemu+ssh://`` URI, reached for its host-side
work (bridges, captures, files) over SSH with the URI's own user, port and key, as
libvirt reaches its libvirtd. A URI naming this machine (loopback) is not remote: its
guests use the embedded testbed's local vSwitches."""

from __future__ import annotations

import ipaddress
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from vnetbench.errors import VnetbenchError
from vnetbench.image.channel import Ssh

# Where a run keeps its files on a remote hypervisor (kernel, initrd, consoles)
REMOTE_ROOT = "/var/tmp"


def is_remote(uri: str) -> bool:
    """An SSH URI to another machine (not this one's loopback)."""
    parts = urlsplit(uri)
    if not parts.scheme.endswith("+ssh") or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return False
    try:
        return not ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return True                      # a host name: another machine


@dataclass(frozen=True)
class Hypervisor:
    uri: str
    user: str
    host: str
    port: int | None
    key: Path | None
    host_keys: Path | None         # known_hosts its key must be in (None: no_verify=1)

    @classmethod
    def of(cls, uri: str) -> "Hypervisor":
        """libvirt's own URI parameters: keyfile, known_hosts (default: the user's
        ~/.ssh/known_hosts, as ssh and libvirt use), no_verify=1 (no host key check)."""
        parts = urlsplit(uri)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        known = None if q.get("no_verify", "0") not in ("", "0") else \
            Path(q.get("known_hosts") or Path.home() / ".ssh" / "known_hosts")
        return cls(uri, parts.username or "root", parts.hostname, parts.port,
                   Path(q["keyfile"]) if q.get("keyfile") else None, known)

    def ssh(self, control_dir: Path) -> Ssh:
        return Ssh(self.host, self.key, control_dir, user=self.user, port=self.port,
                   host_keys=self.host_keys)

    def reach(self) -> None:
        """One command over SSH before anything is made there: an unknown or changed host
        key (or no access) fails here, in one line, with nothing to undo."""
        self.run(Path("/tmp"), "true", timeout_s=30)

    def proxy(self) -> tuple[str, ...]:
        """ProxyCommand argv through this host to a guest on one of its bridges."""
        opts = self.ssh(Path("/tmp")).key_options()
        return ("ssh", *opts, "-W", "[%h]:%p", f"{self.user}@{self.host}")

    def run(self, control_dir: Path, command: str, timeout_s: float = 60, check=True,
            stdin=None) -> subprocess.CompletedProcess:
        """COMMAND (a shell line) run on the hypervisor."""
        ssh = self.ssh(control_dir)
        try:
            done = subprocess.run(ssh.argv(["sh", "-c", command]), capture_output=True,
                                  timeout=timeout_s, stdin=stdin if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise VnetbenchError(f"hypervisor {self.host}: {command[:80]} did not finish within "
                                 f"{timeout_s:g} s") from None
        if check and done.returncode != 0:
            err = done.stderr.decode(errors="replace")
            if "Host key verification failed" in err:
                raise VnetbenchError(self._untrusted())
            tail = (err.strip().splitlines() or ["no output"])[-1]
            raise VnetbenchError(f"hypervisor {self.host}: {command[:80]} exited {done.returncode}: "
                                 f"{tail[:200]}")
        return done

    def _untrusted(self) -> str:
        at = f"[{self.host}]:{self.port}" if self.port else self.host
        return (f"hypervisor {self.host}: its SSH host key is not in {self.host_keys}, or differs "
                f"from the one there: check its fingerprint with the host's owner, then add it "
                f"(ssh-keyscan {'-p %d ' % self.port if self.port else ''}{self.host} >> "
                f"{self.host_keys}; entry {at}) or name another file with known_hosts=FILE in "
                f"the URI")

    def upload(self, control_dir: Path, src: Path, dst: str) -> None:
        with open(src, "rb") as f:
            self.run(control_dir, f"cat > {shlex.quote(dst)}", timeout_s=300, stdin=f)
