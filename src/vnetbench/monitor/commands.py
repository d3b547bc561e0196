"""``vnetbench monitor up|status|query|down``: a Prometheus for runs, by hand.

    vnetbench monitor up                       # prints the id: export VNETBENCH_MONITOR=ID
    vnetbench testbed up FILE --monitor ID     # or: any Rally task (vnetbench_testbed context)
    vnetbench monitor query 'vnetbench_result{metric="gbps"}'
    vnetbench monitor down
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def cmd_up(args):
    from vnetbench import outfiles
    from vnetbench.monitor import server
    if args.data is not None:           # before anything is started ('' refused, not the default)
        outfiles.check_dir(args.data, "--data")
    mon = server.up(Path(args.data) if args.data is not None else None,
                    progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"monitor {mon.id} up: Prometheus 127.0.0.1:{server.PROMETHEUS_PORT} and Pushgateway "
          f"127.0.0.1:{server.PUSHGATEWAY_PORT} in namespace {mon.ns}; data in {mon.data_dir}")
    print(f"use it:  export VNETBENCH_MONITOR={mon.id}   (Rally tasks and 'vnetbench testbed up' "
          f"attach to it)")
    print(f"query:   vnetbench monitor query 'vnetbench_result'   stop: vnetbench monitor down --run {mon.id}")


def _monitor(args):
    from vnetbench.monitor import server
    return server.attach(args.run or os.environ.get("VNETBENCH_MONITOR"))


def cmd_status(args):
    from vnetbench.monitor import server
    from vnetbench.state import MONITOR, runs
    mons = [server.Monitor(r) for r in runs(MONITOR)]
    if not mons:
        print("no monitor is up")
    for mon in mons:
        meta = mon.run.meta()
        alive = {n: server.pid_alive(mon, n) for n in server.PROGRAMS}
        targets = sorted(p.stem for p in mon.targets_dir.glob("*.json"))
        print(f"monitor {mon.id} [{meta.get('status')}] namespace {mon.ns}, data {meta.get('data_dir')}; "
              + ", ".join(f"{n} {'running' if a else 'NOT running'}" for n, a in alive.items())
              + f"; testbeds watched: {', '.join(targets) or 'none'}")


def cmd_query(args):
    mon = _monitor(args)
    result = query(mon, args.expr)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    series = result if all(isinstance(r, dict) for r in result) else [{"value": result}]
    for r in series:             # vector, matrix (a range selector), or a scalar/string
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(r.get("metric", {}).items()))
        value = r["value"][1] if "value" in r else f"{len(r.get('values', []))} samples"
        print(f"{{{labels}}} {value}")


def query(mon, expr: str):
    """An instant query, with Prometheus' refusal or absence as one-line errors."""
    from vnetbench.errors import VnetbenchError
    from vnetbench.inputs import excerpt
    try:
        return mon.query(expr)
    except RuntimeError as exc:        # HTTP 4xx/5xx: Prometheus' own reason
        raise VnetbenchError(f"monitor {mon.id}: Prometheus rejected {excerpt(expr)}: "
                             f"{excerpt(str(exc), 200)}; fix the PromQL") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VnetbenchError(f"monitor {mon.id}: Prometheus does not answer "
                             f"({excerpt(str(exc) or type(exc).__name__, 120)}); 'vnetbench monitor "
                             f"status' shows what runs; restart it with 'vnetbench monitor down' "
                             f"and 'vnetbench monitor up'") from None


def cmd_down(args):
    mon = _monitor(args)
    data = mon.run.meta().get("data_dir")     # read before the run directory goes
    errors = mon.down()
    if errors:
        print(f"monitor {mon.id}: teardown incomplete: {errors[0]}; run 'vnetbench cleanup "
              f"--run {mon.id}'", file=sys.stderr)
        return 1
    print(f"monitor {mon.id} down; Prometheus data kept in {data}" if data else
          f"monitor {mon.id} down (its data directory was not recorded)")


def add_parsers(sub) -> None:
    mon = sub.add_parser("monitor", help="Prometheus + Pushgateway for runs (collectors, results)"
                         ).add_subparsers(dest="monitor_cmd", required=True)
    s = mon.add_parser("up", help="start Prometheus and a Pushgateway in a namespace of their own")
    s.add_argument("--data", help="Prometheus data directory (default: results/monitor-ID)")
    s.set_defaults(func=cmd_up)
    mon.add_parser("status", help="monitors that are up").set_defaults(func=cmd_status)
    s = mon.add_parser("query", help="an instant PromQL query against a monitor")
    s.add_argument("expr")
    s.add_argument("--run", help="monitor id (default: $VNETBENCH_MONITOR or the only one)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_query)
    s = mon.add_parser("down", help="stop a monitor (its data stays)")
    s.add_argument("--run", help="monitor id (default: $VNETBENCH_MONITOR or the only one)")
    s.set_defaults(func=cmd_down)
