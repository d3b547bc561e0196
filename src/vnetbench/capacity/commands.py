"""``vnetbench capacity RESULTS...`` (a capacity profile from measured records) and
``vnetbench plan WORKLOAD HOSTS --capacity PROFILE`` (both placements, predicted load
per host; ``--verify`` measures them on the embedded testbed; ``--openstack`` the hand-off)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from vnetbench.errors import VnetbenchError


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
    s.add_argument("--seconds", type=int, default=5, help="--verify: seconds of load per placement")
    s.add_argument("--openstack", metavar="FILE",
                   help="also write the OpenStack hand-off (OVS agent inventories, QoS policies) there")
    s.add_argument("--bridge", default="br-data", help="--openstack: the physnet bridge of bridge_mappings")
    s.set_defaults(func=cmd_plan)


def cmd_capacity(args) -> int:
    from vnetbench.capacity import profile
    from vnetbench.report.load import load
    runs = load(args.results)
    doc = profile.build([r for run in runs for r in run.records], [run.path for run in runs])
    if not doc["cells"]:
        raise VnetbenchError(f"{args.results[0]}: no record says what a vSwitch carries (none of "
                             f"{', '.join(profile.FAMILIES)}); run rally-tasks/scale.yaml (and "
                             "'vnetbench compare') first")
    out = Path(args.out)
    from vnetbench.report.write import atomic_write
    atomic_write(out, "# vnetbench capacity profile (schemas/capacity-profile.schema.json)\n"
                 + yaml.safe_dump(doc, sort_keys=False))
    print(summary(doc))
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
            costs = ", ".join(f"{p['pct_per_gbps']['mean']:g}%/Gbit/s at {p['load_gbps']['mean']:g}"
                              for p in r["points"] if "pct_per_gbps" in p)
            lines.append(f"  {role:4} capacity {cap['mean']:g} Gbit/s per {r.get('dataplane_cpus', 1)} CPU "
                         f"({cap['how']}); data-plane CPU {costs}")
            if r.get("plateau_gbps"):
                lines.append(f"       plateau {r['plateau_gbps']['mean']:g} Gbit/s, not the vSwitch's: "
                             f"{r['plateau_gbps']['why']}")
        for placement, figs in (c.get("single_pair") or {}).items():
            if (figs.get("tcp") or {}).get("gbps_per_cpu", {}).get("mean"):
                lines.append(f"  one {placement} pair: {figs['tcp']['gbps_per_cpu']['mean']:g} Gbit/s per "
                             "data-plane CPU (TCP)")
            if (figs.get("udp") or {}).get("pps_per_cpu", {}).get("mean"):
                lines.append(f"  one {placement} pair: {figs['udp']['pps_per_cpu']['mean']:,.0f} packets/s per "
                             "data-plane CPU (UDP)")
        for placement, f in (c.get("new_conn_s") or {}).items():
            lines.append(f"  new connections/s ({placement}): {'' if f.get('hi') else '>='}{f['mean']:g}"
                         + (f" (failed at {f['hi']:g})" if f.get("hi") else ""))
        if c["unstable"]:
            lines.append(f"  UNSTABLE: {', '.join(c['unstable'])}")
    return "\n".join(lines)


def cmd_plan(args) -> int:
    from vnetbench.capacity import files, planner
    workload = files.load_workload(args.workload)
    hosts = files.load_hosts(args.hosts)
    prof = files.load_profile(args.capacity)
    out = planner.plan(workload, hosts, prof, args.capacity)
    if args.verify:
        _verify(args, workload, hosts, out)
    text = planner.render(out, args.format)
    if args.verify and args.format in ("table", "md"):
        text += "\n" + verify_text(out)
    _emit(text, args.out)
    if args.openstack:
        from vnetbench.capacity import openstack
        _emit(openstack.render(openstack.handoff(prof, hosts, workload, args.bridge)), args.openstack)
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


def _emit(text: str, out) -> None:
    """To FILE (written whole, then renamed into place), or standard output for none or '-'."""
    if out and out != "-":
        path = Path(out)
        if path.exists() and not path.is_file():     # /dev/stdout, a FIFO: never renamed over
            with open(path, "w") as f:
                f.write(text)
            return
        from vnetbench.report.write import atomic_write
        print(atomic_write(path, text))
    else:
        sys.stdout.write(text)
