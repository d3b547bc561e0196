"""The main job until the test battery exists: for every vSwitch kind x network
type, bring up the default two-host testbed, measure reachability and RTT of the
same-host and cross-host VM pairs in both directions, and tear it down."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from vnetbench import __version__, kinds
from vnetbench.testbed import capabilities
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import NetType, VSwitchKind
from vnetbench.testbed import deployment
from vnetbench.traffic import ping

#: the kinds the demo brings up (``Kind.demo``: no controller to wait for, or a fast one)
KINDS = tuple(VSwitchKind(k.name) for k in kinds.all_kinds() if k.demo)


def run(kinds=KINDS, types=tuple(NetType), count=20, interval_s=0.02,
        progress=print, online_cpus=None) -> dict:
    caps = capabilities.probe()
    rows = []
    for kind in kinds:
        for ntype in types:
            reason = caps.why_not(kind, ntype)
            if reason:
                progress(f"{kind}/{ntype}: not supported here: {reason}")
                rows.append({"vswitch": kind.value, "network": ntype.value, "supported": False,
                             "reason": reason})
                continue
            rows.extend(_one(kind, ntype, caps, count, interval_s, progress, online_cpus))
    return {"vnetbench": __version__, "kernel": platform.release(), "started": time.time(),
            "ovs_version": caps.ovs_version, "ovs_datapath": caps.ovs_datapath,
            "ping": {"count": count, "interval_s": interval_s}, "rows": rows}


def _one(kind, ntype, caps, count, interval_s, progress, online_cpus):
    testbed = loads(f"vswitch: {kind}\nnetwork: {{type: {ntype}}}\n",
                    source=f"<default {kind}-{ntype}>", online_cpus=online_cpus)
    t0 = time.monotonic()
    dep = deployment.build("netns", testbed, caps=caps)
    up_s = time.monotonic() - t0
    rows = []
    try:
        for pair in testbed.pairs:
            for src, dst in (pair.vms, pair.vms[::-1]):
                params = ping.PingParams(dest=dep.ip(dst), count=count, interval_s=interval_s)
                out = dep.exec(src, ping.command(params), timeout=count * interval_s + 10)
                res = ping.parse(out.stdout)
                res.pop("samples_ms")
                rows.append({"vswitch": kind.value, "network": ntype.value, "supported": True,
                             "placement": pair.placement, "src": src, "dst": dst,
                             "reachable": res["received"] > 0, **res,
                             "tenant_mtu": testbed.network.tenant_mtu, "up_s": round(up_s, 3)})
                progress(f"{kind}/{ntype} {pair.placement} {src} -> {dst}: "
                         + (f"rtt avg {res['rtt_avg_ms']:.3f} ms, loss {res['loss_pct']:.0f}%"
                            if res["received"] else "UNREACHABLE"))
    finally:
        t1 = time.monotonic()
        errors = dep.down()
        for r in rows:
            r["down_s"] = round(time.monotonic() - t1, 3)
        if errors:
            progress(f"{kind}/{ntype}: teardown problems: {errors}")
    return rows


def table(report: dict) -> str:
    head = ("vswitch", "network", "placement", "direction", "reachable", "loss %",
            "rtt avg ms", "rtt min ms", "rtt max ms", "mtu", "up s", "down s")
    lines = []
    for r in report["rows"]:
        if not r["supported"]:
            lines.append((r["vswitch"], r["network"], "-", "-", "n/a: " + r["reason"]))
            continue
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        lines.append((r["vswitch"], r["network"], r["placement"], f"{r['src']} -> {r['dst']}",
                      "yes" if r["reachable"] else "NO", f"{r['loss_pct']:.0f}",
                      fmt(r["rtt_avg_ms"]), fmt(r["rtt_min_ms"]), fmt(r["rtt_max_ms"]),
                      str(r["tenant_mtu"]), f"{r['up_s']:.2f}", f"{r['down_s']:.2f}"))
    full = [head] + [l for l in lines if len(l) == len(head)]
    widths = [max(len(str(x[i])) for x in full) for i in range(len(head))]
    out = [" | ".join(h.ljust(w) for h, w in zip(head, widths))]
    out.append("-+-".join("-" * w for w in widths))
    for l in lines:
        out.append(" | ".join(str(c).ljust(w) for c, w in zip(l, widths)) if len(l) == len(head)
                   else " | ".join(str(c).ljust(w) for c, w in zip(l[:4], widths)) + " | " + l[4])
    return "\n".join(out)


def save(report: dict, directory: Path) -> Path:
    from vnetbench import outfiles
    name = time.strftime("demo-%Y%m%d-%H%M%S.json")
    return outfiles.write_files(directory, {name: json.dumps(report, indent=2)}, "--results")[0]
