"""The ``vnetbench testbed`` commands (up, status, exec, down, capabilities, validate,
schema), ``cleanup`` and ``fault``: the handlers ``vnetbench.cli`` dispatches to. Library
code raises; only ``cli.main`` exits."""

from __future__ import annotations

import json
import os
import sys

from vnetbench.errors import VnetbenchError
from vnetbench.testbed.options import build_options


def online_cpus():
    return sorted(os.sched_getaffinity(0))


def progress(quiet):
    return (lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))


def cmd_up(args):
    from vnetbench.monitor import server, watch
    from vnetbench.testbed.loader import load
    testbed = load(args.file, online_cpus=online_cpus())
    mon = server.attach(args.monitor) if args.monitor else None
    dep = watch.up(testbed, mon, backend=args.backend, progress=progress(args.quiet),
                   **_backend_options(args))
    st = dep.status()
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        print(f"run {dep.run_id} up: {st['name']} ({st['vswitch']} over {st['network']}, "
              f"tenant MTU {st['tenant_mtu']}) in {st['up_seconds']:.2f} s")
        _print_vms(st)
        print(f"exec: vnetbench testbed exec --run {dep.run_id} VM -- CMD ...   "
              f"down: vnetbench testbed down --run {dep.run_id}")


def _backend_options(args) -> dict:
    return build_options(args)


def _print_vms(st):
    for vm in st["vms"]:
        nics = ", ".join(f"eth{i} {n['ip']} ({n['vnet']})" for i, n in enumerate(vm["nics"]))
        print(f"  {vm['name']:<12} on {vm['host']:<6} cpus {','.join(map(str, vm['cpus'])):<5} {nics}")


def cmd_status(args):
    from vnetbench.state import TESTBED, find_run, runs
    from vnetbench.testbed import deployment
    sts = []
    for run in [find_run(args.run)] if args.run else runs(TESTBED):
        try:
            sts.append(deployment.of(run).status())
        except VnetbenchError as exc:       # damaged run directory: say so, keep listing
            sts.append({"run_id": run.run_id, "status": "damaged", "error": str(exc)})
    if args.json:
        print(json.dumps(sts, indent=2))
        return
    if not sts:
        print("no testbed is up")
    for st in sts:
        if st["status"] == "damaged":
            print(f"run {st['run_id']} [damaged] {st['error']}")
            continue
        print(f"run {st['run_id']} [{st['status']}] {st['name']}: {st['vswitch']} over "
              f"{st['network']}" + (f", datapath {st['ovs_datapath']}" if st["ovs_datapath"] else "")
              + (f", {st['ovs_ports']} ports" if st.get("ovs_ports") else ""))
        _print_vms(st)
        if st.get("stack"):
            print(f"  stack        {st['stack']} on cloud {st.get('cloud')}")
        for warning in st.get("warnings") or ():
            print(f"  warning: {warning}")
        ctl = st.get("controller")
        if ctl:
            daemons = ", ".join(f"{n} {pid or 'stopped'}" for n, pid in ctl["daemons"].items())
            print(f"  controller   netns {ctl['netns']}: {daemons or 'no daemons'}")
        for err in st["errors"]:
            print(f"  teardown error: {err}")


def cmd_exec(args):
    from vnetbench.testbed import deployment
    if not args.command:
        raise VnetbenchError("exec: no command given; write it after '--', e.g. "
                             "vnetbench testbed exec same-a -- ping -c 3 198.19.1.2")
    dep = deployment.attach(args.run)
    try:
        argv = dep.host_argv(args.vm, args.command) if args.host else dep.vm_argv(args.vm, args.command)
    except KeyError:
        what = "host" if args.host else "VM"
        names = [x.name for x in (dep.testbed.hosts if args.host else dep.testbed.vms)]
        raise VnetbenchError(f"run {dep.run_id}: no {what} named {args.vm!r}; "
                             f"use one of: {', '.join(names)}") from None
    os.execvp(argv[0], argv)


def cmd_down(args):
    from vnetbench.state import find_run
    from vnetbench.testbed import deployment
    run = find_run(args.run)
    problem = run.describe()
    if problem:                         # damaged: the journal alone is enough to remove it
        errors = deployment.teardown(run)
        print(f"run {run.run_id} ({problem}): " + ("removed" if not errors else "; ".join(errors)))
        return 1 if errors else 0
    from vnetbench.monitor import watch
    dep = deployment.of(run)
    watch.settle(dep)
    errors = dep.down()
    if errors:
        for err in errors:
            print(f"vnetbench: teardown error: {err}", file=sys.stderr)
        print(f"vnetbench: run {dep.run_id} only partly removed; retry with "
              f"'vnetbench cleanup --run {dep.run_id}'", file=sys.stderr)
        return 1
    print(f"run {dep.run_id} down")


def cmd_cleanup(args):
    from vnetbench.aio import registry
    from vnetbench.state import RunBusyError, find_run, runs, stale_new_dirs
    from vnetbench.testbed.deployment import remove_stale, teardown
    targets = [find_run(r, kind=None) for r in args.run] if args.run else runs()
    if args.backend:
        targets = [r for r in targets if _cleanup_backend(r) == args.backend]
    failed = 0
    for run in targets:
        # an AIO's: said before its `down` (which takes the state dir's meta.json)
        what = f" ({registry.fate(run)})" if registry.is_aio(run) else ""
        try:
            errors = teardown(run)
        except RunBusyError as exc:      # being built or torn down by a live process
            print(f"run {run.run_id}: {exc}")
            continue
        failed += bool(errors)
        print(f"run {run.run_id}: " + ("removed" + what if not errors else "; ".join(errors)))
    stale = [] if args.run or args.backend else remove_stale(stale_new_dirs())
    if not targets and not stale:
        print("nothing to clean up")
    return 1 if failed else 0


def _cleanup_backend(run) -> str | None:
    """The ``cleanup --backend`` choice RUN answers to: "aio" for an all-in-one cloud's
    registration or root build (never any testbed backend's), a testbed's backend (netns for a run from
    before the key), none for a monitor."""
    from vnetbench.aio.registry import is_aio
    from vnetbench.state import AIO_ROOT, TESTBED
    if is_aio(run) or run.meta().get("kind") == AIO_ROOT:
        return "aio"
    meta = run.meta()
    return meta.get("backend", "netns") if meta.get("kind", TESTBED) == TESTBED else None


def cmd_fault(args):
    from vnetbench.faults import Faults
    from vnetbench.testbed import deployment
    dep = deployment.attach(args.run)
    tb = dep.testbed
    for what, name, names in (("VM", getattr(args, "vm", None), [v.name for v in tb.vms]),
                              ("host", getattr(args, "host", None), [h.name for h in tb.hosts]),
                              ("host", getattr(args, "to", None), [h.name for h in tb.hosts]),
                              ("VM", getattr(args, "peer", None), [v.name for v in tb.vms])):
        if name is not None and name not in names:
            raise VnetbenchError(f"fault: run {dep.run_id} has no {what} named {name!r}; "
                                 f"use one of: {', '.join(names)}")
    if getattr(args, "interval", 0.005) <= 0 or getattr(args, "interval", 0.005) > 0.01:
        raise VnetbenchError(f"fault migrate: --interval {args.interval} s; use 0 < interval <= 0.01")
    from vnetbench import outfiles
    outfiles.check_file(args.results, "--results", parents=True)     # before the fault
    f = Faults(dep, results=args.results)
    action = args.action
    if action in ("stop", "kill", "start", "restart"):
        call = {"stop": f.controller_stop, "kill": f.controller_kill, "start": f.controller_start,
                "restart": f.controller_restart}[action]
        done = call(args.component)
        print(f"run {dep.run_id}: controller {action}: {', '.join(done)}")
    elif action in ("partition", "heal"):
        done = getattr(f, action)(args.host)
        print(f"run {dep.run_id}: management network {action}: {', '.join(done)}")
    elif action == "vswitch-restart":
        f.vswitch_restart(args.host)
        print(f"run {dep.run_id}: vSwitch of {args.host} restarted")
    else:
        out = f.migrate(args.vm, args.to, live=not args.cold, peer=args.peer,
                        interval_s=args.interval)
        print(json.dumps(out) if args.json else
              f"run {dep.run_id}: {args.vm} migrated to {args.to}"
              + (f" (compute node {out['to_node']})" if out.get("to_node") else "")
              + f" ({'cold' if args.cold else 'live'})"
              + (f": outage {out['outage_s']:.1f} s" if "outage_s" in out else "")
              + (f": downtime {out['downtime_ms']:.0f} ms ({out['lost']}/{out['sent']} probes "
                 f"lost at {args.interval * 1000:.0f} ms)" if "downtime_ms" in out else ""))
    print(f"fault record: {args.results}")


def fault_parsers(sub):
    fault = sub.add_parser("fault", help="inject a fault into a testbed (recorded in the results)")
    acts = fault.add_subparsers(required=True, metavar="FAULT", dest="action")

    def add(name, text):
        s = acts.add_parser(name, help=text)
        s.add_argument("--run", help="run id or testbed name (default: the only run)")
        s.add_argument("--results", default="results/faults.jsonl",
                       help="JSON-lines file the fault record is appended to")
        s.set_defaults(func=cmd_fault)
        return s
    for name, text in (("stop", "stop the controller gracefully (SIGTERM)"),
                       ("kill", "kill the controller (SIGKILL)"),
                       ("start", "start the controller again"),
                       ("restart", "stop and start the controller")):
        add(name, text).add_argument("--component", help="one controller process (default: all), "
                                     "e.g. osken-0, or northd (northd-2 ...) / sb / nb for ovn")
    for name, text in (("partition", "cut the management network of a host (default: all)"),
                       ("heal", "restore the management network")):
        add(name, text).add_argument("--host")
    add("vswitch-restart", "restart the vSwitch of one host").add_argument("host")
    s = add("migrate", "move a VM to another host keeping MAC and IP (live by default; on a "
                       "cloud Nova moves it to the compute node of HOST's servers, as admin)")
    s.add_argument("vm")
    s.add_argument("to", metavar="HOST")
    s.add_argument("--cold", action="store_true", help="shut down, move, boot")
    s.add_argument("--peer", help="VM that probes the migrating VM (live; default: one on its vnet)")
    s.add_argument("--interval", type=float, default=0.005, help="probe spacing, s (<= 0.01)")
    s.add_argument("--json", action="store_true")


def cmd_capabilities(args):
    from vnetbench.testbed.capabilities import probe
    caps = probe()
    if args.json:
        print(json.dumps(caps.to_dict(), indent=2))
        return
    print(f"root: {'yes' if caps.root else 'no'}   OVS: {caps.ovs_version or 'not installed'}"
          f" (datapath here: {caps.ovs_datapath})")
    print("kernel: " + ", ".join(f"{k} {'yes' if v is None else 'no'}" for k, v in caps.links.items()))
    print()
    for kind, ntype, reason in caps.matrix():
        print(f"  {kind.value:<13} {ntype.value:<7} {'supported' if reason is None else 'NO: ' + reason}")


def cmd_validate(args):
    from vnetbench.testbed.loader import load
    tb = load(args.file, online_cpus=online_cpus())
    print(f"{args.file}: ok: {tb.name}: {tb.vswitch.kind} over {tb.network.type}, "
          f"{_count(tb.hosts, 'host')}, {_count(tb.vnets, 'vnet')}, {_count(tb.vms, 'VM')}, "
          f"tenant MTU {tb.network.tenant_mtu}")


def _count(items, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def cmd_schema(args):
    from vnetbench.testbed.loader import schema
    print(json.dumps(schema(), indent=2))
