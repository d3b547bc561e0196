"""Sequence-numbered UDP probes: the downtime of a path while a fault acts on it.

``send`` emits one datagram every ``interval_s`` (<= 10 ms) carrying its sequence
number and answers nothing; ``echo`` (in the peer VM) returns each datagram as it
came. The sender reads the echoes and reports which sequence numbers came back:
downtime = the longest run of lost probes x the interval (the way tempest measures
live-migration downtime with a 0.2 s ping, at 20x the resolution). Executor
style: ``command(params) -> argv``, ``parse(output) -> dict``; the program is
this file run as a script (standard library only: it starts in milliseconds) inside a
VM namespace; the sender prints ``started`` when its first probe goes out.
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

PORT = 9788
MAX_INTERVAL_S = 0.010
HEADER = struct.Struct("!IQ")        # sequence number, send time (ns, sender's clock)


@dataclass(frozen=True)
class ProbeParams:
    dest: str
    duration_s: float
    interval_s: float = 0.005
    port: int = PORT


def command(p: ProbeParams) -> list[str]:
    if not 0 < p.interval_s <= MAX_INTERVAL_S:
        raise ValueError(f"probe interval {p.interval_s} s: use 0 < interval <= {MAX_INTERVAL_S}")
    return [sys.executable, __file__, "send", "--dest", p.dest,
            "--port", str(p.port), "--interval", str(p.interval_s), "--duration", str(p.duration_s)]


def echo_command(port: int = PORT, duration_s: float = 600.0) -> list[str]:
    return [sys.executable, __file__, "echo", "--port", str(port),
            "--duration", str(duration_s)]


def parse(output: str) -> dict:
    """The sender's JSON line -> the summary (received sequence numbers -> gaps)."""
    raw = json.loads(output.strip().splitlines()[-1])     # after the "started" line
    return summarize(raw["sent"], raw["received"], raw["interval_s"], raw["t0"])


def summarize(sent: int, received, interval_s: float, t0: float = 0.0) -> dict:
    """Loss and the longest outage. ``received``: sequence numbers that came back."""
    got = sorted(set(received))
    gaps, prev = [], -1
    for seq in got + [sent]:                 # a tail of losses counts up to the last sent
        if seq - prev > 1:
            gaps.append((prev + 1, seq - prev - 1))
        prev = seq
    first, longest = max(gaps, key=lambda g: g[1]) if gaps else (None, 0)
    return {"sent": sent, "received": len(got), "lost": sent - len(got),
            "loss_pct": 100.0 * (sent - len(got)) / sent if sent else 0.0,
            "downtime_ms": longest * interval_s * 1000.0, "outages": len(gaps),
            "outage_start_s": None if first is None else t0 + first * interval_s,
            "interval_ms": interval_s * 1000.0}


def _send(a) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    received, seq = set(), 0
    print("started", flush=True)
    t0 = time.time()
    start = time.monotonic()
    end = start + a.duration
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = start + seq * a.interval
        if now >= due:
            try:
                s.sendto(HEADER.pack(seq, time.monotonic_ns()), (a.dest, a.port))
            except OSError:
                pass                                # no route / neighbour yet: a lost probe
            seq += 1
            continue
        if select.select([s], [], [], due - now)[0]:
            _drain(s, received)
    deadline = time.monotonic() + 0.2               # late echoes of the last probes
    while time.monotonic() < deadline:
        if select.select([s], [], [], 0.02)[0]:
            _drain(s, received)
    return {"sent": seq, "received": sorted(received), "interval_s": a.interval, "t0": t0}


def _drain(s, received) -> None:
    while True:
        try:
            data = s.recv(64)
        except BlockingIOError:
            return
        if len(data) >= HEADER.size:
            received.add(HEADER.unpack_from(data)[0])


def _echo(a) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", a.port))
    end = time.monotonic() + a.duration
    while time.monotonic() < end:
        if select.select([s], [], [], 0.5)[0]:
            data, peer = s.recvfrom(64)
            s.sendto(data, peer)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="vnetbench.faults.probe")
    sub = p.add_subparsers(dest="mode", required=True)
    snd = sub.add_parser("send")
    snd.add_argument("--dest", required=True)
    snd.add_argument("--port", type=int, default=PORT)
    snd.add_argument("--interval", type=float, default=0.005)
    snd.add_argument("--duration", type=float, required=True)
    ech = sub.add_parser("echo")
    ech.add_argument("--port", type=int, default=PORT)
    ech.add_argument("--duration", type=float, default=600.0)
    a = p.parse_args(argv)
    if a.mode == "send":
        print(json.dumps(_send(a)), flush=True)
    else:
        _echo(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
