"""Sequence-numbered UDP probes: a paced sender and a receiver that timestamps arrivals.

Each datagram carries a marker, its sequence number and its send time on
CLOCK_MONOTONIC, which every network namespace of the machine shares: the
receiver's arrival times and the test's own clock are directly comparable, so
"when did traffic stop" is read from the probes themselves (the send time of the
last probe that arrived).

The executor part (``*_command``, ``parse``) is pure. Running this module is the
tool (``python -m vnetbench.traffic.probe send|recv ...``): one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time
from dataclasses import dataclass

MAGIC = b"VNBP"
HEADER = struct.Struct("!4sIIQ")      # magic, marker, seq, send time (ns, CLOCK_MONOTONIC)


@dataclass(frozen=True)
class SendParams:
    dest: str
    port: int
    interval_ms: float
    seconds: float
    marker: int
    broadcast: bool = False        # SO_BROADCAST: dest may be the subnet broadcast address


@dataclass(frozen=True)
class RecvParams:
    port: int
    seconds: float
    marker: int


def send_command(p: SendParams) -> list[str]:
    return [sys.executable, "-m", "vnetbench.traffic.probe", "send", "--dest", p.dest,
            "--port", str(p.port), "--interval-ms", f"{p.interval_ms:g}",
            "--seconds", f"{p.seconds:g}", "--marker", str(p.marker),
            *(["--broadcast"] if p.broadcast else [])]


def recv_command(p: RecvParams) -> list[str]:
    return [sys.executable, "-m", "vnetbench.traffic.probe", "recv", "--port", str(p.port),
            "--seconds", f"{p.seconds:g}", "--marker", str(p.marker)]


def parse(text: str) -> dict:
    """The tool's last JSON line. send -> sent, errors, first_ns, last_ns, interval_ns;
    recv -> received, probes ([seq, send_ns, recv_ns] in arrival order)."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{") and '"ready"' not in line:
            return json.loads(line)
    raise ValueError("no JSON result line in probe tool output")


# -- the tool ---------------------------------------------------------------------

def send(a) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if a.broadcast:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    interval = int(a.interval_ms * 1e6)
    total = max(1, int(a.seconds * 1e3 / a.interval_ms))
    start = time.monotonic_ns()
    sent = errors = 0
    first = last = None
    for seq in range(total):
        delay = start + seq * interval - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        now = time.monotonic_ns()
        try:
            s.sendto(HEADER.pack(MAGIC, a.marker, seq, now), (a.dest, a.port))
            sent += 1
            first = first if first is not None else now
            last = now
        except OSError:          # e.g. ENETUNREACH, or ENOBUFS on a full queue
            errors += 1
    return {"sent": sent, "errors": errors, "first_ns": first, "last_ns": last,
            "interval_ns": interval}


def recv(a) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", a.port))   # unicast and broadcast alike
    print(json.dumps({"ready": True}), flush=True)
    end = time.monotonic() + a.seconds
    probes = []
    while (left := end - time.monotonic()) > 0:
        if not select.select([s], [], [], min(left, 0.1))[0]:
            continue
        data = s.recv(2048)
        now = time.monotonic_ns()
        if len(data) >= HEADER.size:
            magic, marker, seq, sent_ns = HEADER.unpack_from(data)
            if magic == MAGIC and marker == a.marker:
                probes.append([seq, sent_ns, now])
    return {"received": len(probes), "probes": probes}


def main(argv=None):
    p = argparse.ArgumentParser(prog="vnetbench.traffic.probe")
    p.add_argument("mode", choices=["send", "recv"])
    p.add_argument("--dest")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--marker", type=int, required=True)
    p.add_argument("--broadcast", action="store_true")
    a = p.parse_args(argv)
    if a.mode == "send" and not a.dest:
        p.error("send needs --dest")
    print(json.dumps(send(a) if a.mode == "send" else recv(a)), flush=True)


if __name__ == "__main__":
    main()
