"""The guest image recipe, disk layout and command channel, without building or booting."""

import struct
from pathlib import Path

import pytest

from vnetbench import cli
from vnetbench.image import build, recipe
from vnetbench.image.channel import Ssh


def test_cmdline_static_nics_and_key():
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0 user@host"
    line = recipe.cmdline((recipe.GuestNic(0, "198.19.1.11/24", 1450),
                           recipe.GuestNic(1, "198.19.2.11/24")), key=key, gateway="198.19.1.1")
    words = line.split()
    assert "vnb.ip0=198.19.1.11/24,1450" in words and "vnb.ip1=198.19.2.11/24,1500" in words
    assert "vnb.keytype=ssh-ed25519" in words and "vnb.key=AAAAC3NzaC1lZDI1NTE5AAAAIK0" in words
    assert "vnb.gw=198.19.1.1" in words and "vnb.txcsum=on" not in words    # offload off by default
    assert recipe.CONSOLE in words


def test_cmdline_without_nics_is_a_cloud_boot():
    assert not [w for w in recipe.cmdline().split() if w.startswith("vnb.")]


def test_init_reads_what_cmdline_writes():
    for name in ("vnb.ip", "vnb.gw", "vnb.key", "vnb.keytype", "vnb.txcsum"):
        assert name in recipe.INIT
    assert recipe.READY in recipe.FILES["init"] and "VNETBENCH_READY" not in recipe.FILES["init"]


def test_modules_load_in_dependency_order():
    listed = recipe.FILES["etc/vnetbench/modules"].split()
    before = (("drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio.ko"),
              ("net/core/failover.ko", "drivers/net/net_failover.ko"),
              ("drivers/net/net_failover.ko", "drivers/net/virtio_net.ko"),
              ("drivers/virtio/virtio_pci.ko", "drivers/net/virtio_net.ko"),
              # the config drive: ISO 9660 on an IDE CD-ROM
              ("drivers/scsi/scsi_common.ko", "drivers/scsi/scsi_mod.ko"),
              ("drivers/scsi/scsi_mod.ko", "drivers/ata/libata.ko"),
              ("drivers/ata/libata.ko", "drivers/ata/ata_piix.ko"),
              ("drivers/cdrom/cdrom.ko", "drivers/scsi/sr_mod.ko"),
              ("drivers/scsi/scsi_mod.ko", "drivers/scsi/sr_mod.ko"),
              ("drivers/cdrom/cdrom.ko", "fs/isofs/isofs.ko"))
    for first, then in before:
        assert listed.index(first) < listed.index(then), (first, then)


def test_tools_come_from_packages_make_installs():
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    apt = makefile.split("APT_PACKAGES :=", 1)[1].split("\n\n", 1)[0].replace("\\", " ").split()
    assert set(recipe.PACKAGES) <= set(apt), set(recipe.PACKAGES) - set(apt)


def test_mbr_one_active_fat_partition():
    record = build.mbr(b"\x90" * 440, 2048, 65536)
    assert len(record) == 512 and record[510:] == b"\x55\xaa" and record[:440] == b"\x90" * 440
    status, ptype, first, count = struct.unpack_from("<B3xB3xII", record, 446)
    assert (status, ptype, first, count) == (0x80, 0x0C, 2048, 65536)
    assert record[462:510] == bytes(48)                        # the other three entries empty


def test_ssh_argv_quotes_the_command_and_uses_the_master():
    ssh = Ssh("198.19.1.11", Path("/run/k"), Path("/run/vnb-mux"), netns="vnb-abc123-h-h1")
    argv = ssh.argv(["sh", "-c", "echo 'a b'; ls"])
    assert argv[:4] == ["ip", "netns", "exec", "vnb-abc123-h-h1"] and argv[4] == "ssh"
    assert argv[-3:] == ["root@198.19.1.11", "--", "sh -c 'echo '\"'\"'a b'\"'\"'; ls'"]
    assert "ControlMaster=no" in argv and "ControlPath=/run/vnb-mux/%C" in argv
    master = ssh.master_argv()
    assert "ControlMaster=yes" in master and "-N" in master and "-f" not in master   # owned pid
    assert "-O" in ssh.close_argv() and "exit" in ssh.close_argv()


def test_ssh_refuses_a_control_dir_too_long_for_a_socket():
    with pytest.raises(ValueError, match="too long"):
        Ssh("198.19.1.11", Path("/k"), Path("/tmp/" + "x" * 60))


@pytest.mark.parametrize("bad", ["", "iso", "kernel,vmdk", ","])
def test_image_build_format_is_checked(bad, capsys):
    assert cli.main(["image", "build", "--format", bad]) == 2      # one line, no SystemExit
    err = capsys.readouterr().err
    assert "comma-separated list of kernel, raw, qcow2" in err and err.count("\n") == 1


def test_ssh_debug_log_goes_to_a_file_and_wins_over_the_quiet_level(monkeypatch):
    """ssh keeps an option's first value: the debug level must come before LogLevel=ERROR."""
    monkeypatch.setenv("VNETBENCH_SSH_DEBUG_LOG", "/tmp/vnb-ssh.log")
    argv = Ssh("198.19.1.11", Path("/run/k"), Path("/run/vnb-mux")).argv(["true"])
    assert argv[argv.index("-E") + 1] == "/tmp/vnb-ssh.log"
    assert argv.index("LogLevel=DEBUG2") < argv.index("LogLevel=ERROR")
    monkeypatch.delenv("VNETBENCH_SSH_DEBUG_LOG")
    assert "-E" not in Ssh("198.19.1.11", Path("/run/k"), Path("/run/vnb-mux")).argv(["true"])
