"""Write the dashboards' JSON into dashboards/json/<uid>.json (sorted keys, so the
committed files only change when a dashboard does); --check only compares."""

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.cog.encoder import JSONEncoder

from . import efficiency, history, overlay_comparison, port_ready, scale_steps, vswitch_cpu

MODULES = (overlay_comparison, vswitch_cpu, efficiency, scale_steps, port_ready)
#: dashboards over another datasource than Prometheus (the history's PostgreSQL), written beside them
OTHER_MODULES = (history,)
JSON_DIR = Path(__file__).resolve().parents[3] / "dashboards" / "json"


def dashboards(modules=MODULES) -> dict[str, dict]:
    """uid -> dashboard JSON (plain dicts, as Grafana reads them); the Prometheus ones
    unless ``modules`` says otherwise."""
    built = (module.build().build() for module in modules)
    return {board.uid: json.loads(json.dumps(board, cls=JSONEncoder)) for board in built}


def render(board: dict) -> str:
    return json.dumps(board, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def stale(out: Path) -> list[str]:
    """Files of `out` that differ from, are missing from, or are not in the
    freshly generated set."""
    fresh = {f"{uid}.json": render(board) for uid, board in dashboards(MODULES + OTHER_MODULES).items()}
    present = {p.name for p in out.glob("*.json")}
    return sorted(name for name in fresh.keys() | present
                  if name not in fresh or name not in present
                  or (out / name).read_text() != fresh[name])


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for uid, board in dashboards(MODULES + OTHER_MODULES).items():
        (out / f"{uid}.json").write_text(render(board))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=JSON_DIR)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the JSON in --out differs from freshly generated")
    args = parser.parse_args(argv)
    if args.check:
        differing = stale(args.out)
        for name in differing:
            print(f"{args.out / name}: not up to date; run "
                  "python -m vnetbench.dashboards.generate", file=sys.stderr)
        return 1 if differing else 0
    write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
