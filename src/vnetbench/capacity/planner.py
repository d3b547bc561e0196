"""``vnetbench plan``: both placements of a workload side by side, each host's predicted
vSwitch load and CPU, which hosts the network-agnostic packing overloads and by how
much; rendered as a table, Markdown, JSON, or an HTML page with a chart."""

from __future__ import annotations

import json
from html import escape

from vnetbench.capacity import machine, place
from vnetbench.capacity.files import Hosts, Workload

ALGORITHMS = {"agnostic": "network-agnostic packing (seed 004, Figure 1)",
              "aware": "network-aware placement (seed 004, Figure 9, with the measured profile)"}
FORMATS = ("table", "md", "json", "html")


def plan(workload: Workload, hosts: Hosts, profile: dict, profile_source="the capacity profile") -> dict:
    model = place.Model(profile, hosts, profile_source)
    out = {"workload": workload.name, "network": hosts.network,
           "vms": len(workload.vms), "flows": len(workload.flows),
           "offered_gbps": round(sum(f.gbps for f in workload.flows), 6),
           "profile": {"source": profile_source, "stable": profile.get("stable", True),
                       "machines": machine.used(model.cells)},
           "placements": {}}
    for name, algo in (("agnostic", lambda: place.agnostic(workload, hosts)),
                       ("aware", lambda: place.aware(workload, hosts, model))):
        try:
            where = algo()
        except place.PlanInfeasible as exc:
            out["placements"][name] = {"infeasible": str(exc)}
            continue
        rows = place.predict(workload, hosts, model, where)
        out["placements"][name] = {
            "where": where, "hosts": rows, "hosts_used": len(rows),
            "overloaded": [r["host"] for r in rows if r["overloaded_pct"] > 0],
            "delivered_gbps": round(_delivered(rows), 6)}
    out["summary"] = summary(out)
    return out


def _delivered(rows) -> float:
    """What gets through end to end: each flow once, as its sending host carries it
    (``predict``: the least share of its two hosts) -- tx and same, not rx."""
    return sum(r["carried_gbps"].get("tx", 0.0) + r["carried_gbps"].get("same", 0.0) for r in rows)


def summary(out: dict) -> list[str]:
    lines = []
    for name, p in out["placements"].items():
        label = ALGORITHMS[name]
        if "infeasible" in p:
            lines.append(f"{label}: infeasible: {p['infeasible']}")
            continue
        bad = [r for r in p["hosts"] if r["overloaded_pct"] > 0]
        text = (f"{label}: {p['hosts_used']} host(s); "
                f"{_g(p['delivered_gbps'])} of {_g(out['offered_gbps'])} Gbit/s offered get through")
        if bad:
            text += "; overloads " + ", ".join(
                f"{r['host']} by {r['overloaded_pct']:g}% (its vSwitch carries {_g(r['delivered_gbps'])} "
                f"of {_g(r['offered_gbps'])} Gbit/s)" for r in bad)
        else:
            text += "; no host past its measured vSwitch capacity"
        lines.append(text)
        extrapolated = sorted({r["host"] for r in p["hosts"] if "extrapolated" in r["capacity_how"]})
        beyond = sorted({r["host"] for r in p["hosts"] if r["beyond_measured"]})
        if extrapolated:
            lines.append(f"  {name}: capacity of {', '.join(extrapolated)} extrapolated (never saturated "
                         "when measured): treat as an estimate")
        if beyond:
            lines.append(f"  {name}: {', '.join(beyond)} loaded beyond the highest measured load: the "
                         "CPU there is extrapolated")
    if not out["profile"]["stable"]:
        lines.append("the profile holds unstable figures (see its 'unstable' lists): measure again before "
                     "trusting the plan")
    return lines


HEAD = ["host", "VMs", "cores", "memory GB", "vSwitch Gbit/s tx/rx/same", "utilisation", "CPU % (pred.)",
        "verdict"]


def _rows(p: dict) -> list[list[str]]:
    out = []
    for r in p["hosts"]:
        g = r["gbps"]
        verdict = (f"OVERLOADED +{r['overloaded_pct']:g}%" if r["overloaded_pct"] > 0 else "ok")
        if r["beyond_measured"]:
            verdict += " (beyond measured)"
        util = f"{100 * r['utilisation']:.0f}%"
        if r["conn_utilisation"] is not None:
            util += f", conn {100 * r['conn_utilisation']:.0f}%"
        out.append([r["host"], _vms(r["vms"]), f"{r['cores'][0]}/{r['cores'][1]}",
                    f"{r['memory_mb'][0] / 1024:.3g}/{r['memory_mb'][1] / 1024:.3g}",
                    "/".join(_g(g.get(k, 0)) for k in ("tx", "rx", "same")), util,
                    f"{r['cpu_pct']:.0f} of {r['ceiling_pct']:g}", verdict])
    return out


def _vms(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} +{len(names) - 3}"


def _g(x) -> str:
    return f"{x:.3g}"


def render(out: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(out, indent=1) + "\n"
    if fmt == "html":
        return html(out)
    md = fmt == "md"
    parts = [(f"# Plan: {out['workload']}" if md else f"plan: {out['workload']}") +
             f" ({out['vms']} VMs, {out['flows']} flows, {_g(out['offered_gbps'])} Gbit/s offered, "
             f"{out['network']})"]
    parts += [f"- {x}" if md else x for x in machine.plan_lines(out["profile"].get("machines") or [])] + [""]
    for name, p in out["placements"].items():
        parts.append(f"## {ALGORITHMS[name]}" if md else ALGORITHMS[name])
        if "infeasible" in p:
            parts += [f"infeasible: {p['infeasible']}", ""]
            continue
        parts += [_markdown(HEAD, _rows(p)) if md else _plain(HEAD, _rows(p)), ""]
    parts += ["## Summary" if md else "summary:"] + [f"- {s}" if md else s for s in out["summary"]]
    return "\n".join(parts) + "\n"


def _plain(head, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _markdown(head, rows) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] +
                     ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


MAX_TICKS = 48


def chart_svg(out: dict) -> str | None:
    """Each host's utilisation of its measured vSwitch capacity under both placements,
    the line at 100%: where the vSwitch, not the cores, becomes the bottleneck."""
    from matplotlib.figure import Figure

    from vnetbench.report.charts import _svg
    series = {ALGORITHMS[n].split(" (")[0]: {r["host"]: 100 * r["utilisation"] for r in p["hosts"]}
              for n, p in out["placements"].items() if "hosts" in p}
    if not series:
        return None
    hosts = list(dict.fromkeys(h for s in series.values() for h in s))
    fig = Figure(figsize=(min(14.0, max(6.0, 0.6 * len(hosts))), 3.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        xs = [k + (i - (len(series) - 1) / 2) * width for k, h in enumerate(hosts) if h in values]
        ax.bar(xs, [values[h] for h in hosts if h in values], width, label=name)
    ax.axhline(100, color="crimson", linewidth=1, linestyle="--", label="measured vSwitch capacity")
    step = -(-len(hosts) // MAX_TICKS)      # a label per host up to MAX_TICKS: laying out 1,024 takes seconds
    ax.set_xticks(range(0, len(hosts), step), hosts[::step], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("% of the host's vSwitch capacity")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    return _svg(fig, "plan-utilisation")


def html(out: dict) -> str:
    from vnetbench.report.html import CSS
    body = [f"<h1>Plan: {escape(out['workload'])}</h1>",
            f"<p>{out['vms']} VMs, {out['flows']} flows, {_g(out['offered_gbps'])} Gbit/s offered on "
            f"{escape(out['network'])}; profile {escape(str(out['profile']['source']))}</p>",
            "<p>" + "<br>".join(escape(x) for x in machine.plan_lines(out["profile"].get("machines") or []))
            + "</p>",
            "<ul>" + "".join(f"<li>{escape(s)}</li>" for s in out["summary"]) + "</ul>"]
    svg = chart_svg(out)
    if svg:
        body.append(f"<figure id='plan-utilisation'>{svg}<figcaption>Each host's vSwitch load as a share "
                    "of its measured capacity (the profile's saturation point, or its CPU cost "
                    "extrapolated to the ceiling where it never saturated), under both placements; "
                    "above the dashed line the vSwitch is the bottleneck.</figcaption></figure>")
    for name, p in out["placements"].items():
        body.append(f"<h2>{escape(ALGORITHMS[name])}</h2>")
        if "infeasible" in p:
            body.append(f"<p>infeasible: {escape(p['infeasible'])}</p>")
            continue
        body.append("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in HEAD) + "</tr>" +
                    "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in _rows(p))
                    + "</table>")
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>vnetbench plan"
            f"</title><style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")
