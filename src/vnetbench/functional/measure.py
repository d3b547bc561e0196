"""Measurements of the functional matrix, through the Deployment interface only
(exec, popen, ip, testbed): they return plain dicts the verdicts judge."""

from __future__ import annotations

import json
import random
import re
import select
import subprocess
import time
from collections import Counter

from vnetbench import kinds
from vnetbench.battery import session
from vnetbench.traffic import capture, dhcp, iperf3, ping, probe, wire


def native(dep) -> bool:
    """Guests carry no Python: the probe tool is the Go build (vnetbench-flowgen probe-*)."""
    return dep.backend != "netns"


def clock_offset(dep, vm: str, samples: int = 2) -> dict:
    """The VM's CLOCK_MONOTONIC minus the runner's (ns) and how well it is known. Namespaces
    share the runner's kernel (0, exact); a guest's clock is read over its command channel,
    so the offset is known to half the quickest round trip (uncertainty_ns)."""
    if not native(dep):
        return {"offset_ns": 0, "uncertainty_ns": 0}
    best = None
    for _ in range(samples):
        t0 = time.monotonic_ns()
        vm_ns = probe.parse_clock(dep.exec(vm, probe.clock_command(), timeout=30).stdout)
        t1 = time.monotonic_ns()
        got = (t1 - t0, vm_ns - (t0 + t1) // 2)
        best = got if best is None else min(best, got)
    return {"offset_ns": best[1], "uncertainty_ns": best[0] // 2}


def sender_clock(first_ns: int, t_popen: int, t_ready: int, est: dict) -> dict:
    """The sender's clock offset narrowed by causality: its first probe (``first_ns``, its
    clock) went out after we started it (``t_popen``) and before we read its ready line
    (``t_ready``), and within ``est`` (``clock_offset``). A shared clock stays exact."""
    if not est["uncertainty_ns"]:
        return est
    lo = max(t_popen, first_ns - est["offset_ns"] - est["uncertainty_ns"])
    hi = min(t_ready, first_ns - est["offset_ns"] + est["uncertainty_ns"])
    if lo > hi:                 # a first probe that failed: only the estimate is left
        return est
    return {"offset_ns": first_ns - (lo + hi) // 2, "uncertainty_ns": (hi - lo) // 2}


def _on_our_clock(sender: dict, probes: list, src: dict, dst: dict) -> tuple[dict, list]:
    """The probe tools' times (each VM's own clock) on the runner's clock."""
    so, do = src["offset_ns"], dst["offset_ns"]
    sender = {**sender, **{k: sender[k] - so for k in ("first_ns", "last_ns", "end_ns")
                           if sender.get(k) is not None}}
    return sender, [[seq, sent - so, got - do] for seq, sent, got in probes]


def _marker() -> int:
    return random.randrange(1, 2**31)


def _port() -> int:
    return random.randrange(20000, 60000)


def neighbour_mac(dep, vm: str, ip: str) -> str | None:
    out = dep.exec(vm, ["ip", "neigh", "show", ip]).stdout.split()
    return out[out.index("lladdr") + 1] if "lladdr" in out else None


def ping_once(dep, src: str, dst_ip: str, count: int = 5) -> dict:
    """Reachability, not latency: a reactive first packet may take a while (2 s each)."""
    argv = ping.command(ping.PingParams(dest=dst_ip, count=count, interval_s=0.2,
                                        reply_timeout_s=2))
    done = dep.exec(src, argv, timeout=30)
    return ping.reachability(done.stdout, done.stderr)


def pings_at_once(dep, **pings) -> dict:
    """``ping_once`` for each {name: (src, dst_ip)} at the same time (a ping that must
    fail waits out its replies' timeout; two in turn would wait twice): {name: result}."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=len(pings)) as pool:
        futures = {name: pool.submit(ping_once, dep, src, ip) for name, (src, ip) in pings.items()}
        return {name: f.result() for name, f in futures.items()}


def ttl_ping(dep, src: str, dst_ip: str, count: int = 3) -> dict:
    """Reachability and the TTL of each reply (what the path's routers did to it)."""
    done = dep.exec(src, ping.command(ping.PingParams(dest=dst_ip, count=count, interval_s=0.2,
                                                      reply_timeout_s=2)), timeout=30)
    return {"dst": dst_ip, **ping.reachability(done.stdout, done.stderr), "ttls": ping.ttls(done.stdout)}


ECHO_REQUEST = re.compile(r"IP (\S+) > (\S+): ICMP echo request")


def sources_seen(dep, outside: str, ip: str, senders: list[str]) -> dict:
    """The source address external host OUTSIDE (at IP) sees on each sender's echo
    request (one ping each, in turn, captured on its NIC): NAT made visible.
    {vm: address or None}."""
    seen = {}
    for vm in senders:
        with session.capture(dep, outside, ["tcpdump", "-i", "eth0", "-nn", "-l", "-c", "1",
                                            f"icmp[icmptype] == 8 and dst host {ip}"]) as out:
            dep.exec(vm, ping.command(ping.PingParams(dest=ip, count=1, reply_timeout_s=2)), timeout=30)
            found = ECHO_REQUEST.findall(out(2.0))
        seen[vm] = found[0][0] if found else None
    return seen


def resolved_pair(dep, a: str, b: str) -> dict:
    """Both VMs' neighbour entries for each other freshly REACHABLE (an echo each way,
    then an arping each way: the ARP reply confirms the entry), as when a ping has just
    started (seed 003). A guest re-validates a stale entry with a unicast ARP probe 5 s
    after using it (``delay_first_probe_time``); a reactive network cannot answer it
    with the controller down, so an entry left stale by earlier tests made the fault
    rows depend on their history. REACHABLE lasts 15-45 s. Returns each VM's entry."""
    for src, dst in ((a, b), (b, a)):
        ping_once(dep, src, dep.ip(dst), count=1)
    arping = ["arping", "-c", "1", "-W", "0.5", "-i", "eth0"]     # -W: the wait for the reply
    for _ in range(3):                  # a reply later than -W (a busy controller): again
        other = dep.popen(b, [*arping, dep.ip(a)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
        try:
            dep.exec(a, [*arping, dep.ip(b)], timeout=15)
        finally:
            other.wait(timeout=15)
        entries = {src: dep.exec(src, ["ip", "neigh", "show", dep.ip(dst)]).stdout.strip()
                   for src, dst in ((a, b), (b, a))}
        if all(e.endswith("REACHABLE") for e in entries.values()):
            break
    return entries



def echo_replies(dep, vm: str) -> int:
    """ICMP echo replies the VM has sent (its namespace's Icmp OutEchoReps)."""
    lines = [line.split() for line in dep.exec(vm, ["cat", "/proc/net/snmp"]).stdout.splitlines()
             if line.startswith("Icmp:")]
    return int(dict(zip(lines[0], lines[1]))["OutEchoReps"])


def ping_pair(dep, vnet: str, src: str, dst: str) -> dict:
    """Ping ``dst`` from ``src``, then read whose MAC answered (the neighbour entry) and
    how many echoes ``dst`` itself answered (its own counter: with two vnets on the
    same IPs, a twin's answer does not count)."""
    dst_ip = dep.ip(dst)
    before = echo_replies(dep, dst)
    res = ping_once(dep, src, dst_ip)
    l3 = kinds.of(dep).l3      # a routing kind: every peer's MAC is the vSwitch's
    return {"vnet": vnet, "src": src, "dst": dst, **res,
            "peer_mac": neighbour_mac(dep, src, dst_ip),
            "expected_mac": None if l3 else dep.testbed.vm(dst).nic(vnet).mac,
            "replies_by_peer": echo_replies(dep, dst) - before}


def static_arp(dep, vm: str, ip: str, mac: str) -> None:
    """A permanent neighbour entry on the VM's eth0: the sender emits no ARP of its own."""
    done = dep.exec(vm, ["ip", "neigh", "replace", ip, "lladdr", mac, "nud", "permanent",
                         "dev", "eth0"])
    if done.returncode:
        raise RuntimeError(f"static ARP {ip} -> {mac} in {vm}: {done.stderr.strip()}")


def captured_while_sending(dep, sender: str, dests, capture_vms, *, seconds: float = 1.0,
                           interval_ms: float = 5.0) -> dict:
    """Send probes from ``sender`` to each of ``dests`` ([(ip, broadcast)], one after the
    other) while tcpdump runs on eth0 of every VM of ``capture_vms``; returns
    {sent: {ip: n}, captured: {vm: {ip: frames}}, frames: {vm: first frames}}."""
    port = _port()
    sent = {}
    with session.captures(dep, {vm: (vm, capture.command("eth0", port))
                                for vm in capture_vms}) as outputs:
        for ip, broadcast in dests:
            sent[ip] = probe.parse(dep.exec(sender, probe.send_command(probe.SendParams(
                ip, port, interval_ms, seconds, _marker(), broadcast), native(dep)),
                timeout=seconds + 30).stdout)["sent"]
        frames = {vm: capture.parse(out) for vm, out in outputs(0.5).items()}
    return {"sent": sent,
            "captured": {vm: {ip: sum(f["dst"] == ip for f in fs) for ip in sent}
                         for vm, fs in frames.items()},
            "frames": {vm: fs[:3] for vm, fs in frames.items()}}


def probes_around(dep, src: str, dst: str, change, *, before_s=1.0, after_s=2.5,
                  interval_ms=5.0) -> dict:
    """Sequence-numbered UDP probes ``src`` -> ``dst`` every ``interval_ms`` while
    ``change()`` runs ``before_s`` into the stream; the change's start and end, the
    sender's report and every probe that arrived, all on the runner's monotonic clock
    (a guest's times mapped onto it: ``clock_uncertainty_ms``, 0 for namespaces)."""
    port, marker = _port(), _marker()
    total = before_s + after_s
    clocks = {vm: clock_offset(dep, vm) for vm in (src, dst)}
    recv = dep.popen(dst, probe.recv_command(probe.RecvParams(port, total + 1.0, marker,
                                                              first_within=30.0), native(dep)),
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if not select.select([recv.stdout], [], [], 30)[0]:
            raise RuntimeError(f"probe receiver in {dst} did not start")
        recv.stdout.readline()
        t_popen = time.monotonic_ns()
        send = dep.popen(src, probe.send_command(probe.SendParams(
            dep.ip(dst), port, interval_ms, total, marker), native(dep)),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if not select.select([send.stdout], [], [], 30)[0]:      # a guest starts it slowly
            raise RuntimeError(f"probe sender in {src} did not start")
        send.stdout.readline()          # its first probe is out
        t_ready = time.monotonic_ns()
        time.sleep(before_s)
        t_start = time.monotonic_ns()
        change()
        t_done = time.monotonic_ns()
        sender = probe.parse(send.communicate(timeout=total + 30)[0])
        got = probe.parse(recv.communicate(timeout=total + 60)[0])
    finally:
        for p in (recv, locals().get("send")):
            if p is not None and p.poll() is None:
                session.stop(p)
    if sender.get("first_ns") is not None:
        clocks[src] = sender_clock(sender["first_ns"], t_popen, t_ready, clocks[src])
    sender, probes = _on_our_clock(sender, got["probes"], clocks[src], clocks[dst])
    return {"t_start_ns": t_start, "t_done_ns": t_done, "sender": sender, "probes": probes,
            "clock_uncertainty_ms": max(c["uncertainty_ns"] for c in clocks.values()) / 1e6}


def receiver_rate(dep, receiver: str, sender: str, seconds: int,
                  udp_bps: int | None = None, interval_s: float | None = None,
                  connect_timeout_ms: int | None = None) -> dict:
    """iperf3 from ``sender`` to ``receiver``, measured by the receiver: Mbit/s per
    ``interval_s`` (default 1 s) and over the test. TCP (the client runs in the receiver
    with -R), or UDP offered at ``udp_bps`` in datagrams that fit the tenant MTU (no IP
    fragments): the client runs in the *sender*, whose own timer ends the flood, and the
    receiver's intervals come back with --get-server-output. With -R the flood ended only
    when the receiver's TEST_END reached the sender, and into a shaped port on the netdev
    datapath the receiver's packets to the sender did not get through while it lasted
    (faucet/vlan 4 runs in 25, ovs/vlan and faucet/flat too: 37 s timeouts; 0 in 20 this
    way). ``connect_timeout_ms``: iperf3 gives up a control connection that does not set up."""
    udp = udp_bps is not None
    length = dep.testbed.network.tenant_mtu - 28 if udp else None     # IPv4 + UDP headers
    port = _port()          # not the last test's: a guest's server may still be going away
    server, client = (receiver, sender) if udp else (sender, receiver)
    with session.iperf3_server(dep, server, port, interval_s=interval_s if udp else None):
        argv = iperf3.client_command(iperf3.ClientParams(
            dest=dep.ip(server), seconds=seconds, reverse=not udp, protocol="udp" if udp else "tcp",
            bitrate_bps=udp_bps, length=length, interval_s=interval_s, port=port,
            connect_timeout_ms=connect_timeout_ms, server_output=udp))
        done = dep.exec(client, argv, timeout=seconds + 30)
    res = iperf3.parse(done.stdout)
    if res["receiver_samples_gbps"] is None:
        raise RuntimeError(f"iperf3 gave no per-interval figures of the receiver (samples from "
                           f"the {res['samples_side']})")
    out = {"protocol": res["protocol"], "samples_mbps": [g * 1000 for g in res["receiver_samples_gbps"]],
           "mbps": res["bits_per_second"] / 1e6}
    if udp:
        out.update(offered_mbps=udp_bps / 1e6, sent_mbps=res["sent_bits_per_second"] / 1e6,
                   lost_percent=res["lost_percent"], length=length)
    else:
        out["retransmits"] = res.get("retransmits")
    return out


ARPING_REPLY = re.compile(r"bytes from ([0-9a-f:]{17}) \(([\d.]+)\)")


def arp_seen_by_peer(dep, src: str, dst: str, count: int = 3) -> dict:
    """arping from ``src`` for ``dst``'s address while ``dst`` captures ARP: who answered,
    and whether the request ever reached the VM that owns the address."""
    ip = dep.ip(dst)
    dep.exec(src, ["ip", "neigh", "flush", "all"])
    with session.capture(dep, dst, capture.arp_command("eth0")) as out:
        done = dep.exec(src, ["arping", "-c", str(count), "-i", "eth0", ip], timeout=count + 10)
        time.sleep(0.3)
        text = out(timeout=0.2)
    macs = sorted({m.group(1) for m in ARPING_REPLY.finditer(done.stdout)})
    return {"target": ip, "replies": len(ARPING_REPLY.findall(done.stdout)), "reply_macs": macs,
            "owner_mac": dep.testbed.vm(dst).nics[0].mac,
            "requests_at_owner": capture.arp_requests(text, ip)}


# -- value-added features ------------------------------------------------------------------

def underlay_links(dep, host: str) -> dict:
    """{interface: tx bytes} of ``host``'s links to the physical network: veths into another
    namespace or physical NICs, not a VM's port (tunnels, bridges and bonds are virtual)."""
    done = subprocess.run(dep.host_argv(host, ["ip", "-j", "-d", "-s", "link"]),
                          capture_output=True, text=True, timeout=15)
    if done.returncode:
        raise RuntimeError(f"ip link on {host}: {done.stderr.strip()}")
    ports = {dep.vm_port(v.name, i)[1] for v in dep.testbed.vms if v.host == host
             for i in range(len(v.nics))}
    links = {}
    for link in json.loads(done.stdout):
        kind = (link.get("linkinfo") or {}).get("info_kind")
        wire = (kind == "veth" and "link_netnsid" in link) or \
            (kind is None and link.get("link_type") == "ether")
        if wire and link["ifname"] not in ports:
            links[link["ifname"]] = link["stats64"]["tx"]["bytes"]
    return links


def encapsulation(dep, src: str, dst: str, seconds: float = 0.3) -> dict:
    """UDP probes ``src`` -> ``dst`` (another host) while every underlay link of ``src``'s
    host is captured: what each frame that carries a probe wraps it in (``wire``)."""
    host, port, marker = dep.testbed.vm(src).host, _port(), _marker()
    ping_once(dep, src, dep.ip(dst), count=2)           # neighbours and flows exist
    with session.captures(dep, {link: (None, wire.command, host, link)
                                for link in underlay_links(dep, host)}) as outs:
        sent = probe.parse(dep.exec(src, probe.send_command(probe.SendParams(
            dep.ip(dst), port, 10.0, seconds, marker), native(dep)), timeout=seconds + 30).stdout)["sent"]
        texts = outs(0.3)
    return {"host": host, "sent": sent, "marker": marker, "links": sorted(texts),
            **wire_summary(texts, probe.MAGIC + marker.to_bytes(4, "big"))}


def wire_summary(texts: dict, needle: bytes) -> dict:
    """Per link capture text -> frames carrying ``needle`` per link, their encapsulations,
    overheads, VLAN ids, and one frame (hex) of each encapsulation as evidence."""
    frames, encaps, overhead, vlans, samples = {}, Counter(), {}, set(), {}
    for link, text in texts.items():
        frames[link] = 0
        for f in wire.frames(text):
            if c := wire.classify(f, needle):
                frames[link] += 1
                encaps[c["encap"]] += 1
                overhead[c["encap"]] = c["overhead"]
                samples.setdefault(c["encap"], f.hex())
                vlans |= {c["vlan"]} - {None}
    return {"frames": frames, "encaps": dict(encaps), "overhead": overhead,
            "vlans": sorted(vlans), "samples": samples}


def dhcp_answers(dep, client: str, control: str, seconds: int = 3) -> dict:
    """udhcpc in ``client`` asks for a lease while its NIC records every DHCP server reply;
    udhcpd in ``control`` (same vnet) is the answer that proves the probe hears one."""
    vm, ctl = dep.testbed.vm(client), dep.testbed.vm(control)
    net = dep.testbed.vnet(ctl.nics[0].vnet).cidr
    # the server's files, written by the VM itself: a guest sees only its own disk (gone
    # with the guest); a namespace VM shares ours, so they go to the run's directory
    base = f"/tmp/vnetbench-udhcpd-{ctl.name}" if native(dep) else str(dep.run.dir / f"udhcpd-{ctl.name}")
    files = {k: f"{base}.{k}" for k in ("conf", "leases", "pid")}
    conf = dhcp.server_conf(dhcp.ServerConf(
        "eth0", str(net[-10]), str(net[-5]), str(net.netmask), files["leases"], files["pid"]))
    put = dep.exec(control, ["sh", "-c", 'printf %s "$1" > "$2" && : > "$3"', "sh", conf,
                             files["conf"], files["leases"]])
    if put.returncode:
        raise RuntimeError(f"udhcpd files in {control}: {put.stderr.strip()}")
    server = dep.popen(control, dhcp.server_command(files["conf"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        with session.capture(dep, client, dhcp.capture_command("eth0")) as out:
            asked = dep.exec(client, dhcp.client_command("eth0", tries=seconds), timeout=seconds + 30)
            time.sleep(0.3)
            text = out(timeout=0.2)
    finally:
        session.stop(server)
    return {"client": client, "client_mac": vm.nics[0].mac, "client_rc": asked.returncode,
            "control": {"vm": control, "mac": ctl.nics[0].mac},
            "vm_macs": sorted(n.mac for v in dep.testbed.vms for n in v.nics),
            "replies": dhcp.parse_replies(text),
            "reply_lines": [line for line in text.splitlines() if "BOOTP/DHCP" in line][:4]}


def underlay_spread(dep, src: str, dst: str, flows: int = 4, seconds: int = 2) -> dict:
    """``flows`` parallel TCP flows ``src`` -> ``dst`` (another host): the bytes each
    underlay link of ``src``'s host sent meanwhile (a bond spreads flows over links)."""
    host = dep.testbed.vm(src).host
    before = underlay_links(dep, host)
    with session.iperf3_server(dep, dst):
        done = dep.exec(src, iperf3.client_command(iperf3.ClientParams(
            dest=dep.ip(dst), seconds=seconds, parallel=flows)), timeout=seconds + 30)
    after = underlay_links(dep, host)
    res = iperf3.parse(done.stdout)
    return {"host": host, "flows": flows, "bytes": res["bytes"],
            "tx_bytes": {link: after[link] - before.get(link, 0) for link in after}}
