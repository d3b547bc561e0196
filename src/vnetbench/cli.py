"""Command line: ``vnetbench testbed up|status|exec|down|capabilities|validate|schema``,
``vnetbench cleanup``, ``fault`` (their handlers: ``cli_testbed``), ``demo``, ``compare``,
``functional``, ``reproduce``, ``report`` and ``history``. Library code raises; only this exits."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from vnetbench import signals
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt, one_line
from vnetbench.testbed import options
from vnetbench.testbed.model import PATHS, NetType, VSwitchKind
from vnetbench.testbed.options import build_options, libvirt_uris  # noqa: F401  (libvirt_uris: API)
from vnetbench.cli_testbed import (
    fault_parsers, cmd_capabilities, cmd_cleanup, cmd_down, cmd_exec, cmd_schema, cmd_status, cmd_up,
    cmd_validate, online_cpus, progress,
)

VSWITCH_CHOICES = [k.value for k in VSwitchKind]
NETWORK_CHOICES = [t.value for t in NetType]
#: the battery's families, as the comparison task names them (rally-tasks/overlay-comparison.yaml)
COMPARE_FAMILIES = ["icmp_rtt", "tcp_stream", "udp_stream", "broadcast", "flow_setup", "rfc2544", "fairness",
                    "port_ready"]


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        print(f"vnetbench: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _terminate)   # unwind a half-built testbed on SIGTERM too
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        try:
            return args.func(args) or 0
        finally:      # only the outcome is left to print: another signal ends us at once
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
    except VnetbenchError as exc:
        print(f"vnetbench: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("vnetbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:          # output piped into head & co.
        sys.stderr.close()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _terminate(signum, frame):
    signals.handler(signum, frame)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, and an unknown option is named as such
    (argparse would first complain that a required argument is missing)."""

    def parse_known_args(self, args=None, namespace=None):
        self._args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        known = self._option_string_actions
        args = getattr(self, "_args", [])
        args = args[:args.index("--")] if "--" in args else args
        unknown = [a for a in args if a.startswith("-") and a != "-" and a.split("=")[0] not in known
                   and not a.lstrip("-").replace(".", "").isdigit()]
        if unknown and "required" in message:
            message = f"unrecognized argument {excerpt(unknown[0])}"
        raise _UsageError(f"{self.prog}: {message}; see '{self.prog} --help'")


def cmd_demo(args):
    from vnetbench import demo, outfiles
    from vnetbench.testbed.model import NetType, VSwitchKind
    outfiles.check_dir(args.results, "--results")        # before any testbed is built
    kinds = [VSwitchKind(k) for k in args.vswitch] if args.vswitch else demo.KINDS
    types = [NetType(t) for t in args.network] if args.network else list(NetType)
    report = demo.run(kinds, types, count=args.count, progress=progress(args.quiet),
                      online_cpus=online_cpus())
    print(demo.table(report))
    path = demo.save(report, Path(args.results))
    print(f"\nresults (JSON): {path}")
    bad = [r for r in report["rows"] if r["supported"] and not r["reachable"]]
    return 1 if bad else 0


def _port_ready_args(args) -> dict:
    """The port_ready family's task arguments, checked before anything is built."""
    from vnetbench.battery import portready
    portready.check(args.ports, args.steps, args.concurrency, args.deadline_ms, args.probe_interval_ms)
    return {"port_ready_ports": args.ports, "port_ready_steps": args.steps,
            "port_ready_concurrency": args.concurrency, "port_ready_deadline_ms": args.deadline_ms,
            "port_ready_probe_interval_ms": args.probe_interval_ms}


def cmd_compare(args):
    from vnetbench import compare, outfiles
    from vnetbench.history import commands as history
    outfiles.check_dir(args.results, "--results")      # as given: Path('') would be '.'
    history.check_history(args.history)
    image = str(Path(args.image).resolve()) if args.backend == "libvirt" and not args.run else None
    if image:
        from vnetbench.image.build import boot_files     # fail now, not once per testbed
        boot_files(Path(image))
    vswitches, networks = args.vswitch, args.network
    port_ready = _port_ready_args(args)
    if args.run:                # the one column the running testbed is
        from vnetbench.testbed import deployment
        dep = deployment.attach(args.run)
        args.run = dep.run_id
        vswitches, networks = [dep.testbed.vswitch.kind.value], [dep.testbed.network.type.value]
    res = compare.run(args.profile, vswitches, networks, Path(args.results),
                      monitor=not args.no_monitor,
                      testbed={"backend": args.backend, "image": image, "placements": args.placement,
                               "run": args.run, "security_groups": args.security_groups,
                               "path": args.path if args.path != "l2" else None},
                      name=("comparison-sg" if args.security_groups else "comparison")
                      + ("-routed" if args.path != "l2" else ""), tests=args.tests,
                      task_args=port_ready)
    print(res["table"])
    print(f"wall time: {res['seconds']:.0f} s   Rally task: {res['uuid']}")
    print(f"Rally HTML report:  {res['dir'] / 'rally-report.html'}")
    print(f"result records:     {res['dir'] / 'records.jsonl'}")
    print(f"this table:         {res['dir'] / 'table.txt'}")
    print(f"comparison report:  {res['dir'] / 'report.html'} (and report.md, report.csv)")
    if res.get("monitor"):
        print(f"Prometheus data:    {res['dir'] / 'prometheus'} (to serve it to Grafana: "
              f"dashboards/README.md)")
    for s in res["sla_failed"]:
        print(f"SLA failed: {s.get('benchmark')} #{s.get('pos')}: {s.get('detail')}", file=sys.stderr)
    history.add_to_history(args.history, res["dir"])
    return 1 if res["sla_failed"] else 0


def cmd_functional(args):
    from vnetbench.functional import runner
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    build_options(args, command="functional")     # a missing --cloud is refused here
    return runner.run(args.out, args.vswitch or (), args.network or (), args.strict,
                      options.forward(args) + list(extra), quick=args.quick, expect=args.expect)


def cmd_report(args):
    from vnetbench.report import write
    for path in write.report(args.results, args.out, args.format):      # --out '' is refused, not the default
        print(path)


def _formats(text):
    from vnetbench.report.write import FORMATS
    formats = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise argparse.ArgumentTypeError(f"{text!r}: use a comma-separated list of {', '.join(FORMATS)}")
    return formats


DESCRIPTION = """\
vnetbench: one battery of data-plane and functional tests for the virtual networks of
OpenStack/KVM clouds, with the vSwitch's CPU cost beside every number. Without a cloud it
runs on the embedded testbed (hosts, VMs and vSwitches in network namespaces).
Start with 'vnetbench testbed capabilities', then 'vnetbench compare --profile quick'."""


def _parser():
    p = _Parser(prog="vnetbench", description=DESCRIPTION,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(required=True, metavar="COMMAND")
    tb = sub.add_parser("testbed", help="embedded testbed lifecycle").add_subparsers(
        required=True, metavar="ACTION")

    s = tb.add_parser("up", help="build a testbed from a YAML file")
    s.add_argument("file")
    s.add_argument("--monitor", default=os.environ.get("VNETBENCH_MONITOR"),
                   help="monitor id to attach collectors to (default: $VNETBENCH_MONITOR)")
    options.add_arguments(s.add_argument)
    s.add_argument("--json", action="store_true")
    s.add_argument("-q", "--quiet", action="store_true")
    s.set_defaults(func=cmd_up)

    for name, func, text in (("status", cmd_status, "show runs"), ("down", cmd_down, "tear a run down")):
        s = tb.add_parser(name, help=text)
        s.add_argument("--run", help="run id or testbed name (default: the only run)")
        if name == "status":
            s.add_argument("--json", action="store_true")
        s.set_defaults(func=func)

    s = tb.add_parser("exec", help="run a command in a VM (pinned to its CPUs)")
    s.add_argument("--run")
    s.add_argument("--host", action="store_true", help="VM names a host instead")
    s.add_argument("vm")
    s.add_argument("command", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_exec)

    s = tb.add_parser("capabilities", help="which vSwitch x network type combinations work here")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_capabilities)

    s = tb.add_parser("validate", help="check a testbed file without building it")
    s.add_argument("file")
    s.set_defaults(func=cmd_validate)

    tb.add_parser("schema", help="print the testbed JSON Schema").set_defaults(func=cmd_schema)

    for parent in (sub, tb):
        s = parent.add_parser("cleanup", help="remove every object of vnetbench runs and all-in-one "
                                              "clouds (also after a crash)")
        s.add_argument("--run", action="append", help="only this run (repeatable)")
        s.add_argument("--backend", choices=["netns", "libvirt", "openstack", "aio"],
                       help="only runs of this backend (openstack: deletes the stacks they "
                            "journaled, and no other; aio: the all-in-one clouds of "
                            "tools/aio, each with its own 'aio down', and the partial "
                            "roots of interrupted 'aio root build's)")
        s.set_defaults(func=cmd_cleanup)

    fault_parsers(sub)

    from vnetbench.monitor import commands as monitor_commands
    monitor_commands.add_parsers(sub)
    from vnetbench.image import commands as image_commands
    image_commands.add_parsers(sub)
    from vnetbench.reproduce import commands as reproduce_commands
    reproduce_commands.add_parsers(sub)
    from vnetbench.capacity import commands as capacity_commands
    capacity_commands.add_parsers(sub)
    from vnetbench.history import commands as history_commands
    history_commands.add_parsers(sub)

    s = sub.add_parser("compare", help="the battery over vSwitch x network type through Rally")
    s.add_argument("--profile", choices=["smoke", "quick", "full"], default="quick",
                   help="smoke: the path works (slow guests, tests); quick: a smoke comparison "
                   "in about a quarter of an hour; full: the seed's durations (hours)")
    s.add_argument("--vswitch", action="append", choices=VSWITCH_CHOICES,
                   help="with --network: every vswitch x network combination instead of the "
                   "default columns (linuxbridge/flat, ovs-openflow/vxlan, vrouter/gre, "
                   "ovs/vxlan, ovn/geneve)")
    s.add_argument("--network", action="append", choices=NETWORK_CHOICES)
    s.add_argument("--results", default="results", help="directory for reports and records")
    s.add_argument("--no-monitor", action="store_true",
                   help="run without Prometheus (no collectors, results not pushed)")
    s.add_argument("--backend", choices=["netns", "libvirt"], default="netns",
                   help="what a VM is: a namespace, or a QEMU guest from --image (default: %(default)s)")
    s.add_argument("--image", default="vm-images/build",
                   help="libvirt: directory with vmlinuz + initrd.img (make image; default: %(default)s)")
    s.add_argument("--placement", action="append", choices=["same-host", "cross-host"],
                   help="only these VM pair placements (default: both)")
    s.add_argument("--run", help="measure this running testbed (id or name; one column, kept up) "
                   "instead of building one per workload: boot slow guests once")
    s.add_argument("--path", choices=PATHS, default="l2",
                   help="l3-east-west: each pair's VMs on two vnets, a router between them; "
                        "north-south: a VM to an external host through the router's SNAT; "
                        "floating-ip: the external host to a VM's floating IP, through the router's "
                        "DNAT (docs/routers.md); broadcast is N/A across a router (default: %(default)s)")
    s.add_argument("--test", action="append", dest="tests", choices=COMPARE_FAMILIES,
                   help="only this family of the battery (repeat for several; default: all)")
    s.add_argument("--ports", type=int, default=20,
                   help="port_ready: new ports per step (default: %(default)s)")
    s.add_argument("--steps", type=int, default=2, help="port_ready: steps (default: %(default)s)")
    s.add_argument("--concurrency", type=int, default=8,
                   help="port_ready: ports in flight at once (default: %(default)s)")
    s.add_argument("--deadline-ms", type=float, default=10000.0,
                   help="port_ready: a port not ready within this is never ready (default: %(default)s)")
    s.add_argument("--probe-interval-ms", type=float, default=1.0,
                   help="port_ready: the first-packet probe's interval (default: %(default)s)")
    s.add_argument("--security-groups", action="store_true",
                   help="every port filtered by Neutron's default group, the kind's firewall in "
                        "every figure (docs/security-groups.md); a kind that cannot enforce "
                        "them is N/A. Compare with a run without: vnetbench report RUN RUN")
    from vnetbench.history import commands as history_commands
    history_commands.history_option(s.add_argument)
    s.set_defaults(func=cmd_compare)

    from vnetbench.testbed.model import NetType, VSwitchKind
    s = sub.add_parser("functional", help="the functional matrix (isolation, rate limiting, "
                                          "faults, migration) on the embedded testbed, or on "
                                          "libvirt guests / an OpenStack cloud (--backend)")
    options.add_arguments(s.add_argument)
    s.add_argument("--vswitch", action="append", choices=[k.value for k in VSwitchKind])
    s.add_argument("--network", action="append", choices=[t.value for t in NetType])
    s.add_argument("--strict", action="store_true",
                   help="a Fail of the system under test fails the run (default: recorded only)")
    s.add_argument("--quick", action="store_true",
                   help="every row on one network type per kind (vxlan where it is selected)")
    s.add_argument("--expect", metavar="FILE",
                   help="YAML of the verdict expected per kind (or kind/network) and row: a cell "
                        "that differs fails the run, one that meets it passes (docs/functional.md)")
    s.add_argument("--out", help="directory for matrix.json, matrix.md and junit.xml "
                                 "(default: results/functional-<time>)")
    s.add_argument("pytest_args", nargs=argparse.REMAINDER,
                   help="after '--': more pytest arguments (e.g. -k broadcast)")
    s.set_defaults(func=cmd_functional)

    s = sub.add_parser("report", help="HTML/Markdown/CSV comparison of stored result records")
    s.add_argument("results", nargs="+", metavar="RESULTS",
                   help="records.jsonl files or directories holding one (one run each)")
    s.add_argument("--out", help="output directory (default: the first RESULTS directory, "
                                 "else results/report-<time>)")
    s.add_argument("--format", type=_formats, default=["html", "md", "csv"],
                   help="comma-separated: html,md,csv (default: all)")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("demo", help="reachability and RTT of VM pairs for every vSwitch x network type")
    s.add_argument("--vswitch", action="append", choices=VSWITCH_CHOICES)
    s.add_argument("--network", action="append", choices=NETWORK_CHOICES)
    s.add_argument("--count", type=int, default=20, help="pings per direction")
    s.add_argument("--results", default="results", help="directory for the JSON record")
    s.add_argument("-q", "--quiet", action="store_true")
    s.set_defaults(func=cmd_demo)
    return p


if __name__ == "__main__":
    sys.exit(main())
