"""Verdicts: what a measurement says about the system under test.

Each function takes the plain measurement dict a test recorded (JSON-able, kept
in the matrix) and returns a Verdict with the figure that decided it. They are
pure so that recordings of working and failing systems check them
(tests/unit/test_functional_verdict.py). A measurement that cannot decide (the
traffic never reached its own vnet, no probes before the change) is an Error of
the suite, never a Pass.
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass, field


class Status(str, enum.Enum):
    PASS = "Pass"
    FAIL = "Fail"
    FAIL_OPEN = "Fail-open"
    FAIL_CLOSE = "Fail-close"
    NA = "N/A"
    ERROR = "Error"         # the suite could not measure: not a finding about the system

    def __str__(self):
        return self.value


FAILURES = (Status.FAIL, Status.FAIL_OPEN, Status.FAIL_CLOSE)


@dataclass(frozen=True)
class Verdict:
    status: Status
    value: float | None = None      # the measured figure (stop time, rate, frames...)
    unit: str = ""
    detail: str = ""                # one line: what was measured; the footnote of a Fail/N/A
    extra: dict = field(default_factory=dict)   # further figures (e.g. burst_mbps)
    label: str = ""                 # what was detected (e.g. "VXLAN"), shown before the value

    @property
    def figure(self) -> str:
        if self.value is None:
            return self.label
        v = self.value
        text = f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"
        return f"{self.label} {text} {self.unit}".strip()

    def to_dict(self) -> dict:
        return {"status": self.status.value, "value": self.value, "unit": self.unit,
                "detail": self.detail, "extra": self.extra, "label": self.label}


def na(reason: str, built: bool = True) -> Verdict:
    """Not applicable; ``built=False``: the configuration could not be built here at all."""
    return Verdict(Status.NA, detail=reason, extra={} if built else {"not_built": True})


def error(reason: str) -> Verdict:
    return Verdict(Status.ERROR, detail=reason)


# -- isolation ---------------------------------------------------------------------

def reachability(pings: list[dict]) -> Verdict:
    """Every VM pair reached its peer, and the answer came from the peer's own MAC
    (two vnets reuse the IPs: an answer from the other vnet's twin is a failure).

    ``pings``: [{vnet, src, dst, sent, received, peer_mac, expected_mac, replies_by_peer}];
    ``expected_mac`` None: an L3 kind answers ARP itself, the peer's own echo-reply count
    (``replies_by_peer``, when measured) must cover the replies instead."""
    sent = sum(p["sent"] for p in pings)
    received = sum(p["received"] for p in pings)
    loss = 100.0 * (sent - received) / sent if sent else 100.0
    bad = [p for p in pings if p["received"] == 0
           or (p["expected_mac"] is not None and p["peer_mac"] != p["expected_mac"])
           or p.get("replies_by_peer", p["received"]) < p["received"]]
    what = f"{len(pings) - len(bad)}/{len(pings)} pairs over {len({p['vnet'] for p in pings})} vnets"
    if not bad:
        return Verdict(Status.PASS, loss, "% loss", f"{what} reached their own peer")
    b = bad[0]
    why = (f"{b['src']} -> {b['dst']} ({b['vnet']}): "
           + ("no reply" if b["received"] == 0 else
              f"answered by {b['peer_mac']}, not the peer's {b['expected_mac']}"
              if b["expected_mac"] is not None and b["peer_mac"] != b["expected_mac"] else
              f"{b['received']} replies but the peer sent {b.get('replies_by_peer')}"))
    return Verdict(Status.FAIL, loss, "% loss", f"{what} reached; {why}")


STOP_WITHIN_S = 1.0     # after the deprovisioning call returned
MIN_WATCH_S = 1.5       # probes must go on this long after it, or the window is too short


def deprovision(m: dict) -> Verdict:
    """Traffic of a deprovisioned vnet stops: the time from the start of the change to
    the first probe that never arrived, from sequence-numbered probes.

    ``m``: t_start_ns, t_done_ns (the change), sender (probe.send result), probes
    (probe.recv ``probes``: [seq, send_ns, recv_ns]), new_ping {sent, received} in the
    removed vnet after the change, other_vnet_ping {sent, received} in a vnet left alone."""
    t0, t1 = m["t_start_ns"], m["t_done_ns"]
    interval = m["sender"]["interval_ns"]
    before = [p for p in m["probes"] if p[1] < t0]
    change, control = m.get("change", "the vnet was deprovisioned"), m.get("control", "the vnet left alone")
    if not before:
        return error(f"no probe arrived before {change}: nothing to stop")
    # how long the sender kept trying: its last attempt, a failed one included (a guest
    # whose NIC the cloud unplugged gets ENETUNREACH: its traffic stopped at the source)
    tried = m["sender"].get("end_ns") or m["sender"]["last_ns"]
    if tried is None or tried < t1 + MIN_WATCH_S * 1e9:
        return error(f"probes stopped less than {MIN_WATCH_S} s after the change: "
                     "the window cannot show whether traffic went on")
    last = max(p[1] for p in m["probes"])
    stop_ms = max(0.0, (last + interval - t0) / 1e6)
    op_ms = (t1 - t0) / 1e6
    late = [p for p in m["probes"] if p[1] > t1 + STOP_WITHIN_S * 1e9]
    clock = m.get("clock_uncertainty_ms") or 0
    facts = (f"probes every {interval / 1e6:g} ms stopped {stop_ms:.0f} ms"
             + (f" (±{clock:.0f} ms: the guest's clock read over its command channel)" if clock
                else "") + f" after the change began (the change took {op_ms:.0f} ms)")
    extra = {"change_ms": op_ms, "probes_before": len(before), "clock_uncertainty_ms": clock,
             "stop_ms": stop_ms}
    if late:
        return Verdict(Status.FAIL, stop_ms, "ms",
                       f"ongoing traffic continued: {len(late)} probes sent more than "
                       f"{STOP_WITHIN_S:g} s after the change still arrived", extra)
    # across clocks the figure is the bound the uncertainty allows ("≤"), never less
    fig, label = (stop_ms + clock, "≤") if clock else (stop_ms, "")
    if m["new_ping"]["received"]:
        return Verdict(Status.FAIL, fig, "ms", f"{facts}, but a new ping still got "
                       f"{m['new_ping']['received']} replies", extra, label)
    if not m["other_vnet_ping"]["received"]:
        return Verdict(Status.FAIL, fig, "ms",
                       f"{facts}, but {control} lost reachability too", extra, label)
    return Verdict(Status.PASS, fig, "ms", facts + "; a new ping fails", extra, label)


MIN_CONTROL_SHARE = 0.5   # the traffic must reach its own vnet's captures, or nothing is shown


def no_leak(m: dict) -> Verdict:
    """Frames sent in vnet B are not captured on any VM of vnet A.

    ``m``: sent (frames the sender sent), other_vnet {vm: frames captured} (vnet A),
    own_vnet {vm: frames captured} (vnet B VMs the traffic is for: the destination, or
    every peer for a flood) — the control that the capture sees what is there. When
    the kind delivers the traffic nowhere (no flood of unknown unicast at all), the
    optional ``control`` {dest, sent, own_vnet} (a broadcast to the same captures)
    stands in as the proof that the captures work."""
    sent = m["sent"]
    leaked = {vm: n for vm, n in m["other_vnet"].items() if n}
    seen = ", ".join(f"{vm} {n}/{sent}" for vm, n in m["own_vnet"].items())
    if leaked:
        where = ", ".join(f"{vm} {n}" for vm, n in leaked.items())
        return Verdict(Status.FAIL, sum(leaked.values()), "frames",
                       f"captured in the other vnet: {where} (of {sent} sent)")
    base = f"0 of {sent} frames on {len(m['other_vnet'])} VMs of the other vnet"
    if sent and _reached(m["own_vnet"], sent):
        return Verdict(Status.PASS, 0, "frames", f"{base}; own vnet saw {seen}")
    ctl = m.get("control")
    if sent and ctl and _reached(ctl["own_vnet"], ctl["sent"]):
        return Verdict(Status.PASS, 0, "frames",
                       f"{base}; not delivered in its own vnet either ({seen}): the kind drops "
                       f"it; the captures saw the control broadcast to {ctl['dest']}")
    return error(f"the traffic did not reach its own vnet ({seen or 'no capture'}; "
                 f"{sent} sent) and no control did: the capture would not show a leak either")


def _reached(counts: dict, sent: int) -> bool:
    return bool(counts) and all(n >= MIN_CONTROL_SHARE * sent for n in counts.values())


# -- rate limiting -------------------------------------------------------------------

TOLERANCE = 0.10   # the issue's ±10%
WARMUP_S = 2       # "after the first seconds": the bucket's burst drains here


def rate_compliance(m: dict) -> Verdict:
    """The receiver's rate after the warm-up is within ±10% of the limit; the warm-up's
    peak is reported apart as the burst.

    ``m``: limit_mbps, samples_mbps (receiver side, one per second); with UDP sent_mbps
    (a sender that offered too little is an Error) and optionally control_sent_mbps (an
    unlimited sender beside it: when that one offers enough, the limit itself held the
    sender back, as a shaper on the sender's own port does through its socket)."""
    limit, samples = m["limit_mbps"], m["samples_mbps"]
    if len(samples) <= WARMUP_S:
        return error(f"{len(samples)} one-second samples: need more than {WARMUP_S}")
    needed, sent, ctl = (1 + TOLERANCE) * limit, m.get("sent_mbps"), m.get("control_sent_mbps")
    held = sent is not None and sent < needed and ctl is not None and ctl >= needed
    if sent is not None and sent < needed and not held:
        return error(_underloaded(m, needed))
    steady = samples[WARMUP_S:]
    mean = statistics.fmean(steady)
    extra = {"burst_mbps": max(samples[:WARMUP_S]), "steady_min_mbps": min(steady),
             "steady_max_mbps": max(steady)}
    facts = (f"{mean:.2f} Mbit/s at the receiver over {len(steady)} s after {WARMUP_S} s "
             f"(per second {min(steady):.2f}..{max(steady):.2f}); burst "
             f"{extra['burst_mbps']:.1f} Mbit/s in the first {WARMUP_S} s"
             + (f"; the limit held the sender itself to {sent:.1f} Mbit/s (the unlimited "
                f"sender beside it offered {ctl:.1f})" if held else ""))
    ok = abs(mean - limit) <= TOLERANCE * limit
    return Verdict(Status.PASS if ok else Status.FAIL, mean, "Mbit/s",
                   facts if ok else f"{facts}: outside {limit:g} Mbit/s ±{TOLERANCE:.0%}", extra)


def rate_restored(m: dict) -> Verdict:
    """After a vSwitch restart the limit holds again: the receiver's rate over the last
    ``steady_s`` seconds is within ±10% of the limit; the figure is the time from the
    vSwitch's return until the last sample above the limit's tolerance ended (the
    re-provisioning delay plus the fresh bucket's burst, at ``interval_s`` resolution).

    ``m``: limit_mbps, interval_s, steady_s, restart_ms, samples_mbps (receiver side);
    optional burst_s (how long the bucket's burst lasts at the offered rate)."""
    limit, step, samples = m["limit_mbps"], m["interval_s"], m["samples_mbps"]
    n_steady = round(m["steady_s"] / step)
    if len(samples) <= n_steady or not any(samples):
        return error(f"{len(samples)} samples of {step:g} s, {max(samples, default=0):.1f} Mbit/s "
                     f"at most: no traffic to judge after the restart")
    over = [i for i, x in enumerate(samples) if x > (1 + TOLERANCE) * limit]
    restored_s = (over[-1] + 1) * step if over else 0.0
    steady = statistics.fmean(samples[-n_steady:])
    peak = max(samples[:over[-1] + 1]) if over else None
    ok = abs(steady - limit) <= TOLERANCE * limit
    burst = (f" of which the refilled bucket's burst alone is {m['burst_s']:.1f} s"
             if m.get("burst_s") and ok else "")
    facts = (f"vSwitch back after {m['restart_ms']:.0f} ms; "
             + (f"unlimited for {restored_s:.1f} s (up to {peak:.1f} Mbit/s){burst}, " if over
                else "the limit held from the first sample, ")
             + f"then {steady:.2f} Mbit/s over the last {m['steady_s']:g} s")
    if ok:
        return Verdict(Status.PASS, restored_s, "s", facts, {"steady_mbps": steady})
    return Verdict(Status.FAIL, steady, "Mbit/s", f"{facts}: the {limit:g} Mbit/s limit was not "
                   f"restored (nothing re-provisioned it)", {"steady_mbps": steady})


UNAFFECTED_FACTOR = 3.0   # a port the limit does not apply to carries well above it
# Slow guests (TCG: tens of Mbit/s of TCP) are measured with UDP at 2x the limit instead,
# and a port is unaffected above 1.5x: a 10 Mbit/s shaper cannot deliver that over the
# 3 s even with its whole burst bucket spent (80% of a second's worth: 12.7 Mbit/s).
GUEST_UNAFFECTED_FACTOR = 1.5


def _underloaded(m: dict, needed: float) -> str:
    return (f"the sender offered only {m['sent_mbps']:.1f} Mbit/s (asked {m['offered_mbps']:g}, "
            f"{needed:g} needed to show the limit): too slow a sender shows nothing about it")


def unaffected(m: dict) -> Verdict:
    """A port without the limit is not held to it: its rate is far above the limit.

    ``m``: limit_mbps, mbps (receiver side, whole test); ``factor`` (default
    ``UNAFFECTED_FACTOR``) times the limit is the bar; with UDP (``sent_mbps``), a
    sender that did not offer that much is an Error, not a finding."""
    limit, mbps = m["limit_mbps"], m["mbps"]
    factor = m.get("factor", UNAFFECTED_FACTOR)
    if m.get("sent_mbps") is not None and m["sent_mbps"] < factor * limit:
        return error(_underloaded(m, factor * limit))
    ok = mbps >= factor * limit
    facts = f"{mbps:.0f} Mbit/s at the receiver with the {limit:g} Mbit/s limit set elsewhere"
    return Verdict(Status.PASS if ok else Status.FAIL, mbps, "Mbit/s",
                   facts if ok else f"{facts}: held to under {factor:g}x the limit")


# -- fault tolerance and migration -------------------------------------------------------

TAIL_S = 0.5            # the stream's last half second tells whether traffic flows at the end
TAIL_SHARE = 0.8
MAX_PAUSE_MS = 1000.0   # "ping continues": no pause longer than one ping interval


def outage(m: dict) -> dict:
    """From a probe stream (``measure.probes_around``): the longest run of lost probes
    (ms) after the change began, and whether the last ``TAIL_S`` arrived."""
    s = m["sender"]
    step, sent = s["interval_ns"], s["sent"]
    got = {p[0] for p in m["probes"]}
    first_after = max(0, int((m["t_start_ns"] - s["first_ns"]) // step))
    longest = run = 0
    for seq in range(first_after, sent):
        run = 0 if seq in got else run + 1
        longest = max(longest, run)
    tail = range(max(0, sent - int(TAIL_S * 1e9 // step)), sent)
    share = sum(seq in got for seq in tail) / len(tail) if len(tail) else 0.0
    return {"outage_ms": longest * step / 1e6, "tail_share": share,
            "flowing_before": any(p[1] < m["t_start_ns"] for p in m["probes"])}


def traffic_continues(m: dict) -> Verdict:
    """An ongoing stream goes on through the change: Pass when no pause is longer than
    ``MAX_PAUSE_MS`` and it flows at the end; Fail-close when it stopped for good."""
    o = outage(m)
    if not o["flowing_before"]:
        return error("no probe arrived before the change: nothing to continue")
    what = f"longest pause {o['outage_ms']:.0f} ms; {o['tail_share']:.0%} of the last {TAIL_S:g} s arrived"
    if o["tail_share"] < TAIL_SHARE:
        return Verdict(Status.FAIL_CLOSE, o["outage_ms"], "ms", f"traffic stopped: {what}", o)
    if o["outage_ms"] > MAX_PAUSE_MS:
        return Verdict(Status.FAIL, o["outage_ms"], "ms", f"interrupted: {what}", o)
    return Verdict(Status.PASS, o["outage_ms"], "ms", what, o)


def traffic_recovers(m: dict) -> Verdict:
    """Traffic flows again after the change; the outage is the figure."""
    o = outage(m)
    if not o["flowing_before"]:
        return error("no probe arrived before the change: nothing to recover")
    what = f"outage {o['outage_ms']:.0f} ms; {o['tail_share']:.0%} of the last {TAIL_S:g} s arrived"
    ok = o["tail_share"] >= TAIL_SHARE
    return Verdict(Status.PASS if ok else Status.FAIL, o["outage_ms"], "ms",
                   what if ok else f"traffic did not come back: {what}", o)


def new_session(m: dict) -> Verdict:
    """A new iperf3 session starts (and carries data) after the change.
    ``m``: mbps, error (iperf3's message when it could not run)."""
    if m.get("error") or not m.get("mbps"):
        return Verdict(Status.FAIL_CLOSE, 0.0, "Mbit/s",
                       f"no new session: {m.get('error') or 'no data arrived'}")
    return Verdict(Status.PASS, m["mbps"], "Mbit/s", f"{m['mbps']:.0f} Mbit/s in a new session")


def fail_open_close(m: dict) -> Verdict:
    """A ping between VMs that never talked, with the controller down: answered = the
    data plane forwards new traffic on its own (fail-open), else fail-close."""
    got, sent = m["received"], m["sent"]
    if got:
        return Verdict(Status.FAIL_OPEN, 100.0 * got / sent, "% answered",
                       f"{got}/{sent} echoes answered with the controller down")
    return Verdict(Status.FAIL_CLOSE, 0.0, "% answered",
                   f"0/{sent} echoes answered with the controller down")


def idle_timeout(m: dict) -> Verdict:
    """The flow idle timeout from trials ``m["trials"]`` = [[idle_s, alive], ...]: between
    the longest idle a flow survived and the shortest it did not."""
    alive = [w for w, ok in m["trials"] if ok]
    dead = [w for w, ok in m["trials"] if not ok]
    if not dead:
        return na(f"no idle timeout: flows survived {max(alive, default=0):g} s idle with the "
                  "controller down")
    lo, hi = max((w for w in alive if w < min(dead)), default=0), min(dead)
    return Verdict(Status.PASS, (lo + hi) / 2, "s",
                   f"flows survived {lo:g} s idle, not {hi:g} s (controller down)",
                   {"survived_s": lo, "expired_s": hi})


def reachable(m: dict) -> Verdict:
    """Ping works after the change (``m``: sent, received; ``change_ms`` the figure)."""
    got, sent = m["received"], m["sent"]
    figure = m.get("change_ms")
    if got:
        return Verdict(Status.PASS, figure, "ms", f"{got}/{sent} echoes answered afterwards")
    return Verdict(Status.FAIL, figure, "ms", f"0/{sent} echoes answered afterwards")


def live_migration(m: dict) -> Verdict:
    """Ping continues through a live migration: the probes' downtime (5 ms resolution)
    is the figure; the peers must reach each other afterwards."""
    after = m["ping_after"]
    what = (f"downtime {m['downtime_ms']:.0f} ms ({m['lost']}/{m['sent']} probes lost, "
            f"{m['outages']} outage(s))")
    if not after["received"]:
        return Verdict(Status.FAIL, m["downtime_ms"], "ms",
                       f"{what}; the peers do not reach each other afterwards")
    return Verdict(Status.PASS, m["downtime_ms"], "ms", what)


def survives_instance_loss(m: dict) -> Verdict:
    """One of several controller instances killed: the stream goes on and a new pair
    (new flows) still connects. ``m``: a probe stream around the kill + new_ping."""
    cont = traffic_continues(m)
    if cont.status is Status.ERROR:
        return cont
    new, sync = m["new_ping"], m.get("sync")
    what = f"{m['killed']} killed: {cont.detail}; new pair {new['received']}/{new['sent']} answered"
    ok = cont.status is Status.PASS and new["received"] > 0
    if sync is not None:        # a configuration change after the kill (OVN: NB -> SB)
        ok = ok and sync["ok"]
        what += (f"; a new configuration change carried through {sync['s'] * 1000:.0f} ms after "
                 f"the kill, by {sync['by']}" if sync["ok"] else
                 f"; no new configuration change carried through after the kill ({sync['detail']})")
    return Verdict(Status.PASS if ok else Status.FAIL, cont.value, "ms", what, cont.extra)



# -- value-added features (detected, not declared) ------------------------------------------

def proxy_arp(m: dict) -> Verdict:
    """ARP answered although the request never reached the address's owner = the network
    answers for it (proxy ARP / ARP responder). Pass = present, N/A = not offered."""
    if not m["replies"]:
        return error(f"no ARP reply for {m['target']} at all: the probe shows nothing")
    if m["requests_at_owner"] == 0:
        return Verdict(Status.PASS, detail=f"ARP for {m['target']} answered ({m['replies']} replies, "
                       f"MAC {', '.join(m['reply_macs'])}) without the request reaching its owner")
    return na(f"no proxy ARP: the owner saw {m['requests_at_owner']} requests and answered itself")


def wire_expected(kind: str, ntype: str) -> str:
    """What KIND puts on the wire over NTYPE (``Kind.wire``; an L3 overlay carries MPLS
    in its GRE)."""
    from vnetbench import kinds
    from vnetbench.kinds.base import WIRE
    return kinds.get(kind).wire.get(ntype, WIRE[ntype])


def encapsulation(m: dict) -> Verdict:
    """The encapsulation read from the underlay's bytes is the one the network type
    declares (``m["expected"]``): Pass names it with the bytes it adds to the inner IP
    packet; another one is a Fail; probes on no underlay link are an Error.

    ``m``: sent, links, frames {link: probe frames}, encaps {name: frames},
    overhead {name: bytes}, expected."""
    if not m["encaps"]:
        return error(f"none of {m['sent']} probes seen on {m['host']}'s underlay links "
                     f"({', '.join(m['links']) or 'none found'}): nothing to classify")
    name = max(m["encaps"], key=m["encaps"].get)
    n, total = m["encaps"][name], sum(m["encaps"].values())
    via = ", ".join(f"{link} {k}" for link, k in m["frames"].items() if k)
    facts = (f"{n}/{total} probe frames on {m['host']}'s underlay ({via}) in {name}"
             + (f", {m['overhead'][name]} B on the inner IP packet" if name != "none" else
                ": the VM's own frame") + (f"; VLAN ids {m['vlans']}" if m.get("vlans") else ""))
    ok = name == m["expected"] and n == total
    return Verdict(Status.PASS if ok else Status.FAIL, m["overhead"][name], "B",
                   facts if ok else f"{facts}; the network type declares {m['expected']}",
                   label=name)


def dhcp(m: dict) -> Verdict:
    """A DHCP reply from a MAC that is no VM's = the network answers DHCP itself (Pass =
    present); only the control server in a VM answered = not offered; nobody = Error."""
    vms = set(m["vm_macs"])
    network = sorted({r["src_mac"] for r in m["replies"] if r["src_mac"] not in vms})
    control = sum(r["src_mac"] == m["control"]["mac"] for r in m["replies"])
    if network:
        return Verdict(Status.PASS, detail=f"DHCP answered by {', '.join(network)} (no VM's "
                       f"MAC): the network serves DHCP", label="present")
    if control:
        return na(f"no DHCP server in the network: only the control server in "
                  f"{m['control']['vm']} answered {m['client']} ({control} replies)")
    return error(f"no DHCP reply reached {m['client']}, not even from the control server in "
                 f"{m['control']['vm']}: the probe shows nothing")


MIN_LINK_SHARE = 0.10   # a link carrying less than this of the transfer is not part of it


def bonding(m: dict) -> Verdict:
    """Parallel flows leave the host over several underlay links = link aggregation
    (Pass = present); all over one link = not offered; over none = Error.

    ``m``: host, flows, bytes (transferred), tx_bytes {link: sent meanwhile}."""
    used = {link: b for link, b in m["tx_bytes"].items() if b >= MIN_LINK_SHARE * m["bytes"]}
    share = ", ".join(f"{link} {b / sum(used.values()):.0%}" for link, b in sorted(used.items()))
    if not m["bytes"] or not used:
        return error(f"the {m['bytes']} bytes of {m['flows']} flows showed on none of "
                     f"{m['host']}'s underlay links ({', '.join(m['tx_bytes']) or 'none found'})")
    if len(used) >= 2:
        return Verdict(Status.PASS, len(used), "links", f"{m['flows']} flows left {m['host']} "
                       f"over {len(used)} links ({share} of the bytes)")
    return na(f"no bonding: {m['flows']} parallel flows all left {m['host']} through one "
              f"link ({share} of the bytes; {len(m['tx_bytes'])} underlay links)")


# -- security groups -------------------------------------------------------------------

# -- routing -----------------------------------------------------------------------

def routed(m: dict) -> Verdict:
    """East-west through a router: the peer on the other vnet answers, and every reply's
    TTL is one lower than a peer's on the sender's own vnet (one router on the path; a
    switched path, an L3 vSwitch that does not decrement or a second hop would differ).

    ``m``: routed and switched, each {dst, sent, received, ttls}."""
    r, s = m["routed"], m["switched"]
    if not s["received"]:
        return error(f"the peer on the sender's own vnet ({s['dst']}) did not answer: no TTL to compare with")
    if not r["received"]:
        return Verdict(Status.FAIL, 0, "replies", f"the peer on the other vnet ({r['dst']}) did not answer "
                       f"({r['sent']} echoes)")
    base, hops = s["ttls"][0], sorted(set(r["ttls"]))
    facts = f"{r['received']}/{r['sent']} echoes answered across vnets, TTL {', '.join(map(str, hops))} "             f"(the own vnet's peer: {base})"
    if hops != [base - 1]:
        return Verdict(Status.FAIL, hops[0], "TTL", f"{facts}: not one router hop", {"ttls": r["ttls"]})
    return Verdict(Status.PASS, hops[0], "TTL", facts + ": one router hop", {"ttls": r["ttls"]})


def floating_ip(m: dict) -> Verdict:
    """North-south: the external host reaches the floating IP, never a fixed address, and
    sees each VM's traffic from its floating IP or, without one, the router's address.

    ``m``: inbound {sent, received} to the floating IP, fixed {sent, received} to the same
    VM's fixed address, seen {vm: source address}, expected {vm: address}."""
    wrong = {vm: (got, m["expected"][vm]) for vm, got in m["seen"].items() if got != m["expected"][vm]}
    if not m["inbound"]["received"]:
        return Verdict(Status.FAIL, 0, "replies", "the floating IP did not answer the external host")
    if m["fixed"]["received"]:
        return Verdict(Status.FAIL, m["fixed"]["received"], "replies",
                       "the external host reached a fixed (tenant) address: no NAT boundary")
    if wrong:
        return Verdict(Status.FAIL, len(wrong), "VMs", "seen from outside as " + ", ".join(
            f"{vm} {got or 'nothing'} (expected {want})" for vm, (got, want) in wrong.items()))
    return Verdict(Status.PASS, detail="floating IP answered; seen from outside as " + ", ".join(
        f"{vm} {got}" for vm, got in m["seen"].items()) + "; fixed address unreachable")


def _probes(probes: list[dict]) -> str:
    return ", ".join(f"{p['what']} {'open' if p['open'] else 'blocked'}" for p in probes)


def sg_admits(m: dict) -> Verdict:
    """``m["allowed"]``: probes the rules allow; ``m["denied"]``: probes they deny. Pass:
    every allowed one went through and every denied one was blocked. An allowed probe
    blocked means the measurement (or the network) is broken, not the filter: Error."""
    blocked = [p for p in m["allowed"] if not p["open"]]
    leaked = [p for p in m["denied"] if p["open"]]
    facts = _probes(m["allowed"] + m["denied"])
    if blocked:
        return Verdict(Status.ERROR, detail=f"could not measure: what the rules allow was blocked ({facts})")
    if leaked:
        return Verdict(Status.FAIL, len(leaked), "let through",
                       f"{len(leaked)} of {len(m['denied'])} probes the rules deny went through ({facts})")
    return Verdict(Status.PASS, len(m["denied"]), "blocked", facts)


def sg_rule_latency(m: dict) -> Verdict:
    """``m["latencies_ms"]``: per rule, request to first admitted packet (None: never
    within ``m["timeout_s"]``). The figure is the median; p95 and the slowest (with 20
    samples the p99 is the slowest) go in the note."""
    got = sorted(x for x in m["latencies_ms"] if x is not None)
    missed = len(m["latencies_ms"]) - len(got)
    if not got:
        return Verdict(Status.FAIL, None, "", f"no rule admitted its first packet within {m['timeout_s']:g} s")

    def pct(q):
        return got[min(len(got) - 1, max(0, round(q * (len(got) - 1))))]
    facts = (f"{len(got)} rules, probe every {m['knock_ms']:g} ms: p50 {pct(0.5):.1f} ms, "
             f"p95 {pct(0.95):.1f} ms, slowest {got[-1]:.1f} ms (= p99 of {len(got)})"
             + _clock(m))
    extra = {"p50_ms": pct(0.5), "p95_ms": pct(0.95), "max_ms": got[-1], "n": len(got)}
    if missed:
        return Verdict(Status.FAIL, pct(0.5), "ms p50", f"{missed} rules never admitted a packet "
                       f"within {m['timeout_s']:g} s; {facts}", extra)
    return Verdict(Status.PASS, pct(0.5), "ms p50", facts, extra)


def sg_rule_removal(m: dict) -> Verdict:
    """An echo stream on an established connection, the rule that admitted it removed:
    ``m["before"]`` echoes answered before the request, ``m["after"]`` in the last
    ``m["tail_s"]`` of the ``m["window_s"]`` after it (an asynchronous API applies the
    change after answering), ``m["stopped_ms"]`` the time from the request to the last
    echo in the window."""
    if not m["before"]:
        return Verdict(Status.ERROR, detail="could not measure: the connection carried nothing before the removal")
    tail = m.get("tail_s", m["window_s"])
    if m["after"]:
        return Verdict(Status.FAIL_OPEN, m["after"], "echoes after",
                       f"the established connection kept flowing: {m['after']} echoes answered in "
                       f"the last {tail:g} s of {m['window_s']:g} s after the rule was removed "
                       f"({m['before']} before)" + _clock(m))
    return Verdict(Status.PASS, m["stopped_ms"], "ms",
                   f"the established connection stopped {m['stopped_ms']:.0f} ms after the removal was "
                   f"requested ({m['before']} echoes before, none in the last {tail:g} s of "
                   f"{m['window_s']:g} s after)" + _clock(m))


def _clock(m: dict) -> str:
    """A guest's times were mapped onto the runner's clock: how well."""
    u = m.get("clock_uncertainty_ms")
    return f"; the guest's clock mapped to within ±{u:.1f} ms" if u else ""
