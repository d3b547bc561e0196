"""``python -m vnetbench.aio root build | list | purge | smoke``: the all-in-one cloud's root in
the cache (vnetbench.aio.rootbuild, tools/aio/README.md)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from vnetbench import signals
from vnetbench.aio import release, rootbuild, rootcache
from vnetbench.errors import VnetbenchError


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="aio root", description="the all-in-one cloud's root: "
                                 "Debian packages of one release in a directory of the cache")
    ap.add_argument("command", choices=("build", "list", "purge", "smoke"))
    ap.add_argument("--release", help="the release (a file of src/vnetbench/aio/releases; build, "
                                      "smoke: required; purge: only its roots, default every root)")
    ap.add_argument("--cache", default=str(rootcache.default_cache()),
                    help="the roots' cache directory (default %(default)s)")
    return ap


def main(argv) -> int:
    args = parser().parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)   # noqa: E731
    try:
        cache = rootcache.check_cache(Path(args.cache))
        rel = release.load(args.release) if args.release is not None else None
        if args.command in ("build", "smoke") and rel is None:
            raise VnetbenchError(f"aio root {args.command}: --release is required; use one of: "
                                 f"{', '.join(release.names())}")
        if args.command == "smoke":
            print(json.dumps(smoke(cache, rel)))
        elif args.command == "build":
            previous = signal.signal(signal.SIGTERM, signals.handler)    # unwinds like Ctrl-C
            try:
                final, _ = rootbuild.build(rel, cache, progress=log)
            finally:                # a caller in this process keeps its own handler
                signal.signal(signal.SIGTERM, previous)
            print(final / "root")
        elif args.command == "list":
            print("\n".join(listing(cache)) or f"aio root: no roots in {cache}")
        else:
            for line in purge(cache, rel):
                log(line)
    except VnetbenchError as exc:
        log(str(exc))
        return 2
    except KeyboardInterrupt:
        log("aio root: interrupted; the partial root was removed (if anything is left, "
            "'vnetbench cleanup' removes it)")
        return 130
    return 0


def listing(cache: Path) -> list[str]:
    """One line per cached root: its state, size, packages, and whether the release
    file still has its key."""
    current = {r.name: r.key for r in map(release.load, release.names())}
    out = []
    for where, kind in rootcache.entries(cache):
        if kind == "partial":
            out.append(f"{where.name}  partial (a build in progress, or interrupted: "
                       "'vnetbench cleanup' removes it)")
            continue
        name, key = rootcache.ENTRY_RE.match(where.name).groups()
        fresh = "current" if current.get(name) == key else "stale (its release file changed)"
        rel = release.load(name) if name in current else None
        problem = rootcache.marker_problem(where, rel) if rel and current[name] == key else ""
        if problem:
            out.append(f"{where.name}  damaged: {problem} ('root purge' removes it)")
            continue
        marker = _marker(where)
        out.append(f"{where.name}  {fresh}  {marker.get('size_bytes', 0) / 1e9:.2f} GB  "
                   f"{len(marker.get('installed', {}))} packages  built "
                   f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime(marker.get('built', 0)))}")
    return out


def smoke(cache: Path, rel) -> dict:
    """OVS and OVN started from REL's cached root (vnetbench.aio.rootsmoke)."""
    from vnetbench.aio import rootsmoke
    if rootcache.cached(cache, rel) is None:
        raise VnetbenchError(f"aio root smoke: no complete {rel.name} root in {cache}; run "
                             f"'python -m vnetbench.aio root build --release {rel.name}' first")
    return rootsmoke.smoke(rootcache.entry(cache, rel) / "root")


def _marker(where: Path) -> dict:
    try:
        marker = json.loads((where / rootcache.MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def purge(cache: Path, rel) -> list[str]:
    """Remove the cached roots (of REL only, if given) and the builds' logs; partial roots
    are their builds' (running, or 'vnetbench cleanup''s)."""
    lines = []
    for where, kind in rootcache.entries(cache):
        if kind == "partial" or (rel and not where.name.startswith(f"{rel.name}-")):
            continue
        rootcache.remove_tree(where)
        lines.append(f"aio root: removed {where}")
    for log in sorted(cache.glob(f"{rel.name if rel else '*'}-*.log")) if cache.is_dir() else []:
        if rootcache.ENTRY_RE.match(log.name[:-4]) and log.is_file() and not log.is_symlink():
            log.unlink()
    return lines or [f"aio root: no cached root{' of ' + rel.name if rel else ''} in {cache}"]
