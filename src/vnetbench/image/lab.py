"""A throwaway QEMU lab for checking the guest image (tests and bench/bench_image.py):
one namespace of its own with a bridge the guests' taps join, optionally a DHCP server
and an EC2/OpenStack-style metadata service, and guests booted directly or from the
disk. It is not a backend: the libvirt backend owns real testbeds' domains."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vnetbench.image import recipe
from vnetbench.image.channel import Ssh
from vnetbench.image.qemu import start_daemonized, tail_file

NET = "198.18.250"
METADATA = "169.254.169.254"


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


class Lab:
    """A namespace with a bridge that guests' taps join; QEMU runs inside it."""

    def __init__(self, root: Path, accel: str = "tcg", memory_mib: int = 256):
        self.accel, self.memory_mib = accel, memory_mib
        self.root, self.ns = root, f"vnbimg-{secrets.token_hex(3)}"
        self.procs, self.pidfiles = [], []
        sh("ip", "netns", "add", self.ns)
        for cmd in (["link", "set", "lo", "up"], ["link", "add", "br0", "type", "bridge"],
                    ["addr", "add", f"{NET}.1/24", "dev", "br0"],
                    ["addr", "add", f"{METADATA}/32", "dev", "br0"], ["link", "set", "br0", "up"]):
            sh("ip", "-n", self.ns, *cmd)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "key"))
        self.key = root / "key"
        self.mux = Path(tempfile.mkdtemp(prefix="vnbmux-"))       # short: a socket path

    def serve_cloud(self):
        """udhcpd for the bridge and the metadata path that carries the public key."""
        conf = self.root / "udhcpd.conf"
        conf.write_text(f"start {NET}.100\nend {NET}.110\ninterface br0\nopt subnet 255.255.255.0\n"
                        f"opt router {NET}.1\n"
                        f"lease_file {self.root / 'leases'}\npidfile {self.root / 'udhcpd.pid'}\n")
        (self.root / "leases").touch()
        self._spawn("busybox", "udhcpd", "-f", str(conf))
        keys = self.root / "www" / "latest" / "meta-data" / "public-keys" / "0"
        keys.mkdir(parents=True)
        shutil.copy(self.key.with_suffix(".pub"), keys / "openssh-key")
        self._spawn(sys.executable, "-m", "http.server", "--bind", METADATA, "80",
                    "--directory", str(self.root / "www"))

    def _spawn(self, *argv):
        self.procs.append(subprocess.Popen(["ip", "netns", "exec", self.ns, *argv],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def boot(self, name: str, mac: str, boot: list[str]) -> Path:
        console, pidfile = self.root / f"{name}.console", self.root / f"{name}.pid"
        tap = f"vnbt{secrets.token_hex(2)}"
        start_daemonized(self.ns, ["qemu-system-x86_64", "-accel", self.accel, "-m", str(self.memory_mib),
                             "-smp", "1", "-display", "none", "-no-reboot", *boot,
                             "-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no",
                             "-device", f"virtio-net-pci,netdev=n0,mac={mac}",
                             "-serial", f"file:{console}", "-pidfile", str(pidfile), "-daemonize"],
                   console)
        self.pidfiles.append(pidfile)
        sh("ip", "-n", self.ns, "link", "set", tap, "master", "br0", "up")
        return console

    def direct(self, name, mac, ip, image):
        args = recipe.cmdline((recipe.GuestNic(0, f"{ip}/24"),), key=self.key.with_suffix(".pub").read_text())
        return self.boot(name, mac, ["-kernel", str(image.kernel), "-initrd", str(image.initrd),
                                     "-append", args])

    def ssh(self, ip) -> Ssh:
        return Ssh(ip, self.key, self.mux, netns=self.ns)

    def close(self):
        for pidfile in self.pidfiles:     # only the process that names its own pidfile
            try:
                pid = int(pidfile.read_text())
                if str(pidfile).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, 9)
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        shutil.rmtree(self.mux, ignore_errors=True)


def wait_ready(console: Path, timeout_s=120) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if console.exists() and recipe.READY in console.read_text(errors="replace"):
            return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"{console.name}: not ready after {timeout_s} s; console: {tail_file(console)}")
