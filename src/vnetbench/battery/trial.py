"""One iperf3 UDP trial on the virtual path, with the vSwitch's CPU over it: what every
RFC 2544 search (``rfc2544``) and the back-to-back bursts are made of. The method (what
a rate, a loss and a burst mean with iperf3) is in ``rfc2544``'s docstring."""

from __future__ import annotations

import subprocess
import time

from vnetbench import cpu
from vnetbench.battery.session import iperf3_server
from vnetbench.traffic import iperf3, ping

IPERF3_MAX_BURST = 1000      # iperf3 3.12: "invalid burst count (maximum = 1000)"


def udp_trial(dep, src, dst, payload, bps, seconds, burst=None, port=iperf3.DEFAULT_PORT,
              learn=True, settle_s=0.0, during=None, attempts=2) -> dict:
    """One iperf3 UDP trial at ``bps`` payload bits/s (0 = unpaced), CPU over the client.

    ``burst``: iperf3 ``-b bps/burst``. ``during(dep)`` runs while the stream flows
    (the latency probe) and its return value is passed back as ``during``. An iperf3
    failure (e.g. its control connection starved under overload) is retried once
    (``attempts``), so one hiccup does not void a long search; ``retried`` says so."""
    argv = iperf3.client_command(iperf3.ClientParams(
        dest=dep.reach(src, dst), port=port, seconds=seconds, protocol="udp",
        bitrate_bps=bps or None, length=payload))
    if burst:
        argv = with_burst(argv, burst)
    for attempt in range(1, attempts + 1):
        if learn:
            _learn(dep, src, dst)
        probe = None
        with iperf3_server(dep, dst, port):
            with cpu.Window(dep) as window:
                if during is None:
                    out = dep.exec(src, argv, timeout=seconds + 30).stdout
                else:
                    client = dep.popen(src, argv, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
                    try:
                        probe = during(dep)
                        out, _ = client.communicate(timeout=seconds + 30)
                    finally:
                        if client.poll() is None:
                            client.kill()
                            client.communicate()
        try:
            res = iperf3.parse(out)
            break
        except ValueError:
            if attempt == attempts:
                raise
    if settle_s:
        time.sleep(settle_s)
    packets, lost = res["packets"], max(0, res["lost_packets"])
    return {"bitrate_bps": bps, "burst": burst, "packets": packets, "lost_packets": lost,
            "loss_pct": 100.0 * lost / packets if packets else 100.0,
            "rx_fps": res["pps"],
            "tx_fps": res["sent_bits_per_second"] / (payload * 8),
            "seconds": res["seconds"], "retried": attempt > 1,
            **window.metrics(),
            "cpu": window.result, "during": probe}


def with_burst(argv, burst: int) -> list:
    """iperf3 argv with ``-b RATE`` turned into ``-b RATE/burst`` (iperf3 burst mode)."""
    if not 1 <= burst <= IPERF3_MAX_BURST:
        raise ValueError(f"burst {burst}: iperf3 takes 1..{IPERF3_MAX_BURST}")
    argv = list(argv)
    i = argv.index("-b") + 1
    argv[i] = f"{argv[i]}/{burst}"
    return argv


def _learn(dep, src, dst):
    """Learning frames: two echoes so ARP and the vSwitch's flows exist before a trial."""
    dep.exec(src, ping.command(ping.PingParams(dest=dep.reach(src, dst), count=2, interval_s=0.05,
                                               reply_timeout_s=1)), timeout=10)
