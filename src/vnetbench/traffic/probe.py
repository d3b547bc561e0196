"""Sequence-numbered UDP probes: the suite's one probe tool, one way or round trip.

Each datagram carries a marker, its sequence number and its send time on
CLOCK_MONOTONIC, which every network namespace of the machine shares.

* one way (``send`` -> ``recv``): the receiver timestamps arrivals, so "when did traffic
  stop" is read from the probes themselves (the send time of the last one that arrived);
* round trip (``rtt`` -> ``echo``): the echo returns each datagram as it came and the
  sender counts which came back: downtime = the longest run of lost probes x the
  interval (how tempest measures live-migration downtime with a 0.2 s ping, at up to
  40x the resolution), with no clock needed on the far side.

The executor part (``*_command``, ``parse``, ``summarize``) is pure. Running this module
is the tool (``python -m vnetbench.traffic.probe send|recv|rtt|echo ...``): one JSON
line of results (every mode but ``echo`` prints a ``ready`` line first).
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
    first_within: float = 0.0      # > 0: ``seconds`` count from the first probe, which may
                                   # take this long (a sender a slow guest starts late)


MAX_RTT_INTERVAL_MS = 10.0     # downtime resolution the migration rows promise


@dataclass(frozen=True)
class RoundTripParams:
    dest: str
    port: int
    interval_ms: float
    seconds: float
    marker: int

    def __post_init__(self):
        if not 0 < self.interval_ms <= MAX_RTT_INTERVAL_MS:
            raise ValueError(f"probe interval {self.interval_ms} ms: use 0 < interval <= "
                             f"{MAX_RTT_INTERVAL_MS:g}")


def _tool(mode: str, native: bool) -> list[str]:
    """This module run by Python, or (``native``: guests carry no Python) its Go build in
    vnetbench-flowgen (tools/flowgen/probe.go: the same datagrams, flags and JSON lines)."""
    if native:
        from vnetbench.traffic import flowgen
        return [flowgen.binary(), f"probe-{mode}"]
    return [sys.executable, "-m", "vnetbench.traffic.probe", mode]


def send_command(p: SendParams, native: bool = False) -> list[str]:
    return [*_tool("send", native), "--dest", p.dest,
            "--port", str(p.port), "--interval-ms", f"{p.interval_ms:g}",
            "--seconds", f"{p.seconds:g}", "--marker", str(p.marker),
            *(["--broadcast"] if p.broadcast else [])]


def recv_command(p: RecvParams, native: bool = False) -> list[str]:
    return [*_tool("recv", native), "--port", str(p.port),
            "--seconds", f"{p.seconds:g}", "--marker", str(p.marker),
            *(["--first-within", f"{p.first_within:g}"] if p.first_within else [])]


def clock_command() -> list[str]:
    """The guest's CLOCK_MONOTONIC (Go tool only: where Python runs, the clock is ours)."""
    return [*_tool("clock", True)]


def parse_clock(text: str) -> int:
    return int(json.loads(text.strip().splitlines()[-1])["monotonic_ns"])


def roundtrip_command(p: RoundTripParams) -> list[str]:
    return [sys.executable, "-m", "vnetbench.traffic.probe", "rtt", "--dest", p.dest,
            "--port", str(p.port), "--interval-ms", f"{p.interval_ms:g}",
            "--seconds", f"{p.seconds:g}", "--marker", str(p.marker)]


def echo_command(port: int, seconds: float) -> list[str]:
    return [sys.executable, "-m", "vnetbench.traffic.probe", "echo", "--port", str(port),
            "--seconds", f"{seconds:g}", "--marker", "0"]


def summarize(sent: int, received, interval_ms: float) -> dict:
    """Loss and the longest outage of a round trip. ``received``: sequence numbers that
    came back (a tail of losses counts up to the last one sent)."""
    got = sorted(set(received))
    gaps, prev = [], -1
    for seq in got + [sent]:
        if seq - prev > 1:
            gaps.append((prev + 1, seq - prev - 1))
        prev = seq
    first, longest = max(gaps, key=lambda g: g[1]) if gaps else (None, 0)
    return {"sent": sent, "received": len(got), "lost": sent - len(got),
            "loss_pct": 100.0 * (sent - len(got)) / sent if sent else 0.0,
            "downtime_ms": longest * interval_ms, "outages": len(gaps),
            "outage_start_s": None if first is None else first * interval_ms / 1000.0,
            "interval_ms": interval_ms}


def parse(text: str) -> dict:
    """The tool's last JSON line. send -> sent, errors, first_ns, last_ns (last sent),
    end_ns (last attempt, sent or failed), interval_ns;
    recv -> received, probes ([seq, send_ns, recv_ns] in arrival order); rtt -> sent,
    received (sequence numbers that came back), interval_ms."""
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
    first = last = end = None
    for seq in range(total):
        delay = start + seq * interval - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        now = end = time.monotonic_ns()     # end: the last attempt, sent or not
        try:
            s.sendto(HEADER.pack(MAGIC, a.marker, seq, now), (a.dest, a.port))
            sent += 1
            first = first if first is not None else now
            last = now
        except OSError:          # e.g. ENETUNREACH, or ENOBUFS on a full queue
            errors += 1
        if seq == 0:             # the first probe is out: a caller may time its change by it
            print(json.dumps({"ready": True}), flush=True)
    return {"sent": sent, "errors": errors, "first_ns": first, "last_ns": last, "end_ns": end,
            "interval_ns": interval}


def _bound(port: int):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))     # unicast and broadcast alike
    return s


def recv(a) -> dict:
    s = _bound(a.port)
    print(json.dumps({"ready": True}), flush=True)
    end = time.monotonic() + a.seconds + a.first_within
    probes = []
    while (left := end - time.monotonic()) > 0:
        if not select.select([s], [], [], min(left, 0.1))[0]:
            continue
        data = s.recv(2048)
        now = time.monotonic_ns()
        if len(data) >= HEADER.size:
            magic, marker, seq, sent_ns = HEADER.unpack_from(data)
            if magic == MAGIC and marker == a.marker:
                if not probes and a.first_within:
                    end = now / 1e9 + a.seconds
                probes.append([seq, sent_ns, now])
    return {"received": len(probes), "probes": probes}


def rtt(a) -> dict:
    """Send every ``interval`` ms, collect the echoes in between; a short drain at the end."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    interval, seq, got = a.interval_ms / 1e3, 0, set()
    print(json.dumps({"ready": True}), flush=True)
    start = time.monotonic()
    end = start + a.seconds
    while (now := time.monotonic()) < end:
        due = start + seq * interval
        if now >= due:
            try:
                s.sendto(HEADER.pack(MAGIC, a.marker, seq, time.monotonic_ns()), (a.dest, a.port))
            except OSError:
                pass                      # no route / neighbour yet: a lost probe
            seq += 1
        elif select.select([s], [], [], due - now)[0]:
            _drain(s, a.marker, got)
    drain_end = time.monotonic() + 0.2    # late echoes of the last probes
    while time.monotonic() < drain_end:
        if select.select([s], [], [], 0.02)[0]:
            _drain(s, a.marker, got)
    return {"sent": seq, "received": sorted(got), "interval_ms": a.interval_ms}


def _drain(s, marker: int, got: set) -> None:
    while True:
        try:
            data = s.recv(2048)
        except BlockingIOError:
            return
        if len(data) >= HEADER.size:
            magic, mark, seq, _ = HEADER.unpack_from(data)
            if magic == MAGIC and mark == marker:
                got.add(seq)


def echo(a) -> None:
    """Return every datagram to its sender until ``seconds`` have passed; says when it
    listens (a sender started before would lose its first probes: counted as an outage)."""
    s = _bound(a.port)
    print(json.dumps({"ready": True}), flush=True)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        if select.select([s], [], [], 0.5)[0]:
            data, peer = s.recvfrom(2048)
            s.sendto(data, peer)


def main(argv=None):
    p = argparse.ArgumentParser(prog="vnetbench.traffic.probe")
    p.add_argument("mode", choices=["send", "recv", "rtt", "echo"])
    p.add_argument("--dest")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--marker", type=int, required=True)
    p.add_argument("--broadcast", action="store_true")
    p.add_argument("--first-within", type=float, default=0.0)
    a = p.parse_args(argv)
    if a.mode in ("send", "rtt") and not a.dest:
        p.error(f"{a.mode} needs --dest")
    if a.mode == "echo":
        echo(a)
        return
    print(json.dumps({"send": send, "recv": recv, "rtt": rtt}[a.mode](a)), flush=True)


if __name__ == "__main__":
    main()
