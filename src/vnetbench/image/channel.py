"""The command channel into a guest: SSH with a key, to the guest's own sshd (dropbear).

Why SSH: it works unchanged for libvirt guests (key on the kernel command line) and for
cloud VMs (key from the metadata service, as every cloud image does), needs no agent
protocol of our own, and one multiplexed connection per guest (ControlMaster) keeps a
command's round trip to one channel open on an existing session, which scales to many
guests. Executors stay pure: they build argv, this runs it and returns the output.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from vnetbench.errors import VnetbenchError


DEBUG_LOG = "VNETBENCH_SSH_DEBUG_LOG"


def _debug_options() -> list[str]:
    """With $VNETBENCH_SSH_DEBUG_LOG set, every ssh client and master appends its debug
    log there (-E), never to stderr: why a session ended (a master gone, a remote
    signal) is otherwise only said at debug level, and ssh exits 255 in silence."""
    log = os.environ.get(DEBUG_LOG)
    return ["-E", log, "-o", "LogLevel=DEBUG2"] if log else []


@dataclass(frozen=True)
class Ssh:
    address: str
    key: Path | None                   # None: ssh's own identities
    control_dir: Path                  # one master connection per guest, socket kept here
    user: str = "root"
    connect_timeout_s: int = 10
    netns: str | None = None           # run the client in this namespace (the guest's network)
    jump: str | None = None            # [user@]host[:port] of an SSH gateway to the guests
    port: int | None = None
    proxy: tuple[str, ...] | None = None   # a ProxyCommand argv (%h, %p: the guest's)
    host_keys: Path | None = None      # a real machine: its key must be in this known_hosts

    def __post_init__(self):
        # ssh binds <dir>/<40 hex>.<16 random> and a unix socket path has 107 bytes at most
        if len(str(self.control_dir)) > 48:
            raise ValueError(f"control_dir {str(self.control_dir)[:60]}...: longer than 48 "
                             "characters, too long for ssh's control socket; use a short one")

    def key_options(self) -> list[str]:
        """Who to be and whom to trust, without the connection sharing (for a ProxyCommand).
        A machine (a hypervisor) is checked against HOST_KEYS and refused if its key is
        not there. A guest's host key is made at each boot, so none can be known in
        advance: the channel trusts the address it was given inside the suite's own
        network (a run-owned bridge or namespace)."""
        trust = (["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.host_keys}"]
                 if self.host_keys else
                 ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"])
        return [*(["-i", str(self.key)] if self.key else []), "-o", "BatchMode=yes", *trust,
                "-o", "LogLevel=ERROR", *(["-o", f"Port={self.port}"] if self.port else [])]

    def _options(self) -> list[str]:
        return [*_debug_options(), *self.key_options(), "-o", f"ConnectTimeout={self.connect_timeout_s}",
                "-o", f"ControlPath={self.control_dir}/%C", "-o", "ServerAliveInterval=5",
                *(["-o", f"ProxyJump={self.jump}"] if self.jump else []),
                *(["-o", f"ProxyCommand={shlex.join(self.proxy)}"] if self.proxy else [])]

    def _prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns] if self.netns else []

    def argv(self, command: Sequence[str]) -> list[str]:
        """ssh argv running COMMAND (an argv itself, quoted for the guest's shell) over the
        master connection when it is open, else on a connection of its own."""
        return [*self._prefix(), "ssh", *self._options(), "-o", "ControlMaster=no",
                f"{self.user}@{self.address}", "--", shlex.join(command)]

    def forward_argv(self, target: str) -> list[str]:
        """ssh argv relaying its stdin/stdout to TARGET (host:port) as seen from the server,
        over the master connection only (no connection of its own: a relay run in a
        namespace without routes)."""
        return [*self._prefix(), "ssh", *self._options(), "-o", "ControlMaster=no",
                "-W", target, f"{self.user}@{self.address}"]

    def master_argv(self) -> list[str]:
        """The master connection, in the foreground of its own process (so its owner can
        journal its pid and stop it); commands then open channels on it."""
        return [*self._prefix(), "ssh", *self._options(), "-o", "ControlMaster=yes",
                "-o", "ControlPersist=no", "-o", "ConnectionAttempts=3", "-N",
                f"{self.user}@{self.address}"]

    def close_argv(self) -> list[str]:
        return [*self._prefix(), "ssh", *self._options(), "-O", "exit", f"{self.user}@{self.address}"]

    def check_argv(self) -> list[str]:
        return [*self._prefix(), "ssh", *self._options(), "-O", "check", f"{self.user}@{self.address}"]

    def run(self, command: Sequence[str], timeout_s: float = 60,
            check: bool = True) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run(self.argv(command), capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise VnetbenchError(f"guest {self.address}: {shlex.join(command)[:80]} did not finish "
                                 f"within {timeout_s:g} s") from None
        if check and done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise VnetbenchError(f"guest {self.address}: {shlex.join(command)[:80]} exited "
                                 f"{done.returncode}: {tail[:200]}")
        return done

    def _master(self) -> subprocess.Popen:
        return subprocess.Popen(self.master_argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def open(self, timeout_s: float = 60) -> subprocess.Popen:
        """Start the master and wait until it serves; the caller owns the process. A
        master that gives up early (a guest too starved to finish the banner exchange in
        time) is started again until TIMEOUT_S."""
        p = self._master()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if p.poll() is not None:
                tail = (p.stderr.read().strip().splitlines() or ["no output"])[-1]
                if time.monotonic() + self.connect_timeout_s > deadline:
                    raise VnetbenchError(f"guest {self.address}: SSH connection failed: {tail[:200]}")
                time.sleep(1)
                p = self._master()
                continue
            if subprocess.run(self.check_argv(), capture_output=True, timeout=10).returncode == 0:
                return p
            time.sleep(0.2)
        p.kill()
        p.wait()
        raise VnetbenchError(f"guest {self.address}: no SSH connection within {timeout_s:g} s")

    def close(self) -> None:
        """Ends the master connection through its socket (never by process name)."""
        subprocess.run(self.close_argv(), capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
