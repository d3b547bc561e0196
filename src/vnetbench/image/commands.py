"""``vnetbench image build``: the test guest for the libvirt and OpenStack backends."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

FORMATS = ("kernel", "raw", "qcow2")


def _formats(text: str) -> tuple[str, ...]:
    chosen = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: use a comma-separated list of {', '.join(FORMATS)}")
    return chosen


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vnetbench" / "image"


def cmd_build(args) -> int:
    from vnetbench import outfiles
    from vnetbench.image import build
    outfiles.check_dir(args.out, "--out", parents=True)      # before minutes of building
    flowgen = Path(args.flowgen) if args.flowgen else build.default_flowgen()
    if flowgen is None:
        print("vnetbench: warning: vnetbench-flowgen not built (make flowgen); the image has no "
              "flow-setup generator", file=sys.stderr)
    img = build.build(Path(args.out), Path(args.cache), args.format, flowgen,
                      progress=lambda m: print(f"image: {m}", file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(img.as_dict()))
        return 0
    print(f"kernel {img.kernel_version} built in {img.seconds:.1f} s:")
    for path in (img.kernel, img.initrd, img.raw, img.qcow2):
        if path is not None:
            print(f"  {path}  {path.stat().st_size / 2**20:.1f} MiB")
    return 0


def add_parsers(sub) -> None:
    image = sub.add_parser("image", help="the guest image for real VMs (libvirt, OpenStack)")
    actions = image.add_subparsers(required=True, metavar="ACTION")
    s = actions.add_parser("build", help="build kernel + initramfs and a bootable disk from Debian packages")
    s.add_argument("--out", default="vm-images/build", help="output directory (default: %(default)s)")
    s.add_argument("--format", type=_formats, default=FORMATS,
                   help="comma-separated: kernel,raw,qcow2 (default: all; kernel + initrd always)")
    s.add_argument("--cache", default=str(_cache()), help="downloaded kernel package (default: %(default)s)")
    s.add_argument("--flowgen", help="vnetbench-flowgen binary (default: the one next to this Python)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_build)
