"""vnetbench-collector CLI: serve the vSwitch CPU metrics over HTTP for Prometheus.

    vnetbench-collector --host compute-1 --vswitch ovs --listen 127.0.0.1:9477
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

from . import __version__
from . import datapath, procfs
from .collector import VSwitchCollector

DEFAULT_LISTEN = "127.0.0.1:9477"
PROG = "vnetbench-collector"


def listen_address(text: str) -> tuple[str, int]:
    """"HOST:PORT" or "[IPV6]:PORT" -> (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


# vSwitch labels whose data plane is ovs-vswitchd (datapath counters apply)
OVS_KINDS = ("ovs", "ovs-openflow", "ovn")


def cpu_list(text: str) -> frozenset[int]:
    """"0-3,6" -> {0, 1, 2, 3, 6}."""
    out = set()
    try:
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a CPU list like 0-3,6, got {text!r}") from None
    return frozenset(out)


def pidfile_source(paths: list[Path]):
    """{pid: pidfile stem} of these pidfiles, re-read at every scrape (daemons may
    restart); the stem tells apart two daemons of one program (ovsdb-server-nb/-sb)."""
    def pids() -> dict[int, str]:
        out = {}
        for path in paths:
            try:
                out[int(path.read_text().split()[0])] = path.stem
            except (OSError, ValueError, IndexError):
                continue
        return out
    return pids


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Prometheus exporter of vSwitch CPU "
                                "time (per component and thread class) and softirq time per CPU.")
    p.add_argument("--host", default=socket.gethostname(),
                   help="value of the host label (default: this machine's hostname)")
    p.add_argument("--vswitch", default="ovs", help="value of the vswitch label (default: ovs)")
    p.add_argument("--listen", type=listen_address, default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to serve /metrics on (default: {DEFAULT_LISTEN})")
    p.add_argument("--proc", type=Path, default=Path("/proc"), help="/proc root (default: /proc)")
    p.add_argument("--process", action="append", default=[], metavar="NAME",
                   help="also export processes with this executable name (repeatable)")
    p.add_argument("--pid", action="append", type=int, default=[],
                   help="also export this pid (repeatable)")
    p.add_argument("--pidfile", action="append", type=Path, default=[],
                   help="export only processes whose pid is in one of these files, re-read "
                   "at every scrape (repeatable; for one emulated host of the testbed)")
    p.add_argument("--cpus", type=cpu_list, default=None, metavar="LIST",
                   help="softirq metrics for these CPUs only, e.g. 0-3,6 (default: all)")
    p.add_argument("--ovs-target", metavar="CTL",
                   help="ovs-vswitchd to ask for datapath counters (ovs-appctl -t CTL: its "
                   "unixctl socket or pidfile; default: the system's daemon)")
    p.add_argument("--no-datapath", action="store_true",
                   help="do not export OVS datapath counters (ovs-appctl dpctl/show)")
    p.add_argument("--no-processes", action="store_true",
                   help="export no processes found by name (only --pid ones and the kernel's "
                   "softirq metrics; e.g. a Linux bridge host)")
    p.add_argument("--no-qemu", action="store_true",
                   help="do not export QEMU vCPU/vhost threads")
    p.add_argument("--controller", action="store_true",
                   help="every process exported is an SDN controller/agent (data-plane part "
                   "'controller'), e.g. on an OVN or OpenFlow controller node")
    p.add_argument("--probe-file", type=Path, metavar="FILE",
                   help="snapshot file of the interrupt-time probe (python -m "
                   "vnetbench_collector.probe_runner --out FILE): exact data-plane split (method bpf)")
    p.add_argument("--port-file", type=Path, metavar="FILE",
                   help="write the port actually bound here (useful with --listen HOST:0)")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def build_registry(args) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(VSwitchCollector(
        host=args.host, vswitch=args.vswitch, proc=args.proc,
        pid_source=pidfile_source(args.pidfile) if args.pidfile else None,
        names=() if args.no_processes else procfs.VSWITCH_PROCESSES,
        extra_names=args.process, extra_pids=args.pid, cpus=args.cpus,
        datapaths=None if args.no_datapath or args.vswitch not in OVS_KINDS else
        datapath.ovs_source(args.ovs_target), qemu=not args.no_qemu,
        probe_file=args.probe_file, controller=args.controller))
    return registry


def fail(message: str):
    print(f"{PROG}: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if not (args.proc / "stat").is_file():
        fail(f"{args.proc}/stat not found; point --proc at a mounted procfs")
    host, port = args.listen
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    registry = build_registry(args)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            fail(f"cannot listen on {shown}: address already in use; "
                 f"pick another with --listen HOST:PORT")
        fail(f"cannot listen on {shown}: {e.strerror or e}; pick another with --listen HOST:PORT")
    port = server.server_port                       # the real one when --listen ...:0
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(f"{port}\n")
        tmp.replace(args.port_file)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    print(f"{PROG}: serving http://{shown}/metrics (host={args.host}, vswitch={args.vswitch})",
          file=sys.stderr)
    try:
        thread.join()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
