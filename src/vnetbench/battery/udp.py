"""Unidirectional UDP, 1 and 5 parallel sessions (seed 003 row 3), loss measured
at the receiver (iperf3's server side), optional CBR background (seed 000): one flow
beside the measured one on the pair, or seed 000's scheme among the VMs of the pair's
router (``background_flows``), each flow's delivered rate and loss recorded."""

from __future__ import annotations

import subprocess
import time
from contextlib import ExitStack

from vnetbench.battery.common import repeat, result
from vnetbench.battery.session import iperf3_server, stop
from vnetbench.results.record import now
from vnetbench.testbed.model import STICK
from vnetbench.traffic import iperf3

BACKGROUND_PORT = iperf3.DEFAULT_PORT + 1
#: the background's schemes: "pair" (one flow src -> dst beside the measured one), "seed000"
BACKGROUNDS = ("pair", "seed000")
#: seconds the background runs before (the measured flow's omitted start) and after it
BACKGROUND_MARGIN_S = 1
#: what a UDP stream's set-up (a datagram each way) takes on a quiet network, with room
STREAM_SETUP_S = 0.3


def background_flows(testbed, pair, scheme: str = "pair") -> list[tuple[str, str]]:
    """(source VM, destination VM) of each CBR background flow. "seed000": seed 000's, among
    the VMs on the pair's router's two vnets (VLANs). Behind a router on a stick each VM
    sends to one VM of the other VLAN (its section 4.2.2: PC1 -> PC4, PC2 -> PC3, PC3 -> PC1,
    PC4 -> PC2: four flows cross the trunk each way); otherwise each VM sends to every
    other one (4.2.1, the L3 switch: each PC to the other three)."""
    if scheme == "pair":
        return [tuple(pair.vms)]
    if scheme != "seed000":
        raise ValueError(f"udp_stream: background must be one of {', '.join(BACKGROUNDS)}, not {scheme!r}")
    router = testbed.router_of(pair.vnet)
    if router is None or len(router.ports) != 2:
        raise ValueError(f"udp_stream: background seed000 needs the pair's vnet {pair.vnet!r} on a router "
                         "between two vnets (seed 000's two VLANs)")
    a, b = ([vm.name for vm in testbed.vms if any(n.vnet == p.vnet for n in vm.nics)] for p in router.ports)
    if router.routing == STICK:
        if len(a) != len(b):
            raise ValueError(f"udp_stream: background seed000 behind router {router.name!r} pairs each VM "
                             f"with one of the other VLAN: {len(a)} and {len(b)} VMs")
        return [*zip(a, reversed(b)), *zip(b, a)]
    vms = a + b
    return [(s, d) for s in vms for d in vms if s != d]


def run(dep, pair, sessions=(1, 5), seconds=60, bitrate_bps=None, length=None,
        background_bps=None, repetitions=3, background="pair", background_length=None):
    """``bitrate_bps`` per session, None = unlimited; ``length`` = datagram payload
    (default: what the tenant MTU carries, tenant_mtu - 28). ``background_bps``: each
    background flow's rate (None: no background); ``background``: its scheme
    (``background_flows``); ``background_length``: its payload (default ``length``; seed
    000: 500 bytes)."""
    src, dst = pair.vms
    length = length or dep.testbed.network.tenant_mtu - 28
    flows = background_flows(dep.testbed, pair, background) if background_bps else []
    bg = {"bps": background_bps, "length": background_length or length, "flows": flows}
    out = []
    for p in sessions:
        started = now()

        def measure():
            res, bg_res = _one(dep, src, dst, p, seconds, bitrate_bps, length, bg)
            extras = {"gbps_intervals": res["samples_gbps"]}
            if flows:
                extras["background"] = bg_res
            return ({"gbps": res["bits_per_second"] / 1e9, "pps": res["pps"],
                     "loss_pct": res["lost_percent"], "jitter_ms": res["jitter_ms"],
                     "offered_gbps": res["sent_bits_per_second"] / 1e9, **background_loss(bg_res)}, extras)
        samples, extras = repeat(dep, repetitions, measure)
        params = {"sessions": p, "seconds": seconds, "bitrate_bps": bitrate_bps,
                  "length": length, "background_bps": background_bps}
        if flows:
            params.update(background=background, background_length=bg["length"],
                          background_flows=[list(f) for f in flows])
        r = result(dep, pair, "udp_stream", params, samples, extras, started)
        r.labels["point"] = f"p={p}"
        out.append(r)
    return out


def _one(dep, src, dst, sessions, seconds, bitrate_bps, length, bg):
    """The measured flow's receiver-side results, and each background flow's (delivered
    Gbit/s and loss %, or the reason it has none) once it ran to its end. With a background
    the measured flow starts first, on a quiet network (iperf3 sets a UDP stream up with a
    datagram each way, which a loaded switch may drop: no measurement then, not a lossy
    one); the background follows at once, and the measured flow's first
    BACKGROUND_MARGIN_S seconds, while it starts, are left out (iperf3 ``-O``)."""
    margin = BACKGROUND_MARGIN_S if bg["flows"] else 0
    client = iperf3.client_command(iperf3.ClientParams(
        dest=dep.reach(src, dst), seconds=seconds + margin, omit_s=margin, protocol="udp", parallel=sessions,
        bitrate_bps=bitrate_bps, length=length))
    with ExitStack() as stack:
        stack.enter_context(iperf3_server(dep, dst))
        servers = []
        for i, (_, d) in enumerate(bg["flows"]):    # one server each: several flows share a VM
            servers.append(BACKGROUND_PORT + i)
            stack.enter_context(iperf3_server(dep, d, BACKGROUND_PORT + i))
        measured = dep.popen(src, client, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        stack.callback(stop, measured, 10)
        clients = []
        if bg["flows"]:
            time.sleep(STREAM_SETUP_S)
        for port, (s, d) in zip(servers, bg["flows"]):
            argv = iperf3.client_command(iperf3.ClientParams(
                dest=dep.reach(s, d), port=port, seconds=seconds + 2 * margin, protocol="udp",
                bitrate_bps=bg["bps"], length=bg["length"]))
            clients.append(dep.popen(s, argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
            stack.callback(stop, clients[-1], 10)
        try:
            text = measured.communicate(timeout=seconds + margin + 30)[0]
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"udp_stream: the measured iperf3 client in {src} did not end within "
                               f"{seconds + margin + 30:.0f} s") from None
        res = iperf3.parse(text)
        return res, [_background(flow, c, seconds) for flow, c in zip(bg["flows"], clients)]


def background_loss(flows: list[dict]) -> dict:
    """The background's mean loss over its flows that reported one, as a metric: seed 000
    says its background "does not saturate the network", which a reproduction judges on it
    (a flow whose iperf3 failed has no loss to count; it stays in the record's extras)."""
    losses = [f["loss_pct"] for f in flows if "loss_pct" in f]
    return {"background_loss_pct": sum(losses) / len(losses)} if losses else {}


def _background(flow, client, seconds) -> dict:
    try:
        text = client.communicate(timeout=seconds + 30)[0]
        r = iperf3.parse(text)
        return {"src": flow[0], "dst": flow[1], "gbps": r["bits_per_second"] / 1e9, "loss_pct": r["lost_percent"]}
    except (ValueError, subprocess.TimeoutExpired) as exc:
        return {"src": flow[0], "dst": flow[1], "error": str(exc)[:200]}
