"""The functional matrix in the shape of the seed's table: rows = tests, columns =
vSwitch kind / network type, cells = verdict + measured figure, a footnote for
every Fail, N/A and Error. Written as JSON, Markdown and HTML; the text is printed at
the end of the run, and ``vnetbench report`` puts the HTML table into the comparison
report when a RESULTS directory holds a matrix.json (or functional/matrix.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path


from vnetbench.functional.verdict import Status, Verdict
from vnetbench.testbed.model import NetType, VSwitchKind


@dataclass(frozen=True)
class Row:
    id: str
    category: str
    text: str


ROWS = (
    Row("isolation.same-ips", "Isolation",
        "2 vnets with the same IPs: each reachable inside itself"),
    Row("isolation.deprovision", "Isolation",
        "Deprovisioning a vnet stops reachability and ongoing traffic (time until probes stop)"),
    Row("isolation.unicast", "Isolation",
        "Vnet A does not see vnet B unicast to valid IPs (captured on A's VMs)"),
    Row("isolation.broadcast", "Isolation",
        "Vnet A does not see vnet B broadcast, static ARP on the source (captured on A's VMs)"),
    Row("isolation.unknown-unicast", "Isolation",
        "Vnet A does not see vnet B flood to an unknown MAC, static ARP on the source "
        "(captured on A's VMs)"),
    Row("rate.compliance", "Rate limiting",
        "10 Mbit/s on a logical port, to the VM (ingress): rate at the receiver (iperf3 UDP "
        "at 2x) within ±10% after 2 s"),
    Row("rate.same-vnet", "Rate limiting",
        "The ingress limit does not affect other ports of the same vnet"),
    Row("rate.other-vnet", "Rate limiting",
        "The ingress limit does not affect ports of another vnet"),
    Row("rate.egress-compliance", "Rate limiting",
        "10 Mbit/s on a logical port, from the VM (egress): rate at the receiver (iperf3 UDP "
        "at 2x) within ±10% after 2 s"),
    Row("rate.egress-same-vnet", "Rate limiting",
        "The egress limit does not affect other ports of the same vnet"),
    Row("rate.egress-other-vnet", "Rate limiting",
        "The egress limit does not affect ports of another vnet"),
    Row("fault.ping-stop", "Fault tolerance",
        "Ping continues when the controller stops gracefully (longest pause)"),
    Row("fault.ping-kill", "Fault tolerance",
        "Ping continues when the controller is killed (longest pause)"),
    Row("fault.iperf-stop", "Fault tolerance",
        "A new iperf3 session starts after the controller stops gracefully"),
    Row("fault.iperf-kill", "Fault tolerance",
        "A new iperf3 session starts after the controller is killed"),
    Row("fault.new-ping", "Fault tolerance",
        "A new ping after the controller stops: fail-open or fail-close"),
    Row("fault.idle-timeout", "Fault tolerance",
        "Flow idle timeout with the controller down (8 s idle first; shorter waits bracket "
        "an expiry)"),
    Row("fault.multi-controller", "Fault tolerance",
        "Several controller instances: one killed, traffic and new pairs go on"),
    Row("fault.vswitch-restart", "Fault tolerance",
        "Restart the virtual switch: traffic flows again (outage)"),
    Row("fault.egress-restart", "Fault tolerance",
        "Egress limit after a vSwitch restart: the 10 Mbit/s limit holds again (time "
        "unlimited after the restart)"),
    Row("migration.cold", "VM migration",
        "Cold: shut down, move to another host, boot: ping works (time to move)"),
    Row("migration.live", "VM migration",
        "Live: ping continues (downtime, 5 ms probes)"),
    Row("migration.controller-down", "VM migration",
        "Migrate with the controller down, restart it: ping works"),
    Row("routing.east-west", "Routing",
        "East-west between two vnets through their router: the peer answers, TTL one lower than "
        "on the sender's own vnet (VMs on two hosts, the router on one)"),
    Row("routing.floating-ip", "Routing",
        "North-south: an external host reaches a floating IP (never a fixed address) and sees "
        "a VM's traffic from its floating IP, or from the router's address without one (SNAT)"),
    Row("routing.interface-removed", "Routing",
        "Removing a router interface stops east-west traffic through it (time until probes "
        "stop); the vnet still switches"),
    Row("sg.default-deny", "Security groups",
        "Ingress denied by default: Neutron's default group admits its members and no one else "
        "(TCP and ICMP)"),
    Row("sg.allowed-port", "Security groups",
        "An allowed TCP port passes while another port of the same VM does not"),
    Row("sg.stateful", "Security groups",
        "The replies of an allowed connection pass where a new connection the other way "
        "does not (stateful), across hosts"),
    Row("sg.remote-group", "Security groups",
        "A remote-group rule admits a member and not a non-member"),
    Row("sg.rule-latency", "Security groups",
        "Rule to first packet: a rule added while a probe knocks every 5 ms (p50 over 20 "
        "rules; p95 and the slowest in the note)"),
    Row("sg.rule-removal", "Security groups",
        "A rule removed under an established connection: it stops (Pass) or keeps flowing "
        "(Fail-open), measured"),
    Row("feature.proxy-arp", "Value-added features",
        "Proxy ARP: an ARP answered without reaching the address's owner (Pass = present)"),
    Row("feature.encapsulation", "Value-added features",
        "Encapsulation on the underlay, classified from captured bytes (bytes added to the "
        "inner IP packet; Pass = what the network type declares)"),
    Row("feature.dhcp", "Value-added features",
        "DHCP: a client in a VM is answered by the network, not a VM (Pass = present; "
        "a DHCP server in another VM is the control)"),
    Row("feature.bonding", "Value-added features",
        "Bonding: 4 parallel flows leave the host over several underlay links (Pass = present)"),
)
ROW = {r.id: r for r in ROWS}
STATUS_CSS = ("td.pass{background:#e3f4e3}td.fail,td.fail_close{background:#f8d7d7}"
              "td.fail_open{background:#fdebc8}td.error{background:#f3c0c0}td.na{color:#888}")


def _column_order(col):
    """Kinds and network types in the model's order; unknown names last, by name."""
    kinds, types = [k.value for k in VSwitchKind], [t.value for t in NetType]
    k, n = col
    return (kinds.index(k) if k in kinds else len(kinds), k,
            types.index(n) if n in types else len(types), n)


def expected() -> dict:
    """{kind: {row id: status}}: the documented behaviour per kind (each kind's
    ``expected.yaml``: ``Kind.expected_verdicts``)."""
    from vnetbench import kinds
    return {k.name: {row: Status(st) for row, st in k.expected_verdicts().items()}
            for k in kinds.all_kinds()}


class Matrix:
    """Cells keyed by (kind, network, row id); a later record of a cell replaces it.
    ``expect``: the documented behaviour per kind; ``user``: the user's expectations
    (``expect.Expectations``, ``--expect``), which win where they say something."""

    def __init__(self, expect: dict | None = None, user=None, backend: str = "netns"):
        self.cells: dict = {}
        self.expect = expected() if expect is None else expect
        self.user = user
        self.backend = backend      # one deployment per run: every column is measured on it

    def header(self, kind: str, network: str) -> str:
        """A column's name: where it was measured (backend) and on what (kind/network)."""
        return f"{self.backend} {kind}/{network}"

    def add(self, kind: str, network: str, row: str, verdict: Verdict,
            measurement: dict | None = None) -> None:
        if row not in ROW:
            raise KeyError(f"unknown matrix row {row!r}")
        self.cells[(kind, network, row)] = (verdict, measurement or {})

    def expected_status(self, kind: str, row: str, network: str = "") -> Status | None:
        return self._expected(kind, network, row)[0]

    def _expected(self, kind: str, network: str, row: str) -> tuple:
        """(status, "user" | "docs") of the expectation that applies, (None, None) if none."""
        got = self.user.status(kind, network, row) if self.user else None
        if got is not None:
            return got, "user"
        got = self.expect.get(kind, {}).get(row)
        return (got, "docs") if got is not None else (None, None)

    def unmet(self) -> list:
        """(kind, network, row, measured, expected) of cells that differ from the user's
        expectations (the documented ones only annotate)."""
        out = []
        for (k, n, r), (v, _) in self.cells.items():
            exp, by = self._expected(k, n, r)
            if by == "user" and exp is not v.status:
                out.append((k, n, r, v.status, exp))
        return out

    def columns(self) -> list[tuple[str, str]]:
        """Configurations that were built (a cell not marked not_built), kind by kind."""
        seen = {(k, n) for (k, n, _), (v, _) in self.cells.items() if not v.extra.get("not_built")}
        return sorted(seen, key=_column_order)

    def not_run(self) -> dict:
        """{(kind, network): reason} of configurations this machine could not build."""
        cols = set(self.columns())
        return {(k, n): v.detail for (k, n, _), (v, _) in self.cells.items() if (k, n) not in cols}

    def to_dict(self) -> dict:
        cells = []
        for (k, n, r), (v, m) in self.cells.items():
            exp, by = self._expected(k, n, r)
            cells.append({"vswitch": k, "network": n, "row": r, **v.to_dict(),
                          "expected": exp.value if exp else None, "expected_by": by,
                          "measurement": m})
        out = {"backend": self.backend,
               "rows": [{"id": r.id, "category": r.category, "text": r.text} for r in ROWS],
               "cells": cells}
        if self.user and self.user.source:
            out["expectations"] = self.user.to_dict()
        return out

    def failures(self) -> list:
        return [(k, n, r, v) for (k, n, r), (v, _) in self.cells.items()
                if v.status not in (Status.PASS, Status.NA)]

    def markdown(self) -> str:
        cols = self.columns()
        notes: list[str] = []
        lines = ["| Category | Test | " + " | ".join(self.header(k, n) for k, n in cols) + " |",
                 "|---|---|" + "---|" * len(cols)]
        for row in ROWS:
            if not any((k, n, row.id) in self.cells for k, n in cols):
                continue
            cells = [self._cell(k, n, row.id, notes) for k, n in cols]
            lines.append(f"| {row.category} | {row.text} | " + " | ".join(cells) + " |")
        missing = [r.text for r in ROWS if not any(key[2] == r.id for key in self.cells)]
        out = "\n".join(lines)
        if notes:
            out += "\n\n" + "\n".join(f"[{i}] {t}" for i, t in enumerate(notes, 1))
        if self.not_run():
            out += "\n\nNot run here:\n" + "\n".join(
                f"- {self.header(k, n)}: {why}" for (k, n), why in self.not_run().items())
        if " — |" in out:
            out += ("\n\n—: not measured on this configuration (fault and migration rows run on "
                    "one network type per kind unless --every-network)")
        if missing:
            out += "\n\nNot measured in this run: " + "; ".join(missing)
        return out + self._expectations_summary() + "\n"

    def _expectations_summary(self) -> str:
        if not (self.user and self.user.source):
            return ""
        told = sum(self._expected(k, n, r)[1] == "user" for k, n, r in self.cells)
        unmet = self.unmet()
        text = (f"\n\nExpectations of {self.user.source}: {told - len(unmet)} of {told} cells "
                f"met" + (", not met:" if unmet else ""))
        return text + "".join(f"\n- {k}/{n}, {r}: measured {got.value}, expected {exp.value}"
                              for k, n, r, got, exp in unmet)

    def _cell(self, kind, net, row, notes) -> str:
        got = self.cells.get((kind, net, row))
        if got is None:
            return "—"
        v = got[0]
        text = " ".join(x for x in (v.status.value, v.figure) if x)
        exp = self.expected_status(kind, row, net)
        if exp is not None and exp is not v.status:
            text += f" (expected {exp.value})"
        if v.status is not Status.PASS or (exp is not None and exp is not v.status):
            notes.append(f"{self.header(kind, net)}, {ROW[row].text}: {v.detail}")
            text += f" [{len(notes)}]"
        return text

    @classmethod
    def from_dict(cls, d: dict) -> "Matrix":
        """A matrix back from its matrix.json (for reports); expectations as recorded."""
        from vnetbench.functional.expect import Expectations
        m = cls(expect={}, user=Expectations({}, (d.get("expectations") or {}).get("source", "")),
                backend=d.get("backend", "netns"))     # matrices from before the key: netns
        for c in d["cells"]:
            v = Verdict(Status(c["status"]), c["value"], c["unit"], c["detail"], c.get("extra") or {},
                        c.get("label", ""))
            m.add(c["vswitch"], c["network"], c["row"], v, c.get("measurement"))
            if c.get("expected"):
                rules = m.user.rules if c.get("expected_by") == "user" else m.expect
                key = f"{c['vswitch']}/{c['network']}" if rules is m.user.rules else c["vswitch"]
                rules.setdefault(key, {})[c["row"]] = Status(c["expected"])
        return m

    def html(self) -> str:
        """The table and its footnotes as an HTML fragment (the comparison report embeds it)."""
        cols, notes = self.columns(), []
        head = "".join(f"<th>{escape(self.header(k, n))}</th>" for k, n in cols)
        rows = []
        for row in ROWS:
            if not any((k, n, row.id) in self.cells for k, n in cols):
                continue
            cells = "".join(self._html_cell(k, n, row.id, notes) for k, n in cols)
            rows.append(f"<tr><th>{escape(row.category)}</th><td>{escape(row.text)}</td>{cells}</tr>")
        foot = "".join(f"<li>[{i}] {escape(t)}</li>" for i, t in enumerate(notes, 1))
        not_run = "".join(f"<li>{escape(self.header(k, n))}: {escape(why)}</li>"
                          for (k, n), why in self.not_run().items())
        return (f"<style>{STATUS_CSS}</style><table class='functional'><tr><th>Category</th><th>Test</th>{head}</tr>"
                + "".join(rows) + "</table>" + (f"<ol class='notes'>{foot}</ol>" if foot else "")
                + (f"<p>Not run here:</p><ul>{not_run}</ul>" if not_run else ""))

    def _html_cell(self, kind, net, row, notes) -> str:
        text = self._cell(kind, net, row, notes)
        got = self.cells.get((kind, net, row))
        cls = got[0].status.name.lower() if got else "missing"
        return f"<td class='{cls}'>{escape(text)}</td>"

    def write(self, out: Path) -> list[Path]:
        """matrix.json, .md and .html, all or none (vnetbench.outfiles)."""
        from vnetbench import outfiles
        from vnetbench.report.html import CSS
        page = ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>vnetbench "
                f"functional matrix</title><style>{CSS}</style></head>\n<body>"
                f"<h1>vnetbench functional matrix</h1>{self.html()}</body></html>\n")
        return outfiles.write_files(out, {"matrix.json": json.dumps(self.to_dict(), indent=1) + "\n",
                                          "matrix.md": "# vnetbench functional matrix\n\n" + self.markdown(),
                                          "matrix.html": page}, "--out", parents=True)
