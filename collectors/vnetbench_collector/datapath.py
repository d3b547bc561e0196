"""OVS datapath counters from ``dpctl/show``: lookups hit/missed/lost (every miss
is an upcall to ovs-vswitchd) and the datapath's flow count.

ovs-vswitchd is asked over its unixctl socket (JSON-RPC, what ovs-appctl speaks),
so a scrape forks nothing. The query is injected, so parsing and the source are
tested against recorded outputs.
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

OVS_RUNDIR = Path("/var/run/openvswitch")
RETRY_S = 30.0          # after a failure, ask again only this much later


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


def control_socket(target: str | None) -> Path:
    """What ``ovs-appctl -t`` accepts: a unixctl socket, a pidfile, or None (the
    system's ovs-vswitchd: its pidfile in /var/run/openvswitch)."""
    path = Path(target) if target else OVS_RUNDIR / "ovs-vswitchd.pid"
    if path.suffix != ".pid":
        return path
    pid = int(path.read_text().split()[0])
    return path.parent / f"{path.stem}.{pid}.ctl"


def unixctl(path: Path, command: str, timeout: float = 2.0, params=()) -> str:
    """One unixctl command (with its PARAMS, strings) over the daemon's socket; its text
    result. No process per command: thousands of them cost what one ovs-appctl does."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(json.dumps({"method": command, "params": list(params), "id": 0}).encode())
        buf, decoder = "", json.JSONDecoder()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise OSError(f"{path}: connection closed before a reply")
            buf += chunk.decode()
            try:
                reply, _ = decoder.raw_decode(buf)
                break
            except ValueError:
                continue
    if reply.get("error") is not None:
        raise OSError(f"{path}: {command}: {reply['error']}")
    return reply["result"]


def ovs_source(target: str | None = None, query: Callable[[str], str] | None = None,
               clock: Callable[[], float] = time.monotonic):
    """A callable returning the datapaths of one ovs-vswitchd, or [] if it cannot be
    asked (then it is not asked again for RETRY_S)."""
    ask = query or (lambda command: unixctl(control_socket(target), command))
    state = {"next": 0.0}

    def read() -> list[Datapath]:
        if clock() < state["next"]:
            return []
        try:
            return parse_show(ask("dpctl/show"))
        except (OSError, ValueError, KeyError):
            state["next"] = clock() + RETRY_S
            return []
    return read
