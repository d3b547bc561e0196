"""tools/aio/aio: up | down | status of the all-in-one OpenStack, and root build | list |
purge of its Debian root (tools/aio/README.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vnetbench.aio import conf, registry
from vnetbench.aio.cloud import Aio, default_state
from vnetbench.errors import VnetbenchError


def guest_image(arg: str | None, progress) -> Path:
    """--image, else the image `make image` builds, else one built now into the cache."""
    if arg:
        return Path(arg)
    built = Path("vm-images/build/disk.qcow2")
    if built.is_file():
        return built.resolve()
    import hashlib
    from vnetbench.image import build, recipe
    from vnetbench.image.commands import _cache
    # keyed by what the image is made from: a changed recipe is not served a stale image
    flowgen = build.default_flowgen()
    digest = hashlib.sha256(b"".join(Path(f).read_bytes() for f in
                                     (recipe.__file__, build.__file__, flowgen)))
    out = _cache() / f"aio-image-{digest.hexdigest()[:12]}"
    if not (out / "disk.qcow2").is_file():
        progress(f"aio: building the guest image into {out}")
        build.build(out, _cache() / "image", formats=("kernel", "qcow2"), flowgen=flowgen)
    return out / "disk.qcow2"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["root"]:           # the cloud's root: build | list | purge
        from vnetbench.aio import rootcmd
        return rootcmd.main(argv[1:])
    ap = argparse.ArgumentParser(prog="aio", description="all-in-one OpenStack for vnetbench's tests")
    ap.add_argument("command", choices=("up", "down", "status"))
    ap.add_argument("--state", default=str(default_state()),
                    help="state dir (default: $VNETBENCH_STATE_DIR/aio = %(default)s)")
    ap.add_argument("--image", help="guest disk image for Glance (default: vm-images/build/disk.qcow2, "
                                    "else built into the cache)")
    ap.add_argument("--port-base", type=int, default=19000, help="first of 12 TCP ports on 127.0.0.1")
    ap.add_argument("--cidr", default="198.19.250.0/24", help="the flat provider subnet")
    ap.add_argument("--pinned-cpus", default="0-1", help="nova's cpu_dedicated_set: host CPUs "
                    "for pinned guests ('' = none; default %(default)s)")
    ap.add_argument("--shared-cpus", default="", help="nova's cpu_shared_set: host CPUs unpinned "
                    "guests share ('' = none, the default); e.g. '--pinned-cpus \"\" "
                    "--shared-cpus 0-1' for the functional suite's testbeds of up to 6 guests")
    ap.add_argument("--ovs-kpps", type=int, default=None,
                    help="the OVS backend's packet rate in Placement (kilo packets/s; the OVS agent's "
                         "resource_provider_packet_processing_without_direction), e.g. from "
                         "'vnetbench plan --openstack' (docs/capacity.md); default: none")
    ap.add_argument("--computes", type=int, default=1,
                    help="compute nodes: this machine, then N-1 emulated ones (a network, mount and "
                         "UTS namespace each with its own OVS, libvirtd, OVS agent and nova-compute; "
                         "the CPU sets are shared out between them; default %(default)s)")
    ap.add_argument("--release", default="epoxy", help="the OpenStack release: epoxy (Debian 13's "
                    "packages, in a root of its own built into the cache on first use: make install "
                    "does) or zed (this machine's Debian 12 packages: make install-zed); "
                    "tools/aio/README.md; default %(default)s")
    ap.add_argument("--ml2", default="ovn", help="Neutron's mechanism driver: ovn (OVN's databases, "
                    "northd and an ovn-controller per node; epoxy only) or ovs (the OVS and L3 "
                    "agents); default %(default)s")
    args = ap.parse_args(argv)
    if args.computes < 1:
        ap.error("--computes: at least 1")
    if args.ovs_kpps is not None and args.ml2 == "ovn":
        print("aio: --ovs-kpps: ML2/OVN reports no packet-rate inventory (the OVS agent's); "
              "drop it, or use --ml2 ovs", file=sys.stderr)
        return 2
    if problem := conf.check_release(args.release, args.ml2):
        print(f"aio: {problem}", file=sys.stderr)
        return 2
    log = lambda msg: print(msg, file=sys.stderr, flush=True)   # noqa: E731
    try:
        aio = Aio(Path(args.state), args.port_base, args.cidr, args.pinned_cpus, args.shared_cpus,
                  args.ovs_kpps, computes=args.computes, release=args.release, ml2=args.ml2)
        if args.command == "up":
            t0 = time.monotonic()
            image = guest_image(args.image, log)
            path = registry.up(aio, image, progress=log)
            log(f"aio: up in {time.monotonic() - t0:.0f} s {json.dumps(aio.timings)}")
            print(path)
        elif args.command == "down":
            t0 = time.monotonic()
            problems = registry.down(aio, progress=log)
            if problems:
                log(f"aio: down left: {'; '.join(problems)}")
                return 1
            log(f"aio: down in {time.monotonic() - t0:.0f} s")
        else:
            lines = aio.status()
            print("\n".join(lines) if lines else f"aio: nothing up in {args.state}")
            return 0 if lines and all(ln.endswith("running") for ln in lines) else 3
    except VnetbenchError as exc:
        log(str(exc))
        return 2
    except KeyboardInterrupt:
        log(f"aio: interrupted; run 'aio down --state {args.state}' (or 'vnetbench cleanup') "
            "to remove what was started")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
