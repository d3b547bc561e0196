"""Build the test guest: kernel + initramfs for direct boot, and a BIOS-bootable disk
(raw and qcow2: an MBR, one FAT partition, syslinux) for clouds.

Only Debian packages: the kernel .deb is fetched with ``apt-get download`` into a cache
(the build machine's own kernel is never used); tools and their libraries are copied
from the installed packages. Nothing is mounted (no loop devices, no device-mapper):
the FAT file system is filled with mtools and syslinux installs at an offset.
"""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench.errors import PrerequisiteError, VnetbenchError
from vnetbench.image import recipe

PART_OFFSET = 1 << 20           # the FAT partition starts at 1 MiB
MBR = Path("/usr/lib/syslinux/mbr/mbr.bin")
LDLINUX = Path("/usr/lib/syslinux/modules/bios/ldlinux.c32")


@dataclass(frozen=True)
class Image:
    kernel: Path
    initrd: Path
    raw: Path | None
    qcow2: Path | None
    kernel_version: str
    seconds: float

    def as_dict(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def _run(*argv, cwd=None) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise PrerequisiteError(f"image build: '{argv[0]}' not found; run 'make install'") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise VnetbenchError(f"image build: {' '.join(map(str, argv[:3]))} failed: {tail[0]}")
    return done.stdout


def kernel_package() -> str:
    """The versioned kernel package the cloud metapackage points at."""
    for line in _run("apt-cache", "depends", recipe.KERNEL_META).splitlines():
        line = line.strip()
        if line.startswith("Depends: linux-image-"):
            return line.split()[1]
    raise VnetbenchError(f"image build: apt-cache knows no {recipe.KERNEL_META}; run apt-get update")


def fetch_kernel(cache: Path) -> tuple[Path, str]:
    """Extract the kernel .deb (cached) and return (root of its files, kernel version)."""
    pkg = kernel_package()
    version = pkg.removeprefix("linux-image-")
    root = cache / pkg
    if not (root / "boot" / f"vmlinuz-{version}").exists():
        debs = cache / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        if not list(debs.glob(f"{pkg}_*.deb")):
            _run("apt-get", "download", pkg, cwd=debs)
        tmp = Path(tempfile.mkdtemp(dir=cache))
        _run("dpkg-deb", "-x", str(next(debs.glob(f"{pkg}_*.deb"))), str(tmp))
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    return root, version


def libraries(binary: str) -> set[str]:
    """Shared objects a binary loads (empty for a static one)."""
    done = subprocess.run(["ldd", binary], capture_output=True, text=True)
    libs = set()
    for line in done.stdout.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > parts.index("=>") + 1 and parts[parts.index("=>") + 1].startswith("/"):
            libs.add(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/"):          # the dynamic loader
            libs.add(parts[0])
    return libs


def _copy(src: str, tree: Path) -> None:
    dest = tree / src.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), dest)


def populate(tree: Path, kernel_root: Path, version: str, flowgen: Path | None) -> None:
    """The root file system: busybox, the tools and their libraries, the modules, /init."""
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "run", "root", "etc"):
        (tree / d).mkdir(parents=True, exist_ok=True)
    binaries = [path for path, _ in recipe.TOOLS]
    missing = [f"{p} ({pkg})" for p, pkg in recipe.TOOLS if not Path(p).exists()]
    if missing:
        raise PrerequisiteError(f"image build: missing {', '.join(missing)}; run 'make install'")
    if flowgen:
        binaries.append(str(flowgen))
    for binary in binaries:
        _copy(binary, tree)
        for lib in libraries(binary):
            _copy(lib, tree)
    if flowgen:          # callers find it on PATH under its own name
        os.replace(tree / str(flowgen).lstrip("/"), tree / "usr/bin/vnetbench-flowgen")
    mods = kernel_root / "lib/modules" / version
    for module in recipe.MODULES:
        dest = tree / "lib/modules" / module.split("kernel/", 1)[1]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(mods / module, dest)
    (tree / "bin/sh").symlink_to("/usr/bin/dash")   # busybox --install keeps an existing sh
    for rel, text in recipe.FILES.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    for rel in recipe.EXECUTABLE:
        (tree / rel).chmod(0o755)


def cpio_gz(tree: Path, out: Path) -> None:
    names = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    archive = subprocess.run(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"], cwd=tree,
                             input="\n".join(names).encode(), capture_output=True, check=True).stdout
    with open(out, "wb") as f:
        f.write(gzip.compress(archive, compresslevel=6, mtime=0))


def mbr(boot_code: bytes, first_lba: int, sectors: int) -> bytes:
    """A master boot record: syslinux's boot code and one active FAT32-LBA partition
    (CHS fields set to the LBA-only marker, as modern partitioners write them)."""
    entry = struct.pack("<B3sB3sII", 0x80, b"\xfe\xff\xff", 0x0C, b"\xfe\xff\xff",
                        first_lba, sectors)
    return boot_code.ljust(446, b"\0") + entry + bytes(48) + b"\x55\xaa"


def disk(kernel: Path, initrd: Path, raw: Path, work: Path) -> None:
    """MBR + one bootable FAT partition at 1 MiB carrying syslinux, kernel and initrd."""
    size_mib = (kernel.stat().st_size + initrd.stat().st_size) // (1 << 20) + 8
    fat = work / "fat.img"
    _run("truncate", "-s", f"{size_mib}M", str(fat))
    _run("mkfs.fat", "-n", "VNETBENCH", str(fat))
    cfg = work / "syslinux.cfg"
    cfg.write_text(recipe.SYSLINUX_CFG)
    _run("mcopy", "-i", str(fat), str(kernel), "::/vmlinuz")
    _run("mcopy", "-i", str(fat), str(initrd), "::/initrd.img")
    _run("mcopy", "-i", str(fat), str(cfg), "::/syslinux.cfg")
    _run("mcopy", "-i", str(fat), str(LDLINUX), "::/ldlinux.c32")
    _run("syslinux", "--install", str(fat))
    with open(raw, "wb") as f:
        f.write(mbr(MBR.read_bytes()[:440], PART_OFFSET // 512, fat.stat().st_size // 512))
        f.seek(PART_OFFSET)
        with open(fat, "rb") as src:
            shutil.copyfileobj(src, f)


def build(out: Path, cache: Path, formats=("kernel", "raw", "qcow2"), flowgen: Path | None = None,
          progress=lambda msg: None) -> Image:
    """Build into OUT atomically: a half-built image is never left under its final name."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    progress("fetching the Debian cloud kernel")
    kernel_root, version = fetch_kernel(cache)
    with tempfile.TemporaryDirectory(dir=out, prefix=".build-") as tmp:
        work = Path(tmp)
        tree = work / "root"
        progress("assembling the initramfs")
        populate(tree, kernel_root, version, flowgen)
        kernel, initrd = work / "vmlinuz", work / "initrd.img"
        shutil.copy2(kernel_root / "boot" / f"vmlinuz-{version}", kernel)
        cpio_gz(tree, initrd)
        raw = qcow2 = None
        if "raw" in formats or "qcow2" in formats:
            progress("writing the bootable disk")
            raw = work / "disk.raw"
            disk(kernel, initrd, raw, work)
        if "qcow2" in formats:
            qcow2 = work / "disk.qcow2"
            _run("qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2))
        final = {}
        for path in (kernel, initrd, raw, qcow2):
            if path is not None and (path.name != "disk.raw" or "raw" in formats):
                os.replace(path, out / path.name)
                final[path.name] = out / path.name
    return Image(kernel=final["vmlinuz"], initrd=final["initrd.img"], raw=final.get("disk.raw"),
                 qcow2=final.get("disk.qcow2"), kernel_version=version,
                 seconds=round(time.monotonic() - t0, 2))


def boot_files(image_dir: Path) -> tuple[Path, Path]:
    """(kernel, initrd) of a built image directory, or one clear error saying how to build it."""
    kernel, initrd = image_dir / "vmlinuz", image_dir / "initrd.img"
    if not (kernel.is_file() and initrd.is_file()):
        raise PrerequisiteError(f"{image_dir}: no vmlinuz + initrd.img; build the guest image "
                                f"with 'make image' (or vnetbench image build --out {image_dir})")
    return kernel.resolve(), initrd.resolve()


def default_flowgen() -> Path | None:
    path = Path(sys.executable).parent / "vnetbench-flowgen"
    return path if path.exists() else None
