"""ICMP echo with iputils ping: per-reply RTT samples and the summary."""

from __future__ import annotations

import re
from dataclasses import dataclass

_REPLY = re.compile(r"icmp_seq=(\d+) .*time=([\d.]+) ms")
_SENT = re.compile(r"(\d+) packets transmitted, (\d+) received")
_RTT = re.compile(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_NO_ROUTE = re.compile(r"ping: (?:connect|sendto): (Network is unreachable|No route to host)")


@dataclass(frozen=True)
class PingParams:
    dest: str
    count: int = 10
    interval_s: float = 0.2        # below 0.2 s needs root (the testbed runs as root)
    payload: int = 56
    reply_timeout_s: float = 1.0


def command(p: PingParams) -> list[str]:
    return ["ping", "-n", "-c", str(p.count), "-i", f"{p.interval_s:g}", "-s", str(p.payload),
            "-W", f"{p.reply_timeout_s:g}", p.dest]


def parse(text: str) -> dict:
    """RTT samples in ms (in sequence order), counts and loss %; RTT stats are None without replies."""
    samples = [float(m.group(2)) for m in _REPLY.finditer(text)]
    sent = _SENT.search(text)
    if not sent:
        raise ValueError("not ping output: no 'packets transmitted' summary")
    tx, rx = int(sent.group(1)), int(sent.group(2))
    rtt = _RTT.search(text)
    stats = dict(zip(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"),
                     map(float, rtt.groups()))) if rtt else dict.fromkeys(
        ("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"))
    return {"transmitted": tx, "received": rx,
            "loss_pct": 100.0 * (tx - rx) / tx if tx else 100.0,
            **stats, "samples_ms": samples}


_TTL = re.compile(r"icmp_seq=\d+ ttl=(\d+)")


def ttls(text: str) -> list[int]:
    """The IP TTL of each echo reply, in order: a router on the path lowers it by one."""
    return [int(m.group(1)) for m in _TTL.finditer(text)]


def replies(text: str) -> dict[int, float]:
    """{icmp_seq: RTT ms} of the echoes answered: which ones were lost, not only how many."""
    return {int(m.group(1)): float(m.group(2)) for m in _REPLY.finditer(text)}


def reachability(stdout: str, stderr: str = "") -> dict:
    """{sent, received} of a reachability ping. A source with no route at all (its NIC
    gone: a cloud unplugs a deleted port from the guest) sends nothing and reaches
    nothing: iputils then prints no summary, only why, on stderr."""
    try:
        res = parse(stdout)
    except ValueError:
        why = _NO_ROUTE.search(stderr or "")
        if why is None:
            raise ValueError("not ping output: no 'packets transmitted' summary "
                             f"({(stderr or '').strip()[-200:] or 'nothing on stderr'})") from None
        return {"sent": 0, "received": 0, "unreachable": why.group(1)}
    return {"sent": res["transmitted"], "received": res["received"]}
