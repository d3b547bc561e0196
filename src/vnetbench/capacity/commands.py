"""``vnetbench capacity RESULTS...`` (a capacity profile from measured records) and
``vnetbench plan WORKLOAD HOSTS --capacity PROFILE`` (both placements, predicted load
per host; ``--verify`` measures them on the embedded testbed; ``--openstack`` the hand-off)."""

from __future__ import annotations

import argparse
import re
import sys

import yaml

from vnetbench import outfiles
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import one_line


def add_parsers(sub) -> None:
    s = sub.add_parser("capacity", help="a capacity profile (per host vSwitch capacity per kind x "
                                        "network type x role) from scale and battery records")
    s.add_argument("results", nargs="+", metavar="RESULTS",
                   help="records.jsonl files or directories of compare / scale runs")
    s.add_argument("--out", default="capacity-profile.yaml", help="the profile (YAML) to write")
    s.set_defaults(func=cmd_capacity)

    s = sub.add_parser("plan", help="place a workload on hosts two ways (network-agnostic, network-"
                                    "aware) with each host's predicted vSwitch load and CPU")
    s.add_argument("workload", metavar="WORKLOAD", help="VMs and flows (schemas/workload.schema.json)")
    s.add_argument("hosts", metavar="HOSTS", help="compute hosts (schemas/hosts.schema.json)")
    s.add_argument("--capacity", required=True, metavar="PROFILE", help="a profile from 'vnetbench capacity'")
    s.add_argument("--format", choices=("table", "md", "json", "html"), default="table")
    s.add_argument("--out", metavar="FILE", help="write there instead of standard output")
    s.add_argument("--verify", action="store_true",
                   help="build each placement on the embedded testbed, run its flows at their planned "
                        "rates and report predicted vs measured per host (root)")
    s.add_argument("--seconds", type=_seconds, default=5,
                   help=f"--verify: seconds of load per placement (1..{MAX_VERIFY_SECONDS})")
    s.add_argument("--openstack", metavar="FILE",
                   help="also write the OpenStack hand-off (OVS agent inventories, QoS policies) there")
    s.add_argument("--bridge", type=_bridge, default="br-data",
                   help="--openstack: the physnet bridge of bridge_mappings (an interface name)")
    s.set_defaults(func=cmd_plan)


MAX_VERIFY_SECONDS = 3600
_BRIDGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")      # IFNAMSIZ - 1


def _seconds(text: str) -> int:
    """A whole number of seconds in 1..MAX_VERIFY_SECONDS (argparse makes a refusal one line)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if not 1 <= value <= MAX_VERIFY_SECONDS:
        raise argparse.ArgumentTypeError(f"{value} is out of range: give 1..{MAX_VERIFY_SECONDS}")
    return value


def _bridge(text: str) -> str:
    """An OVS bridge name as bridge_mappings takes it: an interface name, printed into the
    agent's configuration (no ':' or ',' which separate its fields, no control characters)."""
    if not _BRIDGE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a bridge name: give 1-15 letters, digits, "
                                         "'_', '.' or '-', e.g. br-data")
    return text


def cmd_capacity(args) -> int:
    from vnetbench.capacity import profile
    from vnetbench.results.load import load
    out = outfiles.check_file(args.out, "--out")        # before the records are read
    runs = load(args.results)
    doc = profile.build([r for run in runs for r in run.records], [run.path for run in runs])
    if not doc["cells"]:
        raise VnetbenchError(f"{args.results[0]}: no record says what a vSwitch carries (none of "
                             f"{', '.join(profile.FAMILIES)}); run rally-tasks/scale.yaml (and "
                             "'vnetbench compare') first")
    from vnetbench.capacity import selfcheck
    selfcheck.check(doc, runs)          # never write what plan would refuse
    outfiles.write_file(out, "# vnetbench capacity profile (schemas/capacity-profile.schema.json)\n"
                        + yaml.safe_dump(doc, sort_keys=False), "--out")
    print(summary(doc))
    if len(runs) > 1:
        print(f"{len(runs)} runs ({', '.join(run.name for run in runs)}): {profile.COMBINED}")
    print(f"profile: {out}")
    return 0


def summary(doc: dict) -> str:
    """One line per cell and role: capacity (how known), CPU per Gbit/s at the measured loads."""
    lines = []
    for c in doc["cells"]:
        head = f"{c['vswitch']}/{c['network']} ({c.get('backend')}, datapath {c.get('datapath') or 'kernel'}, MTU {c.get('tenant_mtu')})"
        lines.append(head)
        for role, r in c["roles"].items():
            cap = r["capacity_gbps"]
            costs = ", ".join(f"{_g(p['pct_per_gbps']['mean'])}%/Gbit/s at {_g(p['load_gbps']['mean'])}"
                              for p in r["points"] if "pct_per_gbps" in p)
            lines.append(f"  {role:4} capacity {_g(cap['mean'])} Gbit/s per {r.get('dataplane_cpus', 1)} CPU "
                         f"({cap['how']}); data-plane CPU {costs}")
            if r.get("plateau_gbps"):
                lines.append(f"       plateau {_g(r['plateau_gbps']['mean'])} Gbit/s, not the vSwitch's: "
                             f"{r['plateau_gbps']['why']}")
        for placement, figs in (c.get("single_pair") or {}).items():
            if (figs.get("tcp") or {}).get("gbps_per_cpu", {}).get("mean"):
                lines.append(f"  one {placement} pair: {_g(figs['tcp']['gbps_per_cpu']['mean'])} Gbit/s per "
                             "data-plane CPU (TCP)")
            if (figs.get("udp") or {}).get("pps_per_cpu", {}).get("mean"):
                lines.append(f"  one {placement} pair: {figs['udp']['pps_per_cpu']['mean']:,.0f} packets/s per "
                             "data-plane CPU (UDP)")
        for placement, f in (c.get("new_conn_s") or {}).items():
            lines.append(f"  new connections/s ({placement}): {'' if f.get('hi') else '>='}{_g(f['mean'])}"
                         + (f" (failed at {_g(f['hi'])})" if f.get("hi") else ""))
        if c["unstable"]:
            lines.append(f"  UNSTABLE: {', '.join(c['unstable'])}")
    return "\n".join(lines)


def _g(x) -> str:
    """A figure of the summary: '-' where the records gave none."""
    return "-" if x is None else f"{x:g}"


def cmd_plan(args) -> int:
    from vnetbench.capacity import files, planner
    to_stdout = args.out is None or args.out == "-"
    outputs = ([] if to_stdout else [(args.out, "--out")]) + \
        ([] if args.openstack in (None, "-") else [(args.openstack, "--openstack")])
    outfiles.check_files(outputs)           # before planning (and --verify's testbeds)
    workload = files.load_workload(args.workload)
    hosts = files.load_hosts(args.hosts)
    prof = files.load_profile(args.capacity)
    out = planner.plan(workload, hosts, prof, one_line(str(args.capacity), 120))
    if args.verify:
        _verify(args, workload, hosts, out)
    text = planner.render(out, args.format)
    if args.verify and args.format in ("table", "md"):
        text += "\n" + verify_text(out)
    handoff = None
    if args.openstack is not None:
        from vnetbench.capacity import openstack
        handoff = openstack.render(openstack.handoff(prof, hosts, workload, args.bridge))
    content = {"--out": text, "--openstack": handoff}
    written = outfiles.write_set([(path, content[flag], flag) for path, flag in outputs])  # all or none
    if to_stdout:
        sys.stdout.write(text)
    if args.openstack == "-":
        sys.stdout.write(handoff)
    for path in written:
        print(path)
    return 1 if "infeasible" in out["placements"]["aware"] else 0


def _verify(args, workload, hosts, out) -> None:
    import os

    from vnetbench.capacity import verify
    progress = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    for name, p in out["placements"].items():
        if "where" in p:
            p["verify"] = verify.run(workload, hosts, p["hosts"], p["where"], sorted(os.sched_getaffinity(0)),
                                     args.seconds, progress, name=f"plan-{name}",
                                     profile_machine=_cell_machine(out, hosts, p["where"]))


def _cell_machine(out: dict, hosts, where: dict) -> dict | None:
    """The machine of the profile cell the verified hosts use (one kind: verify refuses
    mixed kinds)."""
    kinds = {h.vswitch for h in hosts.hosts if h.name in set(where.values())}
    return next((m["machine"] for m in out["profile"].get("machines") or []
                 if m["vswitch"] in kinds and m["network"] == hosts.network), None)


def verify_text(out: dict) -> str:
    """The verification under the plan: per placement, the machine comparison, a row per
    host (its verdict, the other work on its CPUs) and the machine's total over the step."""
    from vnetbench.capacity import machine, planner, verify
    lines = [f"verify (measured on the embedded testbed; within: ±{verify.TOLERANCE:.0%} of the "
             f"prediction, CPU at least ±{verify.CPU_FLOOR:g} points; not judged where the profile "
             f"was measured on another machine, or other work took more than "
             f"{verify.OTHER_WORK_MAX_PCT:g}% of a host's CPUs)"]
    for name, p in out["placements"].items():
        v = p.get("verify")
        if not v:
            continue
        lines.append(f"{planner.ALGORITHMS[name]}:")
        m = v.get("machine") or {}
        if m.get("differences"):
            lines.append(f"  NOT COMPARABLE: profile measured on {machine.describe(m.get('profile'))}; verified "
                         f"on {machine.describe(m.get('here'))} (differs: "
                         f"{machine.describe_differences(m['differences'])}): the errors are shown, not judged")
        elif m:
            lines.append(f"  same machine as the profile: {machine.describe(m.get('here'))}")
        rows = [[r["host"], f"{r['predicted_gbps']:.3g}", f"{r['measured_gbps']:.3g}", _pct(r["gbps_error_pct"]),
                 f"{r['predicted_cpu_pct']:.1f}", _n(r["measured_cpu_pct"]), _pct(r["cpu_error_pct"]),
                 _other(r.get("other_work")), _verdict(r)] for r in v["hosts"]]
        lines.append(planner._plain(["host", "Gbit/s pred.", "meas.", "error", "CPU % pred.", "meas.",
                                     "error", "other work", "verdict"], rows))
        for r in v["hosts"]:
            o = r.get("other_work") or {}
            if o.get("busy"):
                lines.append(f"  {r['host']}: other work on these CPUs: {o['other_work_pct']:g}% (more than "
                             f"{verify.OTHER_WORK_MAX_PCT:g}%): its figures are not the vSwitch's")
        mc = v.get("machine_cpu") or {}
        if mc.get("other_work_pct") is not None:
            lines.append(f"  machine over the step: {mc['busy_pct']:g}% of its {mc['cpus']} CPU(s) busy, the "
                         f"testbed's own {mc['testbed_pct']:g}%, other work {mc['other_work_pct']:g}%")
        if v["failed"]:
            lines.append("failed flows: " + "; ".join(f"{f['pair']}: {f['error']}" for f in v["failed"]))
    return "\n".join(lines) + "\n"


def _other(o) -> str:
    if not o or o.get("other_work_pct") is None:
        return "-"
    return f"{o['other_work_pct']:.0f}%" + (" BUSY" if o.get("busy") else "")


def _verdict(r: dict) -> str:
    return {"within": "yes", "off": "NO", "busy": "not judged (busy)"}.get(r["verdict"], r["verdict"])


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.0f}%"


def _n(x) -> str:
    return "-" if x is None else f"{x:.1f}"
