"""TCP flow-setup rate with vnetbench-flowgen (tools/flowgen): new connections per second.

The client opens connections open-loop at a fixed rate, each a new 5-tuple (rotating
destination ports, and source addresses when given), and closes each with a RST
(SO_LINGER 0) so that no TIME_WAIT limits the rate. A connection is lost when it
fails (refused, reset, timeout, ...) or connects later than the deadline; with the
default 1 s deadline any SYN or SYN-ACK retransmission makes it late. The server
accepts on every port and never closes first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from vnetbench.errors import PrerequisiteError

BINARY = "vnetbench-flowgen"
_PORTS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_CLIENT_KEYS = ("rate_target", "duration_s", "attempted", "ok", "failed", "late", "loss_pct",
                "achieved_rate", "latency_us", "errors", "schedule_kept", "schedule_lag_us")


@dataclass(frozen=True)
class ServerParams:
    listen: str                     # the server's IP address
    ports: str = "5000-5255"        # many ports widen the 5-tuple space


@dataclass(frozen=True)
class ClientParams:
    target: str
    rate: float                     # new connections per second
    duration_s: float = 10.0
    ports: str = "5000-5255"        # must be ports the server listens on
    deadline_ms: float = 1000.0     # connected later than this: late (lost)
    timeout_ms: float = 3000.0      # give up connecting after this: failed (timeout)
    sources: tuple[str, ...] = ()   # local addresses to rotate over; () = the kernel's choice
    write_bytes: int = 0            # bytes written after connecting (0: none)
    max_lag_ms: float = 10.0        # schedule_kept is false if a start was later than this

    def __post_init__(self):
        if not _PORTS.match(self.ports):
            raise ValueError(f"ports {self.ports!r}: want P, P1-P2 or a comma list of those")
        if self.rate <= 0 or self.duration_s <= 0 or not 0 < self.deadline_ms <= self.timeout_ms:
            raise ValueError("need rate > 0, duration_s > 0 and 0 < deadline_ms <= timeout_ms")


def binary() -> str:
    """vnetbench-flowgen next to the running Python (the venv's bin) or on PATH."""
    here = Path(sys.executable).parent / BINARY
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which(BINARY)
    if found:
        return found
    raise PrerequisiteError(f"{BINARY} not found next to {sys.executable} or on PATH; "
                            "build it with 'make flowgen'")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def server_command(p: ServerParams, exe: str | None = None) -> list[str]:
    return [exe or binary(), "server", "-listen", f"{p.listen}:{p.ports}"]


def client_command(p: ClientParams, exe: str | None = None) -> list[str]:
    argv = [exe or binary(), "client", "-target", p.target, "-ports", p.ports,
            "-rate", _num(p.rate), "-duration", _num(p.duration_s),
            "-deadline", _num(p.deadline_ms), "-timeout", _num(p.timeout_ms),
            "-max-lag", _num(p.max_lag_ms)]
    if p.sources:
        argv += ["-sources", ",".join(p.sources)]
    if p.write_bytes:
        argv += ["-write", str(p.write_bytes)]
    return argv + ["-json"]


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def parse(text: str) -> dict:
    """The client's JSON result: counts, loss_pct (failed + late), achieved_rate,
    latency_us / schedule_lag_us percentiles (None when nothing connected), errors by class."""
    doc = _last_json(text)
    if not isinstance(doc, dict) or doc.get("mode") != "client" \
            or any(k not in doc for k in _CLIENT_KEYS):
        raise ValueError("not vnetbench-flowgen client output: no JSON result line")
    doc["errors"] = doc["errors"] or {}
    doc["lost"] = doc["failed"] + doc["late"]
    return doc


def parse_server(text: str) -> dict:
    """The server's counters, printed when it is stopped (SIGTERM/SIGINT)."""
    doc = _last_json(text)
    if not isinstance(doc, dict) or doc.get("mode") != "server" or "accepted" not in doc:
        raise ValueError("not vnetbench-flowgen server output: no counters line (was it stopped?)")
    return doc
