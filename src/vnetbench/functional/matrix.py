"""The functional matrix in the shape of the seed's table: rows = tests, columns =
vSwitch kind / network type, cells = verdict + measured figure, a footnote for
every Fail, N/A and Error. Written as JSON and Markdown; the text is printed at the
end of the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from vnetbench.functional.verdict import Status, Verdict


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
        "10 Mbit/s on a logical port: rate at the receiver (iperf3 UDP at 2x) within ±10% after 2 s"),
    Row("rate.same-vnet", "Rate limiting",
        "The limit does not affect other ports of the same vnet"),
    Row("rate.other-vnet", "Rate limiting",
        "The limit does not affect ports of another vnet"),
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
        "Flow idle timeout, by progressively longer waits with the controller down"),
    Row("fault.multi-controller", "Fault tolerance",
        "Several controller instances: one killed, traffic and new pairs go on"),
    Row("fault.vswitch-restart", "Fault tolerance",
        "Restart the virtual switch: traffic flows again (outage)"),
    Row("migration.cold", "VM migration",
        "Cold: shut down, move to another host, boot: ping works (time to move)"),
    Row("migration.live", "VM migration",
        "Live: ping continues (downtime, 5 ms probes)"),
    Row("migration.controller-down", "VM migration",
        "Migrate with the controller down, restart it: ping works"),
    Row("feature.proxy-arp", "Value-added features",
        "Proxy ARP: an ARP answered without reaching the address's owner (Pass = present)"),
)
ROW = {r.id: r for r in ROWS}


def expected() -> dict:
    """{kind: {row id: status}}: the documented behaviour per kind (expected.yaml)."""
    text = resources.files("vnetbench.functional").joinpath("expected.yaml").read_text()
    return {kind: {row: Status(st) for row, st in rows.items()}
            for kind, rows in (yaml.safe_load(text) or {}).items()}


class Matrix:
    """Cells keyed by (kind, network, row id); a later record of a cell replaces it."""

    def __init__(self, expect: dict | None = None):
        self.cells: dict = {}
        self.expect = expected() if expect is None else expect

    def add(self, kind: str, network: str, row: str, verdict: Verdict,
            measurement: dict | None = None) -> None:
        if row not in ROW:
            raise KeyError(f"unknown matrix row {row!r}")
        self.cells[(kind, network, row)] = (verdict, measurement or {})

    def expected_status(self, kind: str, row: str) -> Status | None:
        return self.expect.get(kind, {}).get(row)

    def columns(self) -> list[tuple[str, str]]:
        """Configurations that were built (a cell not marked not_built), in recording order."""
        seen = []
        for (kind, net, _), (v, _) in self.cells.items():
            if not v.extra.get("not_built") and (kind, net) not in seen:
                seen.append((kind, net))
        return seen

    def not_run(self) -> dict:
        """{(kind, network): reason} of configurations this machine could not build."""
        cols = set(self.columns())
        return {(k, n): v.detail for (k, n, _), (v, _) in self.cells.items() if (k, n) not in cols}

    def to_dict(self) -> dict:
        return {"rows": [{"id": r.id, "category": r.category, "text": r.text} for r in ROWS],
                "cells": [{"vswitch": k, "network": n, "row": r, **v.to_dict(),
                           "expected": (e.value if (e := self.expected_status(k, r)) else None),
                           "measurement": m}
                          for (k, n, r), (v, m) in self.cells.items()]}

    def failures(self) -> list:
        return [(k, n, r, v) for (k, n, r), (v, _) in self.cells.items()
                if v.status not in (Status.PASS, Status.NA)]

    def markdown(self) -> str:
        cols = self.columns()
        notes: list[str] = []
        lines = ["| Category | Test | " + " | ".join(f"{k}/{n}" for k, n in cols) + " |",
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
                f"- {k}/{n}: {why}" for (k, n), why in self.not_run().items())
        if " — |" in out:
            out += ("\n\n—: not measured on this configuration (fault and migration rows run on "
                    "one network type per kind unless --every-network)")
        if missing:
            out += "\n\nNot measured in this run: " + "; ".join(missing)
        return out + "\n"

    def _cell(self, kind, net, row, notes) -> str:
        got = self.cells.get((kind, net, row))
        if got is None:
            return "—"
        v = got[0]
        text = " ".join(x for x in (v.status.value, v.figure) if x)
        exp = self.expected_status(kind, row)
        if exp is not None and exp is not v.status:
            text += f" (expected {exp.value})"
        if v.status is not Status.PASS or (exp is not None and exp is not v.status):
            notes.append(f"{kind}/{net}, {ROW[row].text}: {v.detail}")
            text += f" [{len(notes)}]"
        return text

    def write(self, out: Path) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        js, md = out / "matrix.json", out / "matrix.md"
        js.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        md.write_text("# vnetbench functional matrix\n\n" + self.markdown())
        return [js, md]
