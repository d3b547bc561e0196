"""OVS datapath counters from ``ovs-appctl dpctl/show``: lookups hit/missed/lost
(every miss is an upcall to ovs-vswitchd) and the datapath's flow count.

The command runner is injected, so parsing is tested against recorded outputs.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from typing import Callable

Runner = Callable[[list], str]


@dataclass(frozen=True)
class Datapath:
    name: str            # e.g. "netdev@ovs-netdev", "system@ovs-system"
    hit: int
    missed: int
    lost: int
    flows: int


def parse_show(text: str) -> list[Datapath]:
    """Every datapath block of ``dpctl/show``; a block without lookups is skipped."""
    out, name, fields = [], None, {}

    def close():
        if name and {"hit", "missed", "lost"} <= fields.keys():
            out.append(Datapath(name, fields["hit"], fields["missed"], fields["lost"],
                                fields.get("flows", 0)))
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            close()
            name, fields = line.rstrip()[:-1], {}
        elif m := re.match(r"\s+lookups:\s+hit:(\d+)\s+missed:(\d+)\s+lost:(\d+)", line):
            fields.update(hit=int(m[1]), missed=int(m[2]), lost=int(m[3]))
        elif m := re.match(r"\s+flows:\s+(\d+)", line):
            fields["flows"] = int(m[1])
    close()
    return out


def subprocess_runner(argv: list) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=2, check=True).stdout


def ovs_source(target: str | None = None, runner: Runner = subprocess_runner):
    """A callable returning the datapaths of one ovs-vswitchd (its unixctl socket or
    pidfile as ``target``; the system's daemon if None), or [] if it cannot be asked."""
    argv = ["ovs-appctl", *(["-t", target] if target else []), "dpctl/show"]

    def read() -> list[Datapath]:
        try:
            return parse_show(runner(argv))
        except (OSError, subprocess.SubprocessError):
            return []
    return read
