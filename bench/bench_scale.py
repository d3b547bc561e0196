"""Scale: examples/scale-4x32.yaml (4 OVS hosts, 32 VMs, 8 vnets, VXLAN).

Measures bring-up (caps=None, i.e. including the capability probe, as the CLI),
reachability (every pair: one ping a -> b, -W 2), memory of each emulated host's
ovsdb-server + ovs-vswitchd (RSS and PSS, after the pings) and teardown.

    .venv/bin/python bench/bench_scale.py [--repeat 1] [--file examples/scale-4x32.yaml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (REPO, alive, daemon_pids, load_testbed, ping, probe_timer,  # noqa: E402
                     run_namespaces, show, stats, timed, vm_pairs, write_json)

from vnetbench.testbed.netns import builder  # noqa: E402

TARGET_UP_S = 20.0


def memory_kb(pid: int) -> dict:
    """VmRSS from /proc/PID/status and Pss from /proc/PID/smaps_rollup (None when unavailable)."""
    def field(path, name):
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(name + ":"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return None
    return {"rss_kb": field(f"/proc/{pid}/status", "VmRSS"),
            "pss_kb": field(f"/proc/{pid}/smaps_rollup", "Pss")}


def host_memory(dep) -> dict:
    """{host: {"daemons": {prog: {pid, rss_kb, pss_kb}}, "rss_kb": sum, "pss_kb": sum}};
    an SDN kind's controller namespace is one more "host" ("controller")."""
    out = {h.name: {"daemons": {}} for h in dep.testbed.hosts}
    for (host, prog), pid in daemon_pids(dep).items():
        out.setdefault(host, {"daemons": {}})["daemons"][prog] = {"pid": pid, **memory_kb(pid)}
    for h in out.values():
        for key in ("rss_kb", "pss_kb"):
            vals = [d[key] for d in h["daemons"].values()]
            h[key] = sum(vals) if vals and None not in vals else None
    return out


def reachability(dep) -> list[dict]:
    rows = []
    for name, placement, a, b in vm_pairs(dep.testbed):
        r = ping(dep, a, dep.ip(b), count=1, interval_s=0.2, reply_timeout_s=2)
        rows.append({"pair": name, "a": a, "b": b, "host_a": dep.testbed.vm(a).host,
                     "host_b": dep.testbed.vm(b).host, "dest": dep.ip(b),
                     "reached": r["received"] > 0, "rtt_ms": r.get("rtt_avg_ms")})
    return rows


def one_run(testbed) -> dict:
    with probe_timer() as probes:
        dep, up_s = timed(builder.up, testbed)
    try:
        pings, ping_s = timed(reachability, dep)
        mem = host_memory(dep)
        pids = daemon_pids(dep)
    finally:
        errors, down_s = timed(dep.down)
    left = run_namespaces(dep.run_id)
    daemons_left = [f"{h}/{p}={pid}" for (h, p), pid in pids.items() if alive(pid)]
    return {"run_id": dep.run_id, "up_s": up_s, "probe_s": sum(probes), "down_s": down_s,
            "ping_check_s": ping_s, "pairs": len(pings), "reached": sum(p["reached"] for p in pings),
            "pings": pings, "memory": mem, "teardown_errors": errors, "namespaces_left": left,
            "daemons_left": daemons_left,
            "clean": not (errors or left or daemons_left or dep.run.dir.exists())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(REPO / "examples" / "scale-4x32.yaml"))
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    tb = load_testbed(path=args.file)
    print(f"{tb.name}: {len(tb.hosts)} hosts, {len(tb.vms)} VMs, {len(tb.vnets)} vnets, "
          f"{tb.vswitch.kind} over {tb.network.type}, {len(tb.pairs)} pairs; {args.repeat} run(s)")
    runs = []
    for i in range(args.repeat):
        r = one_run(tb)
        runs.append(r)
        print(f"  #{i + 1}: up {r['up_s']:.2f} s (probe {r['probe_s']:.2f} s), "
              f"{r['reached']}/{r['pairs']} pairs reached, down {r['down_s']:.2f} s, "
              f"{'clean' if r['clean'] else 'LEFTOVERS'}", flush=True)
    print()

    up, down = stats(r["up_s"] for r in runs), stats(r["down_s"] for r in runs)
    show(["phase", "min s", "median s", "max s", "target"],
         [["up (incl. probe)", up["min"], up["median"], up["max"],
           f"<= {TARGET_UP_S:g} s: {'PASS' if up['max'] <= TARGET_UP_S else 'FAIL'}"],
          ["  probe", *(stats(r["probe_s"] for r in runs)[k] for k in ("min", "median", "max")), ""],
          ["down", down["min"], down["median"], down["max"], ""]],
         title=f"{tb.name}: bring-up / teardown ({args.repeat} run(s))")

    last = runs[-1]
    mib = lambda kb: None if kb is None else kb / 1024
    rows = []
    for host, m in last["memory"].items():
        d = m["daemons"]
        get = lambda prog, k: mib(d.get(prog, {}).get(k))
        rows.append([host, get("ovsdb-server", "rss_kb"), get("ovs-vswitchd", "rss_kb"),
                     mib(m["rss_kb"]), get("ovsdb-server", "pss_kb"), get("ovs-vswitchd", "pss_kb"),
                     mib(m["pss_kb"])])
    tot = lambda k: mib(sum(m[k] for m in last["memory"].values() if m[k] is not None))
    rows.append(["all hosts", "", "", tot("rss_kb"), "", "", tot("pss_kb")])
    show(["host", "ovsdb RSS", "vswitchd RSS", "RSS sum", "ovsdb PSS", "vswitchd PSS", "PSS sum"],
         rows, title=f"Memory per emulated OVS host, MiB (run {last['run_id']}, after the pings)")

    show(["pair", "a (host)", "b (host)", "dest", "reached", "rtt ms"],
         [[p["pair"], f"{p['a']} ({p['host_a']})", f"{p['b']} ({p['host_b']})", p["dest"],
           "yes" if p["reached"] else "NO", p["rtt_ms"]] for p in last["pings"]],
         title=f"Reachability: {last['reached']}/{last['pairs']} pairs reached "
               f"(ping -c 1 -W 2, {last['ping_check_s']:.2f} s for all)")
    write_json("bench_scale", {"file": args.file, "target_up_s": TARGET_UP_S,
                               "summary": {"up_s": up, "down_s": down}, "runs": runs})
    ok = all(r["clean"] and r["reached"] == r["pairs"] for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
