"""`vnetbench reproduce SEED`: the seed's data-plane table measured here, the seed's figure
beside each measured one, and each of its claims judged (vnetbench.reproduce.judge)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vnetbench.reproduce import seed


def add_parsers(sub) -> None:
    s = sub.add_parser("reproduce", help="a seed's data-plane table measured here, beside the "
                                         "seed's figures, with each of its claims judged")
    s.add_argument("seed", choices=seed.available(), help="the seed document (shared/seeds/NNN_...)")
    s.add_argument("--profile", choices=["smoke", "quick", "full"], default="quick",
                   help="the comparison profile the seed's columns are measured with")
    s.add_argument("--from", dest="source", metavar="RESULTS",
                   help="judge these records (a compare or reproduce directory, or a records.jsonl) "
                        "instead of measuring")
    s.add_argument("--placement", action="append", choices=["same-host", "cross-host"],
                   help="only these VM pair placements (default: those the seed's rows need)")
    s.add_argument("--seed-systems-only", action="store_true",
                   help="measure only the columns that model the seed's systems, not the ones "
                        "shown beside them (about 40%% less time for seed 003)")
    s.add_argument("--results", default="results", help="directory for the run's records and reports")
    s.add_argument("--no-monitor", action="store_true", help="run without Prometheus")
    from vnetbench.history import commands as history
    history.history_option(s.add_argument)
    s.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args) -> int:
    # imported here, not at parser time: the report pulls in matplotlib, which every other
    # command must not pay for (nor its complaints about a HOME it cannot write)
    from vnetbench.report import table
    from vnetbench import outfiles
    from vnetbench.results.load import load
    from vnetbench.reproduce import judge, render
    from vnetbench.history import commands as history
    s = seed.load(args.seed)
    names = [f"reproduce-{s.id}.{ext}" for ext in ("txt", "md", "json")]
    # where the files go, checked before the records are read or anything is measured
    if args.source:
        outfiles.check_dir(_dir(Path(args.source)), "--from", names)
    else:
        outfiles.check_dir(args.results, "--results")
    history.check_history(args.history)
    if args.source:
        runs, out = load([args.source]), _dir(Path(args.source))
    else:
        from vnetbench import compare
        columns = list(dict.fromkeys(s.systems.values())) if args.seed_systems_only else s.columns
        print(f"measuring the columns of seed {s.id}: {', '.join(columns)} ({args.profile})",
              file=sys.stderr, flush=True)
        routed = s.measured_paths != ["l2"]     # a router's pairs beside the bridge's, one testbed
        res = compare.run(args.profile, out_dir=Path(args.results), monitor=not args.no_monitor,
                          columns=columns, name=f"reproduce-{s.id}", tests=families(s),
                          task_args=s.task_args,
                          testbed={"placements": args.placement or s.placements,
                                   "path": s.measured_paths if routed else None})
        runs, out = load([res["dir"]]), res["dir"]
    results = judge.judge(s, table.build(runs))
    text = render.plain(s, results)
    files = dict(zip(names, (text, render.markdown(s, results),
                             json.dumps(render.to_dict(s, results), indent=1) + "\n")))
    written = outfiles.write_files(out, files, "--from" if args.source else "--results")  # all or none
    print(text)
    for path in written:
        print(path)
    history.add_to_history(args.history, args.source or out)
    return 0


#: record test -> the battery family (Rally scenario) that measures it
FAMILY = {"rfc2544_throughput": "rfc2544", "rfc2544_latency": "rfc2544", "rfc2544_frame_loss": "rfc2544",
          "rfc2544_back_to_back": "rfc2544", "udp_fairness": "fairness"}


def families(s: seed.Seed) -> list[str]:
    """Only the families the seed's rows need: seed 004 needs one, not the whole battery."""
    return list(dict.fromkeys(FAMILY.get(r.test, r.test) for r in s.rows))


def _dir(source: Path) -> Path:
    return source if source.is_dir() else source.parent
