"""The locally built guest image boots under QEMU (TCG here: this machine's /dev/kvm runs
only PVM guests) and serves the command channel, the way the libvirt and OpenStack
backends will use it:

- direct kernel boot with addresses and the SSH key on the command line (libvirt): two
  guests on one bridge; the suite's ping and iperf3 executors run inside them over SSH
  and their output parses; TX checksum offload is off on the guest NIC;
- the qcow2 disk with no arguments, like a cloud VM: DHCP gives the address, the SSH key
  comes from an EC2/OpenStack-style metadata service.
Everything runs in a namespace the test made (a bridge, taps, a DHCP server and the
metadata server inside it); traffic never leaves it."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from vnetbench.image import build, recipe
from vnetbench.image.lab import NET, Lab, sh, wait_ready
from vnetbench.image.qemu import QemuError
from vnetbench.traffic import iperf3, ping


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vnetbench" / "image"
    return build.build(tmp_path_factory.mktemp("image"), cache, flowgen=build.default_flowgen())


@pytest.fixture
def lab(tmp_path):
    lab = Lab(tmp_path)
    yield lab
    lab.close()


def test_direct_boot_pair_runs_the_executors(image, lab):
    a, b = f"{NET}.11", f"{NET}.12"
    consoles = [lab.direct("a", "02:00:00:00:fa:11", a, image),
                lab.direct("b", "02:00:00:00:fa:12", b, image)]
    ready = [wait_ready(c) for c in consoles]
    print(f"boot to ready (TCG, both at once): {ready[0]:.1f} s, {ready[1]:.1f} s")
    ga, gb = lab.ssh(a), lab.ssh(b)
    try:
        t0 = time.monotonic()
        ga.open()
        gb.open()
        print(f"SSH masters open: {time.monotonic() - t0:.1f} s")
        offload = ga.run(["ethtool", "-k", "eth0"]).stdout
        assert "tx-checksumming: off" in offload
        tools = ga.run(["sh", "-c", "for t in iperf3 ping arping tcpdump ethtool ip "
                        "vnetbench-flowgen; do command -v $t; done"]).stdout.split()
        assert tools == ["/usr/bin/iperf3", "/usr/bin/ping", "/usr/sbin/arping", "/usr/bin/tcpdump",
                         "/usr/sbin/ethtool", "/usr/bin/ip", "/usr/bin/vnetbench-flowgen"]

        rtt = ping.parse(ga.run(ping.command(ping.PingParams(b, count=5, interval_s=0.2))).stdout)
        assert rtt["received"] == 5 and rtt["rtt_avg_ms"] > 0

        server = subprocess.Popen(gb.argv(iperf3.server_command(iperf3.ServerParams(bind=b))),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        out = ga.run(iperf3.client_command(iperf3.ClientParams(dest=b, seconds=2)), timeout_s=60).stdout
        server.communicate(timeout=30)
        tcp = iperf3.parse(out)
        print(f"TCP between TCG guests: {tcp['bits_per_second'] / 1e6:.0f} Mbit/s, "
              f"RTT {rtt['rtt_avg_ms']:.2f} ms")
        assert tcp["bits_per_second"] > 1e6
    finally:
        ga.close()
        gb.close()


def test_disk_boots_like_a_cloud_vm(image, lab):
    lab.serve_cloud()
    console = lab.boot("disk", "02:00:00:00:fa:21",
                       ["-drive", f"file={image.qcow2},format=qcow2,if=virtio,snapshot=on"])
    print(f"disk boot to ready: {wait_ready(console):.1f} s")
    lab.procs[0].send_signal(10)            # SIGUSR1: udhcpd writes its lease file now
    time.sleep(0.5)
    leases = sh("ip", "netns", "exec", lab.ns, "busybox", "dumpleases", "-f",
                str(lab.root / "leases"), "-a").stdout
    ip = next(line.split()[1] for line in leases.splitlines() if "02:00:00:00:fa:21" in line)
    guest = lab.ssh(ip)
    try:
        try:
            guest.open()
        except Exception as exc:
            raise AssertionError(f"{exc}\nconsole:\n{console.read_text(errors='replace')[-1500:]}")
        booted = guest.run(["cat", "/proc/cmdline"]).stdout.split()
        assert set(recipe.SYSLINUX_CFG.split("APPEND", 1)[1].split()) <= set(booted), booted
        addr = json.loads(guest.run(["ip", "-j", "addr", "show", "eth0"]).stdout)
        assert ip in {a["local"] for a in addr[0]["addr_info"]}
    finally:
        guest.close()


def test_a_qemu_that_cannot_start_says_why(lab, tmp_path):
    """QEMU's own reason reaches the error (CI once saw only 'exit status 1')."""
    missing = tmp_path / "no-such-kernel"
    with pytest.raises(QemuError) as err:
        lab.boot("broken", "02:00:00:00:fa:31", ["-kernel", str(missing)])
    assert str(missing) in str(err.value).split("; console")[0]      # QEMU's stderr names it
    assert "exited 1" in str(err.value) and "console" in str(err.value)
