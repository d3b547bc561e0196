"""RFC 2544 on the virtual path (REFERENCE §2, seed 002): throughput (NDR, and the
FD.io-style PDR at 0.5 % loss) by binary search, latency at the throughput rate,
the frame-loss curve, and back-to-back bursts -- per frame size, CPU% beside each point.

What is measured, honestly:

* **Frame size is the INNER (tenant) Ethernet frame including FCS**, as the VM sends
  it: 14 Ethernet + 20 IPv4 + 8 UDP + payload + 4 FCS, so the iperf3 UDP payload
  (``-l``) is ``frame - 46``. The outer (encapsulated) frame on the underlay is larger
  by the tunnel overhead (VXLAN/Geneve 50, GRE 42). Records say ``frame_size_kind:
  'inner'``. Sizes the tenant MTU cannot carry unfragmented (frame > tenant MTU + 18)
  are skipped and listed; a jumbo point (the largest frame the tenant MTU carries) is
  added when the tenant MTU exceeds 1500. iperf3's smallest UDP block is 16 bytes
  (frame 62), so every standard size fits.
* **Offered rate -> iperf3 ``-b``**: iperf3 paces by *UDP payload* bits (verified on
  iperf 3.12: ``-l 18 -b 800000`` sends 5,554 datagrams/s = 800000 / (18 * 8)), so a
  rate of F frames/s is ``-b F * (frame - 46) * 8``. Rates are in frames/s
  throughout; Gbit/s figures are inner frame bits incl. FCS (``fps * frame * 8``).
  iperf3 paces to an *average* rate with a 1 ms timer, not with a constant inter-frame
  gap, so a "rate" is a train of micro-bursts -- milder than a hardware tester's CBR
  at low rates, similar at high rates.
* **Loss** is iperf3's receiver count (sequence-number gaps, ``lost_packets``):
  end to end, i.e. drops anywhere between the sending and the receiving socket
  (sender VM qdisc/veth, vSwitch, tunnel, receiver backlog and socket buffer) --
  the "device under test" is the whole virtual path, both VM stacks included.
  Datagrams lost at the very tail of a trial are not seen by sequence gaps.
* **Throughput search**: first one unpaced trial (``-b 0``); its *receive* rate is
  the ceiling and the search's upper bound (times ``ceiling_factor``). Then one
  FD.io CSIT MLRsearch (``battery/mlr.py``) finds both the highest rate with zero lost
  frames (NDR, RFC 1242 throughput) and the highest rate with loss <=
  ``pdr_loss_pct`` (PDR): every trial narrows both brackets. It is bounded by
  ``2 * max_trials`` trials (the budget of the two binary searches it replaced) and
  stops when each bracket is within ``resolution_pct`` of its upper bound. On a CPU-starved box the paced NDR can
  exceed the unpaced receive rate (an unpaced sender steals the receiver's CPU);
  ``ndr_at_ceiling`` flags a search whose upper bound passed.
* **Trial sequence**: RFC 2544 sends learning frames, waits 2 s, runs the trial, waits
  2 s, settles >= 5 s. Here: two ICMP echoes as learning frames (ARP and the
  vSwitch's flow for the pair), then the trial (``trial_s``; RFC: 60), then
  ``settle_s`` (RFC: 5). The quick profile uses 1-2 s trials and no settle.
* **Latency** is ICMP echo RTT (iputils ping, ``latency_count`` echoes of the frame
  size under test) sent *during* a trial at the NDR rate -- round trip, not the RFC's
  one-way tagged-frame latency; avg and p99 are reported with the stream's own loss.
* **Latency at set input rates** (``latency_at``, seed 002's Figure 10 and Table 3): the
  same echo RTT, with the input rate the seed varied set instead of the NDR: at each of
  ``latency_rates`` frames/s and each of ``latency_loads`` % of the ceiling (above 100 %:
  overload). A rate the echoes alone reach (<= 1 / ``latency_interval_s``) is the echoes
  alone, one every 1 / rate s (1 fps: ``latency_at_count`` echoes a second apart, the
  path idle between them); a higher rate is a stream at that rate with the echoes in it.
  Records: ``rfc2544_latency`` at the point "<frame>B latency at <rate> fps" or "... at
  <pct>% of ceiling", ``latency_kind`` saying which.
* **Frame loss curve**: loss at ``loss_steps`` % of the ceiling (default 10..100 in
  10 % steps; RFC: from 100 % down until two successive lossless steps).
* **Back-to-back is an approximation.** iperf3 cannot send frames with the minimum
  inter-frame gap: there is no wire rate on a veth and iperf3 has no such mode. The
  closest honest approximation used here is iperf3's burst mode ``-b RATE/N``: N
  datagrams written in a tight ``sendto()`` loop (back to back *at the sender's
  syscall speed*, reported as ``sender_fps``, the unpaced sender rate of the ceiling
  trial), one burst every gap (at least ``b2b_gap_s``, stretched so the mean rate stays
  <= ``b2b_max_load_pct`` % of the ceiling: only the burst, not the load, may lose).
  The search finds the longest burst N with zero loss over every burst of a
  ``trial_s`` trial (trial_s / gap bursts, standing in for the RFC's repetition of the
  trial). iperf3 caps N at 1,000 frames: ``burst_at_max`` says the true figure may be
  larger. Records carry ``back_to_back_kind: 'iperf3-syscall-burst'``.
* **CPU%** is the vSwitch CPU (all hosts, 100 % = one CPU; and softirq) over the trial
  that produced each point: the NDR trial for throughput, the latency trial, each
  loss-curve trial, the longest lossless burst trial.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace

from vnetbench import cpu
from vnetbench.battery import mlr
from vnetbench.battery.trial import IPERF3_MAX_BURST, udp_trial
from vnetbench.battery.common import collect, labels, result
from vnetbench.results.record import now
from vnetbench.results.stats import percentiles
from vnetbench.traffic import ping

DEFAULT_FRAME_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)
FRAME_OVERHEAD = 46          # inner Ethernet 14 + IPv4 20 + UDP 8 + FCS 4 (payload = frame - 46)
L2_OVER_IP = 18              # Ethernet header 14 + FCS 4: largest frame = tenant MTU + 18
IPERF3_MIN_PAYLOAD = 16      # iperf3 3.12: "block size invalid (minimum = 16 bytes)"
STANDARD_MAX_FRAME = 1518
LOSS_STEPS = tuple(range(10, 101, 10))
MEASURES = ("throughput", "latency", "latency_at", "frame_loss", "back_to_back")
LATENCY_RATES = (1, 1000)    # frames/s: seed 002, Figure 10 (1 fps against 1,000 fps)
LATENCY_LOADS = (50, 150)    # % of the ceiling: seed 002, Table 3 (below the knee, overload)


# -- frame sizes and rates (pure) ------------------------------------------------------

def payload_of(frame: int) -> int:
    """UDP payload bytes of an inner Ethernet frame of ``frame`` bytes incl. FCS."""
    return frame - FRAME_OVERHEAD


def max_frame(tenant_mtu: int) -> int:
    """Largest inner frame (incl. FCS) the tenant MTU carries unfragmented."""
    return tenant_mtu + L2_OVER_IP


def plan_frames(tenant_mtu: int, sizes=None, jumbo: bool = True) -> tuple[list, list]:
    """(frame sizes to measure, sizes skipped because the tenant MTU cannot carry them).

    The jumbo point, when the tenant MTU allows one, is the largest frame it carries."""
    top = max_frame(tenant_mtu)
    wanted = sorted(set(sizes or DEFAULT_FRAME_SIZES))
    too_small = [s for s in wanted if payload_of(s) < IPERF3_MIN_PAYLOAD]
    if too_small:
        raise ValueError(f"frame sizes {too_small}: iperf3's smallest UDP payload is "
                         f"{IPERF3_MIN_PAYLOAD} B, i.e. frames >= {IPERF3_MIN_PAYLOAD + FRAME_OVERHEAD}")
    use = [s for s in wanted if s <= top]
    skipped = [s for s in wanted if s > top]
    if jumbo and sizes is None and top > STANDARD_MAX_FRAME:
        use.append(top)
    return use, skipped


def bitrate_bps(fps: float, frame: int) -> int:
    """iperf3 ``-b`` for ``fps`` frames/s: iperf3 counts UDP payload bits."""
    return max(1, round(fps * payload_of(frame) * 8))


def frame_gbps(fps: float, frame: int) -> float:
    """Inner frame bits incl. FCS per second, in Gbit/s."""
    return fps * frame * 8 / 1e9


# -- the test --------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    trial_s: int = 2                 # RFC 2544: 60
    resolution_pct: float = 2.0      # bracket width: NDR/PDR % of the upper bound; b2b of the ceiling
    max_trials: int = 10             # per search: NDR + PDR together 2 x this, back-to-back this
    pdr_loss_pct: float = 0.5
    ceiling_factor: float = 1.0      # search upper bound = ceiling * this
    settle_s: float = 0.0            # after every trial; RFC 2544: >= 5
    loss_steps: tuple = LOSS_STEPS   # % of the ceiling
    latency_count: int = 100
    latency_interval_s: float = 0.01
    latency_rates: tuple = LATENCY_RATES   # latency_at: input rates, frames/s
    latency_loads: tuple = LATENCY_LOADS   # latency_at: % of the ceiling
    latency_at_count: int = 5              # latency_at: echoes at a rate the echoes alone make
    b2b_gap_s: float = 0.1           # least time between bursts
    b2b_max_load_pct: float = 25.0   # mean rate of a burst trial, % of the ceiling
    b2b_resolution: int = 10         # frames

    def __post_init__(self):
        if self.trial_s != int(self.trial_s) or self.trial_s < 1:
            raise ValueError(f"trial_s must be a whole number of seconds >= 1 (iperf3 -t), "
                             f"not {self.trial_s}")
        if not 0 < self.resolution_pct < 100:
            raise ValueError(f"resolution_pct must be in (0, 100), not {self.resolution_pct}")
        if any(not 0 < s <= 1000 for s in self.loss_steps):
            raise ValueError(f"loss_steps are % of the ceiling in (0, 1000]: {self.loss_steps}")
        if any(not 0 < s <= 1000 for s in self.latency_loads):
            raise ValueError(f"latency_loads are % of the ceiling in (0, 1000]: {self.latency_loads}")
        if any(not 0 < r <= 10_000_000 for r in self.latency_rates):
            raise ValueError(f"latency_rates are frames/s in (0, 10,000,000]: {self.latency_rates}")


def run(dep, pair, frame_sizes=None, trial_s=2, resolution_pct=2.0, max_trials=10,
        repetitions=1, measures=MEASURES, loss_steps=LOSS_STEPS, latency_count=100,
        pdr_loss_pct=0.5, ceiling_factor=1.0, settle_s=0.0, b2b_gap_s=0.1,
        b2b_max_load_pct=25.0, b2b_resolution=10, jumbo=True, latency_rates=LATENCY_RATES,
        latency_loads=LATENCY_LOADS, latency_at_count=5) -> list:
    """RFC 2544 per frame size for one pair; see the module docstring for the method.

    ``frame_sizes``: inner frames incl. FCS (default 64..1518, plus jumbo if the tenant
    MTU allows); ``measures``: any of throughput, latency, latency_at, frame_loss,
    back_to_back (latency needs throughput; latency_at's ``latency_loads`` the ceiling).
    ``repetitions`` repeats every search / point.
    """
    unknown = set(measures) - set(MEASURES)
    if unknown:
        raise ValueError(f"rfc2544: unknown measures {sorted(unknown)}; use {', '.join(MEASURES)}")
    cfg = Config(trial_s=trial_s, resolution_pct=resolution_pct, max_trials=max_trials,
                 pdr_loss_pct=pdr_loss_pct, ceiling_factor=ceiling_factor, settle_s=settle_s,
                 loss_steps=tuple(loss_steps), latency_count=latency_count, b2b_gap_s=b2b_gap_s,
                 b2b_max_load_pct=b2b_max_load_pct, b2b_resolution=b2b_resolution,
                 latency_rates=tuple(latency_rates), latency_loads=tuple(latency_loads),
                 latency_at_count=latency_at_count)
    cfg = replace(cfg, trial_s=int(cfg.trial_s))
    frames, skipped = plan_frames(dep.testbed.network.tenant_mtu,
                                  tuple(frame_sizes) if frame_sizes else None, jumbo)
    out = []
    for frame in frames:
        out += _one_size(dep, pair, frame, cfg, repetitions, measures, skipped)
    return out


def _params(dep, frame, cfg, **more):
    return {"frame_size": frame, "frame_size_kind": "inner", "udp_payload": payload_of(frame),
            "frame_overhead": FRAME_OVERHEAD, "tenant_mtu": dep.testbed.network.tenant_mtu,
            "trial_s": cfg.trial_s, "settle_s": cfg.settle_s, **more}


def _one_size(dep, pair, frame, cfg, repetitions, measures, skipped):
    src, dst = pair.vms
    payload = payload_of(frame)
    out = []

    def trial(fps, **kw):
        return udp_trial(dep, src, dst, payload, bitrate_bps(fps, frame), cfg.trial_s,
                         settle_s=cfg.settle_s, **kw)

    def ceiling_trial():
        return udp_trial(dep, src, dst, payload, 0, cfg.trial_s, settle_s=cfg.settle_s)

    # throughput: the unpaced ceiling, then NDR and PDR (each repetition a full search)
    started = now()
    if "throughput" in measures or "latency" in measures:
        samples, extras = collect(repetitions, lambda: _throughput(trial, ceiling_trial, frame, cfg))
        if "throughput" in measures:
            params = _params(dep, frame, cfg, resolution_pct=cfg.resolution_pct,
                             max_trials=cfg.max_trials, pdr_loss_pct=cfg.pdr_loss_pct,
                             ceiling_factor=cfg.ceiling_factor,
                             rate_to_iperf3="-b = fps * (frame - 46) * 8 (UDP payload bits)")
            r = result(dep, pair, "rfc2544_throughput", params, samples, extras, started)
            r.labels["point"] = f"{frame}B throughput"
            r.extra["skipped_frame_sizes"] = skipped
            out.append(r)
    else:
        ceilings = [ceiling_trial() for _ in range(repetitions)]
        samples = {"ceiling_fps": [c["rx_fps"] for c in ceilings],
                   "sender_fps": [c["tx_fps"] for c in ceilings], "ndr_fps": [None]}
    ceiling_fps = _mean(samples["ceiling_fps"])
    sender_fps = _mean(samples["sender_fps"])
    ndr_fps = _mean(samples["ndr_fps"])

    if "latency" in measures:
        started = now()
        if not ndr_fps:
            out.append(_note(dep, pair, "rfc2544_latency", _params(dep, frame, cfg), frame,
                             "latency", "no zero-loss rate found: latency not measured", started))
        else:
            seconds = max(cfg.trial_s, math.ceil(cfg.latency_count * cfg.latency_interval_s + 1))
            samples, extras = collect(
                repetitions, lambda: _latency(dep, src, dst, frame, ndr_fps, seconds, cfg))
            params = _params(dep, frame, cfg, rate_fps=ndr_fps, latency_count=cfg.latency_count,
                             latency_interval_s=cfg.latency_interval_s, stream_s=seconds,
                             latency_kind="icmp-echo-rtt-during-ndr-stream")
            r = result(dep, pair, "rfc2544_latency", params, samples, extras, started)
            r.labels["point"] = f"{frame}B latency"
            out.append(r)

    if "latency_at" in measures:
        for rate, where in latency_points(cfg, ceiling_fps):
            started = now()
            samples, extras = collect(repetitions,
                                      lambda: _latency_at(dep, src, dst, frame, rate, cfg))
            kind = ("icmp-echo-rtt-echoes-alone" if echoes_alone(rate, cfg)
                    else "icmp-echo-rtt-during-stream")
            params = _params(dep, frame, cfg, rate_fps=round(rate, 3), latency_kind=kind,
                             **({"load_pct": where[1]} if where[0] == "load" else {}))
            r = result(dep, pair, "rfc2544_latency", params, samples, extras, started)
            r.labels["point"] = f"{frame}B latency at {point_name(where)}"
            out.append(r)

    if "frame_loss" in measures and ceiling_fps:
        for pct in cfg.loss_steps:
            started = now()
            rate = ceiling_fps * pct / 100

            def loss_point():
                res = trial(rate)
                return ({"offered_fps": round(rate), "rx_fps": res["rx_fps"],
                         "frame_loss_pct": res["loss_pct"], **cpu.fields(res)},
                        {"trial": _brief(res), "cpu": res["cpu"]})
            samples, extras = collect(repetitions, loss_point)
            params = _params(dep, frame, cfg, load_pct=pct, ceiling_fps=ceiling_fps)
            r = result(dep, pair, "rfc2544_frame_loss", params, samples, extras, started)
            r.labels["point"] = f"{frame}B loss {pct:g}%"
            out.append(r)

    if "back_to_back" in measures and ceiling_fps:
        started = now()
        samples, extras = collect(
            repetitions, lambda: _back_to_back(trial, ceiling_fps, sender_fps, cfg))
        params = _params(dep, frame, cfg, back_to_back_kind="iperf3-syscall-burst",
                         min_burst_gap_s=cfg.b2b_gap_s, max_load_pct=cfg.b2b_max_load_pct,
                         max_burst=IPERF3_MAX_BURST, resolution_frames=cfg.b2b_resolution,
                         note="bursts are back to back at the sender's sendto() speed "
                              "(sender_fps), not at a minimum inter-frame gap; one burst per "
                              "gap, the gap stretched so the mean rate stays <= max_load_pct "
                              "of the ceiling; pass = zero loss over all bursts of a trial")
        r = result(dep, pair, "rfc2544_back_to_back", params, samples, extras, started)
        r.labels["point"] = f"{frame}B back-to-back"
        out.append(r)
    return out


def _throughput(trial, ceiling_trial, frame, cfg):
    """One repetition: ceiling trial, then NDR and PDR in one MLRsearch (battery/mlr.py)."""
    log = []
    ceiling = ceiling_trial()
    log.append({"kind": "ceiling", "rate_fps": None, **_brief(ceiling)})
    top = max(2.0, ceiling["rx_fps"] * cfg.ceiling_factor)
    step = top * cfg.resolution_pct / 100
    by_rate = {}

    def measured(fps):
        res = trial(round(fps))
        by_rate[fps] = res
        log.append({"kind": "search", "rate_fps": round(fps), **_brief(res)})
        return res["packets"], res["lost_packets"]
    # same trial budget as the two RFC 2544 binary searches it replaces (max_trials each)
    ndr, pdr, trials = mlr.ndr_pdr(measured, min(step, top / 2), top, cfg.trial_s,
                                   cfg.resolution_pct, 2 * cfg.max_trials, cfg.pdr_loss_pct)
    at_ndr = _at(by_rate, ndr.rate)
    at_pdr = _at(by_rate, pdr.rate)

    def fps(s):
        return None if s.rate is None else round(s.rate)

    def upper(s):
        return None if s.upper is None else round(s.upper)
    metrics = {
        "ceiling_fps": ceiling["rx_fps"], "sender_fps": ceiling["tx_fps"],
        "ndr_fps": fps(ndr), "pdr_fps": fps(pdr),
        # the search's final bracket (None: even the top rate passed), the NDR/PDR spread
        "ndr_upper_fps": upper(ndr), "pdr_upper_fps": upper(pdr),
        "ndr_gbps": None if ndr.rate is None else frame_gbps(fps(ndr), frame),
        "pdr_gbps": None if pdr.rate is None else frame_gbps(fps(pdr), frame),
        "ndr_pct_of_ceiling": (100.0 * ndr.rate / ceiling["rx_fps"]
                               if ndr.rate is not None and ceiling["rx_fps"] else None),
        "pdr_loss_pct": at_pdr["loss_pct"] if at_pdr else None,
        "trials": 1 + len(trials),
        **cpu.fields(at_ndr),
        "pdr_cpu_pct": at_pdr["cpu_pct"] if at_pdr else None,
    }
    extra = {"trials": log, "search_upper_fps": top, "resolution_fps": step,
             "ndr_converged": ndr.converged, "pdr_converged": pdr.converged,
             "ndr_at_ceiling": ndr.rate is not None and ndr.upper is None,
             "ndr_upper_fps": ndr.upper, "search": "MLRsearch (FD.io CSIT)",
             "pdr_upper_fps": pdr.upper, "cpu": at_ndr["cpu"] if at_ndr else None}
    return metrics, extra


def _at(by_rate, rate):
    """The trial at a bound's rate (bounds come back as the same float, or within 1e-9)."""
    if rate is None:
        return None
    near = min(by_rate, key=lambda r: abs(r - rate), default=None)
    return by_rate[near] if near is not None and abs(near - rate) <= 1e-9 * rate else None


def _latency(dep, src, dst, frame, rate, seconds, cfg):
    """ICMP echoes of the frame size under test while a stream runs at ``rate`` frames/s."""
    payload = payload_of(frame)
    probe_s = cfg.latency_count * cfg.latency_interval_s

    def probe(dep_):
        time.sleep(0.3)                       # the stream is flowing
        p = ping.PingParams(dest=dep_.reach(src, dst), count=cfg.latency_count,
                            interval_s=cfg.latency_interval_s, payload=payload, reply_timeout_s=1)
        return ping.parse(dep_.exec(src, ping.command(p), timeout=probe_s + 30).stdout)
    res = udp_trial(dep, src, dst, payload, bitrate_bps(rate, frame), seconds,
                    settle_s=cfg.settle_s, during=probe)
    rtt = res["during"]
    return ({**_rtt_metrics(rtt), "rate_fps": round(rate), "loss_pct": res["loss_pct"],
             **cpu.fields(res)},
            {"rtt_samples_ms": rtt["samples_ms"], "stream": _brief(res), "cpu": res["cpu"]})


def _rtt_metrics(rtt: dict) -> dict:
    """A ping run's RTT figures as latency metrics (sd and percentiles of its echoes)."""
    xs = rtt["samples_ms"]
    pct = percentiles(xs, (50, 99))
    return {"rtt_avg_ms": rtt["rtt_avg_ms"], "rtt_sd_ms": statistics.stdev(xs) if len(xs) > 1 else None,
            "rtt_min_ms": rtt["rtt_min_ms"], "rtt_max_ms": rtt["rtt_max_ms"],
            "rtt_p50_ms": pct["p50"], "rtt_p99_ms": pct["p99"], "echo_loss_pct": rtt["loss_pct"]}


def latency_points(cfg, ceiling_fps) -> list:
    """(rate frames/s, ("rate", fps) | ("load", pct)) for every latency_at point; the loads
    only when there is a ceiling to take a share of."""
    out = [(float(r), ("rate", r)) for r in cfg.latency_rates]
    if ceiling_fps:
        out += [(ceiling_fps * pct / 100, ("load", pct)) for pct in cfg.latency_loads]
    return out


def point_name(where) -> str:
    kind, x = where
    return f"{x:g} fps" if kind == "rate" else f"{x:g}% of ceiling"


def echoes_alone(rate: float, cfg) -> bool:
    """The echoes themselves make the input rate (no stream): at most one per
    ``latency_interval_s``."""
    return rate <= 1.0 / cfg.latency_interval_s


def _latency_at(dep, src, dst, frame, rate, cfg):
    """Echo RTT at an input rate: the echoes alone, 1 / rate s apart, when they reach it;
    else during a stream at ``rate`` (``_latency``)."""
    if not echoes_alone(rate, cfg):
        seconds = max(cfg.trial_s, math.ceil(cfg.latency_count * cfg.latency_interval_s + 1))
        return _latency(dep, src, dst, frame, rate, seconds, cfg)
    interval = 1.0 / rate
    p = ping.PingParams(dest=dep.reach(src, dst), count=cfg.latency_at_count, interval_s=interval,
                        payload=payload_of(frame), reply_timeout_s=1)
    with cpu.Window(dep) as w:
        rtt = ping.parse(dep.exec(src, ping.command(p),
                                  timeout=cfg.latency_at_count * interval + 30).stdout)
    return ({**_rtt_metrics(rtt), "rate_fps": round(rate, 3), "loss_pct": None, **w.metrics()},
            {"rtt_samples_ms": rtt["samples_ms"], "stream": None, "echo_interval_s": interval,
             "cpu": w.result})


def burst_gap_s(burst: int, ceiling_fps: float, min_gap_s: float, max_load_pct: float) -> float:
    """Seconds between bursts: at least ``min_gap_s``, and long enough that the mean rate
    (burst / gap) stays <= ``max_load_pct`` % of the ceiling, so only the burst can lose."""
    return max(min_gap_s, burst / (ceiling_fps * max_load_pct / 100))


def _back_to_back(trial, ceiling_fps, sender_fps, cfg):
    """One repetition: binary search of the longest zero-loss burst (1..1000 frames)."""
    log = []
    by_n = {}

    def clamp(n):
        return max(1, min(IPERF3_MAX_BURST, round(n)))

    def burst_trial(n):
        n = clamp(n)
        gap = burst_gap_s(n, ceiling_fps, cfg.b2b_gap_s, cfg.b2b_max_load_pct)
        res = trial(n / gap, burst=n)
        by_n[n] = res
        log.append({"burst": n, "gap_s": gap, **_brief(res)})
        return res["loss_pct"]
    found = mlr.search(burst_trial, 1, IPERF3_MAX_BURST, cfg.b2b_resolution, cfg.max_trials)
    n = None if found.rate is None else clamp(found.rate)
    at = by_n.get(n)
    return ({"burst_frames": n, "burst_at_max": float(n == IPERF3_MAX_BURST),
             "burst_upper_frames": None if found.upper is None else clamp(found.upper),
             "sender_fps": sender_fps, "trials": len(found.trials),
             **cpu.fields(at)},
            {"trials": log, "converged": found.converged,
             "upper_burst": None if found.upper is None else clamp(found.upper),
             "cpu": at["cpu"] if at else None})


def _brief(res) -> dict:
    return {k: res[k] for k in ("bitrate_bps", "burst", "packets", "lost_packets", "loss_pct",
                                "rx_fps", "tx_fps", *cpu.METRICS, "retried")}


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _note(dep, pair, test, params, frame, kind, note, started):
    from vnetbench.results import provenance
    from vnetbench.results.record import Result
    r = Result(test=test, labels=labels(dep, pair, test, **params), samples={},
               provenance=provenance.collect(dep, pair.vms), started=started, finished=now(),
               extra={"note": note})
    r.labels["point"] = f"{frame}B {kind}"
    return r
