"""Unidirectional UDP, 1 and 5 parallel sessions (seed 003 row 3), loss measured
at the receiver (iperf3's server side), optional CBR background flow (000_...)."""

from __future__ import annotations

import subprocess
from contextlib import ExitStack

from vnetbench.battery.common import repeat, result
from vnetbench.battery.session import iperf3_server, stop
from vnetbench.results.record import now
from vnetbench.traffic import iperf3

BACKGROUND_PORT = iperf3.DEFAULT_PORT + 1


def run(dep, pair, sessions=(1, 5), seconds=60, bitrate_bps=None, length=None,
        background_bps=None, repetitions=3):
    """``bitrate_bps`` per session, None = unlimited; ``length`` = datagram payload
    (default: what the tenant MTU carries, tenant_mtu - 28)."""
    src, dst = pair.vms
    length = length or dep.testbed.network.tenant_mtu - 28
    out = []
    for p in sessions:
        started = now()

        def measure():
            res = _one(dep, src, dst, p, seconds, bitrate_bps, length, background_bps)
            return ({"gbps": res["bits_per_second"] / 1e9, "pps": res["pps"],
                     "loss_pct": res["lost_percent"], "jitter_ms": res["jitter_ms"],
                     "offered_gbps": res["sent_bits_per_second"] / 1e9},
                    {"gbps_intervals": res["samples_gbps"]})
        samples, extras = repeat(dep, repetitions, measure)
        params = {"sessions": p, "seconds": seconds, "bitrate_bps": bitrate_bps,
                  "length": length, "background_bps": background_bps}
        r = result(dep, pair, "udp_stream", params, samples, extras, started)
        r.labels["point"] = f"p={p}"
        out.append(r)
    return out


def _one(dep, src, dst, sessions, seconds, bitrate_bps, length, background_bps):
    client = iperf3.client_command(iperf3.ClientParams(
        dest=dep.ip(dst), seconds=seconds, protocol="udp", parallel=sessions,
        bitrate_bps=bitrate_bps, length=length))
    with ExitStack() as stack:
        stack.enter_context(iperf3_server(dep, dst))
        if background_bps:
            stack.enter_context(iperf3_server(dep, dst, BACKGROUND_PORT))
            bg = iperf3.client_command(iperf3.ClientParams(
                dest=dep.ip(dst), port=BACKGROUND_PORT, seconds=seconds + 2, protocol="udp",
                bitrate_bps=background_bps, length=length))
            stack.callback(stop, dep.popen(src, bg, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL), 10)
        return iperf3.parse(dep.exec(src, client, timeout=seconds + 30).stdout)

