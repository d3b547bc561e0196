"""iperf3 throughput (TCP) and rate/loss/jitter (UDP): server and client argv, and the -J parser.

Semantics worth knowing (verified against iperf 3.12 on Linux, see tests/data/iperf3/README.md):

* ``-M`` sets TCP_MAXSEG on the *data* sockets only; the control connection keeps the path MSS.
  The server re-creates its listener with the client's MSS, so both SYN and SYN-ACK carry it.
* ``-M`` above the path allows is accepted silently and clamped by the kernel: iperf3's JSON still
  says ``start.tcp_mss`` = the requested value. ``-M`` below 88 fails (EINVAL), see ``mss.py``.
* ``start.tcp_mss_default`` (no ``-M``) is the kernel's send MSS, i.e. the payload per segment
  (1448 on MTU 1500 with timestamps), not the MSS option value (1460) seen in the SYN.
* The client's per-interval figures are measured on the client's side: the sender's for a
  forward test, the receiver's with ``reverse=True``; ``samples_side`` says which.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

DEFAULT_PORT = 5201


@dataclass(frozen=True)
class ServerParams:
    bind: str
    port: int = DEFAULT_PORT
    one_off: bool = True            # -1: serve one test, then exit (nothing left running)
    interval_s: float | None = None  # -i: the server's own reporting interval (--get-server-output)


@dataclass(frozen=True)
class ClientParams:
    dest: str
    port: int = DEFAULT_PORT
    seconds: int = 10
    protocol: str = "tcp"           # 'tcp' | 'udp'
    mss: int | None = None          # -M, TCP only; Linux refuses < 88 (use mss.plan_mss)
    parallel: int = 1               # -P streams; results are summed over them
    bitrate_bps: int | None = None  # -b; TCP: None = unlimited; UDP: None = unlimited ('-b 0')
    length: int | None = None       # -l; UDP: datagram payload bytes; TCP: write size
    omit_s: int = 0                 # -O: warm-up seconds left out of the results
    json: bool = True               # -J; parse() needs it (False only for a human look)
    reverse: bool = False           # -R: the server sends, the client receives
    interval_s: float | None = None  # -i: seconds per sample (iperf3: 0.1 .. 60; default 1)
    connect_timeout_ms: int | None = None   # --connect-timeout: give up the control connection
    server_output: bool = False     # --get-server-output: the server's own JSON comes back

    def __post_init__(self):
        if self.protocol not in ("tcp", "udp"):
            raise ValueError(f"protocol must be 'tcp' or 'udp', not {self.protocol!r}")
        if self.seconds < 1:
            raise ValueError(f"seconds must be >= 1, not {self.seconds}")
        if self.parallel < 1:
            raise ValueError(f"parallel must be >= 1, not {self.parallel}")
        if self.omit_s < 0:
            raise ValueError(f"omit_s must be >= 0, not {self.omit_s}")
        if self.mss is not None:
            if self.protocol != "tcp":
                raise ValueError("mss (-M) applies to TCP only")
            if self.mss < 88:
                raise ValueError(f"mss {self.mss}: Linux refuses TCP_MAXSEG below 88 "
                                 "(iperf3: 'unable to set TCP/SCTP MSS'); see mss.plan_mss")
        if self.bitrate_bps is not None and self.bitrate_bps < 0:
            raise ValueError(f"bitrate_bps must be >= 0, not {self.bitrate_bps}")
        if self.length is not None and self.length < 1:
            raise ValueError(f"length must be >= 1, not {self.length}")
        if self.interval_s is not None and not 0.1 <= self.interval_s <= 60:
            raise ValueError(f"interval_s must be within 0.1 .. 60, not {self.interval_s}")


def server_command(p: ServerParams) -> list[str]:
    return ["iperf3", "-s", "-B", p.bind, "-p", str(p.port), *(["-1"] if p.one_off else []),
            *(["-i", f"{p.interval_s:g}"] if p.interval_s is not None else []), "-J"]


def client_command(p: ClientParams) -> list[str]:
    argv = ["iperf3", "-c", p.dest, "-p", str(p.port), "-t", str(p.seconds)]
    if p.protocol == "udp":
        argv += ["-u", "-b", str(p.bitrate_bps or 0)]
    elif p.bitrate_bps is not None:
        argv += ["-b", str(p.bitrate_bps)]
    if p.length is not None:
        argv += ["-l", str(p.length)]
    if p.mss is not None:
        argv += ["-M", str(p.mss)]
    if p.parallel != 1:
        argv += ["-P", str(p.parallel)]
    if p.omit_s:
        argv += ["-O", str(p.omit_s)]
    if p.reverse:
        argv.append("-R")
    if p.interval_s is not None:
        argv += ["-i", f"{p.interval_s:g}"]
    if p.connect_timeout_ms is not None:
        argv += ["--connect-timeout", str(p.connect_timeout_ms)]
    if p.server_output:
        argv.append("--get-server-output")
    if p.json:
        argv.append("-J")
    return argv


def _server_samples(server: dict | None, duration: float | None = None) -> list | None:
    """The server's own per-interval Gbit/s when it was the receiver (--get-server-output),
    over the client's test DURATION (its ``-t``) only."""
    if not isinstance(server, dict):
        return None
    ivs = [i for i in server.get("intervals", []) if not i["sum"].get("omitted")]
    if not ivs or ivs[0]["sum"].get("sender", False):
        return None
    # the client's timer, not the server, sets the test's length: the server's intervals
    # go on until the client's TEST_END arrives, after the last datagram. That wait is not
    # the stream. Mostly it is a short last interval (5.1 Mbit/s behind a 10 Mbit/s limit
    # on vrouter). But TEST_END is a TCP segment on the same path: into a shaped port whose
    # queue the flood keeps full it can be tail-dropped, and TCP resends it an RTO (~1 s)
    # later; the server then reports a whole extra interval holding only the queue's drain
    # (93 datagrams, 1.06 Mbit/s, behind a 10 Mbit/s limit on ovs and ovs-openflow).
    nominal = max(i["sum"]["seconds"] for i in (ivs[:-1] or ivs))     # the reporting interval
    if duration:
        ivs = ivs[:max(1, math.ceil(duration / nominal - 1e-6))]
    if len(ivs) > 1 and ivs[-1]["sum"]["seconds"] < 0.9 * nominal:
        ivs = ivs[:-1]
    return [i["sum"]["bits_per_second"] / 1e9 for i in ivs]


RECEIVER_WINDOW_FLOOR = 0.5    # of the sender's seconds


def _receiver_window(rx: dict, tx: dict) -> float:
    """The seconds the receiver's rates are over: its own, unless they are under half the
    sender's. iperf3's receiver time runs from the receiver's start of the test to its
    end; a flow set up late under load left one near zero (6.5e18 pps for one UDP flow of
    a ``reproduce 000`` run), so the received amount is then divided by the sender's
    window, which it arrived within (a lower, never an inflated, rate)."""
    if tx.get("seconds") and rx["seconds"] < RECEIVER_WINDOW_FLOOR * tx["seconds"]:
        return tx["seconds"]
    return rx["seconds"]


def parse(json_text: str) -> dict:
    """Receiver-side results of a client's ``-J`` output, summed over the streams.

    TCP: bits_per_second, bytes, seconds (end.sum_received), retransmits (end.sum_sent).
    Rates are over the receiver's seconds (``receiver_seconds``), or the sender's when
    those are implausibly short (``_receiver_window``; ``seconds`` says which was used).
    UDP: bits_per_second, bytes, seconds, packets (datagrams the receiver expected, i.e. sent),
    lost_packets, lost_percent, jitter_ms (end.sum_received) and pps = received datagrams / s.
    Both: sent_bits_per_second, samples_gbps (one per non-omitted interval), samples_side,
    receiver_samples_gbps (the receiver's own intervals: the client's when it received,
    else the server's from ``--get-server-output``; None when neither is there),
    cpu_host_pct / cpu_remote_pct, pmtu (TCP: smallest path MTU the sender saw, else None),
    mss_requested (-M, as iperf3 echoes it, even when the kernel clamped it).
    Raises ValueError on non-JSON input and with iperf3's own message on an ``"error"``.
    """
    try:
        d = json.loads(json_text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not iperf3 JSON output: {exc}") from None
    if not isinstance(d, dict) or "start" not in d:
        raise ValueError("not iperf3 JSON output: no 'start' object")
    if d.get("error"):
        raise ValueError(f"iperf3: {d['error']}")
    start, end = d["start"], d.get("end") or {}
    try:
        ts = start["test_start"]
        rx, tx = end["sum_received"], end["sum_sent"]
    except KeyError as exc:
        raise ValueError(f"iperf3 JSON without {exc.args[0]!r} (needs iperf3 >= 3.12, -J, "
                         "and a test that ran to its end)") from None
    protocol = ts["protocol"].lower()
    window = _receiver_window(rx, tx)
    intervals = [i for i in d.get("intervals", []) if not i["sum"].get("omitted")]
    cpu = end.get("cpu_utilization_percent", {})
    pmtus = [s["pmtu"] for i in intervals for s in i.get("streams", []) if "pmtu" in s]
    res = {
        "protocol": protocol,
        "streams": ts["num_streams"],
        "reverse": bool(ts.get("reverse")),
        "bits_per_second": rx["bits_per_second"] if window == rx["seconds"] else
        rx["bytes"] * 8 / window,
        "bytes": rx["bytes"],
        "seconds": window,
        "receiver_seconds": rx["seconds"],
        "sent_bits_per_second": tx["bits_per_second"],
        "samples_gbps": [i["sum"]["bits_per_second"] / 1e9 for i in intervals],
        "samples_side": ("sender" if intervals[0]["sum"].get("sender") else "receiver")
        if intervals else None,
        "cpu_host_pct": cpu.get("host_total"),
        "cpu_remote_pct": cpu.get("remote_total"),
        "pmtu": min(pmtus) if pmtus else None,
        "mss_requested": start.get("tcp_mss"),
    }
    res["receiver_samples_gbps"] = res["samples_gbps"] if res["samples_side"] == "receiver" else \
        _server_samples(d.get("server_output_json"), ts.get("duration"))
    if protocol == "tcp":
        res["retransmits"] = tx.get("retransmits")
    elif protocol == "udp":
        received = rx["packets"] - rx["lost_packets"]
        res.update(packets=rx["packets"], lost_packets=rx["lost_packets"],
                   lost_percent=rx["lost_percent"], jitter_ms=rx["jitter_ms"],
                   received_packets=received,
                   pps=received / window if window else 0.0,
                   samples_pps=[i["sum"]["packets"] / i["sum"]["seconds"] for i in intervals])
    else:
        raise ValueError(f"iperf3 protocol {ts['protocol']!r} is not TCP or UDP")
    return res
