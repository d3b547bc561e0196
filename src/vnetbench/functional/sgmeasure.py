"""Security-group measurements in the VMs: TCP probes, a knock every few ms, an echo
stream. Small Python programs run in the VM namespaces; guests, which carry no Python,
run their Go build (vnetbench-flowgen sg-*: the same lines out). Times are the VM's
CLOCK_MONOTONIC: namespaces share the caller's, a guest's is mapped onto it
(``measure.clock_offset``, its uncertainty reported beside the figures)."""

from __future__ import annotations

import subprocess
import sys
import time

SERVER = """
import socket, sys, threading
def echo(c):
    with c:
        while True:
            d = c.recv(4096)
            if not d:
                return
            c.sendall(d)
def serve(p):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", p)); s.listen(128)
    while True:
        c, _ = s.accept(); threading.Thread(target=echo, args=(c,), daemon=True).start()
for p in map(int, sys.argv[1:]):
    threading.Thread(target=serve, args=(p,), daemon=True).start()
print("listening", flush=True)
threading.Event().wait()
"""
PROBE = """
import socket, sys
s = socket.socket(); s.settimeout(float(sys.argv[3]))
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); s.sendall(b"x")
    print("open" if s.recv(1) == b"x" else "blocked")
except OSError:
    print("blocked")
"""
KNOCK = """
import os, select, socket, sys, time
ip, port, every, until = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), time.monotonic() + float(sys.argv[4])
attempt = float(sys.argv[5])
poll, pending, since, first, due = select.poll(), {}, None, None, time.monotonic()
poll.register(0, select.POLLIN)             # the caller writes the request's time here
print("knocking", flush=True)
while pending or (first is None and time.monotonic() < until):
    now = time.monotonic()
    if first is None and now >= due and now < until:
        s = socket.socket(); s.setblocking(False); s.connect_ex((ip, port))
        pending[s.fileno()] = (s, now); poll.register(s, select.POLLOUT)
        due += every
    wait = max(0.0, due - time.monotonic()) if first is None else 0.01
    for fd, _ in poll.poll(wait * 1000):
        if fd == 0:
            since = float(os.read(0, 64).split()[0]); poll.unregister(0)
            continue
        s, t = pending.pop(fd); poll.unregister(fd)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 and since is not None and t >= since:
            first = t if first is None else min(first, t)
        s.close()
    now = time.monotonic()
    for fd, (s, t) in list(pending.items()):
        if now - t > attempt or (first is not None and t > first):
            pending.pop(fd); poll.unregister(fd); s.close()
print(f"open {first:.6f}" if first is not None else "never", flush=True)
"""
STREAM = """
import socket, sys, time
ip, port, every, until = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), time.monotonic() + float(sys.argv[4])
s = socket.create_connection((ip, port), timeout=2); s.settimeout(every)
print("connected", flush=True)
while time.monotonic() < until:
    t = time.monotonic()
    try:
        s.sendall(b"e"); s.recv(1); print(f"echo {t:.6f}", flush=True)
    except OSError:
        pass
    time.sleep(max(0.0, every - (time.monotonic() - t)))
print("done", flush=True)
"""


def _tool(dep, mode: str, python: str, args: list, flags: list) -> list[str]:
    """PYTHON with ARGS in a namespace; the Go tool's sg-MODE with FLAGS in a guest."""
    from vnetbench.functional.measure import native
    if native(dep):
        from vnetbench.traffic import flowgen
        return [flowgen.binary(), f"sg-{mode}", *map(str, flags)]
    return [sys.executable, "-c", python, *map(str, args)]


def _ports(ports) -> str:
    return ",".join(map(str, ports))


def offset_s(dep, vm: str) -> tuple[float, float]:
    """(the VM's clock minus ours, how well that is known), seconds."""
    from vnetbench.functional.measure import clock_offset
    c = clock_offset(dep, vm)
    return c["offset_ns"] / 1e9, c["uncertainty_ns"] / 1e9


def serve(dep, vm: str, ports) -> subprocess.Popen:
    """Echo servers on ``ports`` in ``vm`` (journaled: teardown stops them)."""
    p = dep.popen(vm, _tool(dep, "serve", SERVER, list(ports), ["-ports", _ports(ports)]),
                  stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "listening":
        raise RuntimeError(f"echo server in {vm} did not start")
    return p


def tcp_open(dep, src: str, ip: str, port: int, timeout: float = 0.8) -> bool:
    """A new TCP connection from ``src`` is answered (connect and one byte echoed)."""
    out = dep.exec(src, _tool(dep, "probe", PROBE, [ip, port, timeout],
                              ["-target", ip, "-port", port, "-timeout", timeout]), timeout=30)
    return out.stdout.strip() == "open"


def icmp_open(dep, src: str, ip: str) -> bool:
    return dep.exec(src, ["ping", "-n", "-c", "1", "-W", "1", ip], timeout=30).returncode == 0


#: how long one knock waits for its connection: below TCP's initial retransmission timeout
#: (1 s), so an answered knock is one whose first SYN was admitted; far above any
#: datapath's connection set-up (a reactive one sets up each new flow in its agent)
KNOCK_ATTEMPT_S = 0.5


def knock(dep, src: str, ip: str, port: int, every_s: float, timeout_s: float) -> subprocess.Popen:
    """A new connection started every ``every_s`` (non-blocking: attempts overlap, each
    waits up to KNOCK_ATTEMPT_S) until one started at or after the request (``request``
    tells the knocker its time) is answered; ``admitted`` reads that attempt's start. A
    knock that must complete within the interval would time a reactive datapath's
    connection set-up (13 ms on the vRouter model across hosts), not the rule; an
    attempt started before the request may be judged after it (in flight, or held for
    set-up) and does not count. Started (and knocking) when this returns."""
    argv = _tool(dep, "knock", KNOCK, [ip, port, every_s, timeout_s, KNOCK_ATTEMPT_S],
                 ["-target", ip, "-port", port, "-every", every_s, "-for", timeout_s,
                  "-attempt", KNOCK_ATTEMPT_S])
    p = dep.popen(src, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "knocking":
        raise RuntimeError(f"knocker in {src} did not start")
    return p


def request(p: subprocess.Popen, offset: float = 0.0) -> float:
    """Tell the knocker the request's time (now, on its clock: ours + ``offset``) and
    return it (ours)."""
    t = now()
    p.stdin.write(f"{t + offset:.6f}\n")
    p.stdin.flush()
    return t


def admitted(p: subprocess.Popen, timeout_s: float, offset: float = 0.0) -> float | None:
    """The time (ours) of the first answered knock; None: never. The result line is read
    before stdin closes: on a guest, stdin's end ends the command (sshguests.tied_popen)."""
    import select
    ready, _, _ = select.select([p.stdout], [], [], timeout_s + 10)
    line = p.stdout.readline() if ready else ""
    p.communicate(timeout=10)
    word, _, t = line.strip().partition(" ")
    return float(t) - offset if word == "open" else None


def echo_stream(dep, src: str, ip: str, port: int, every_s: float, seconds: float) -> subprocess.Popen:
    """One established connection echoing a byte every ``every_s`` for ``seconds``."""
    p = dep.popen(src, _tool(dep, "stream", STREAM, [ip, port, every_s, seconds],
                             ["-target", ip, "-port", port, "-every", every_s, "-for", seconds]),
                  stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "connected":
        raise RuntimeError(f"echo stream from {src} did not connect")
    return p


def echo_times(p: subprocess.Popen, seconds: float, offset: float = 0.0) -> list[float]:
    """The send times (ours) of the echoes answered in time."""
    out, _ = p.communicate(timeout=seconds + 10)
    return [float(line.split()[1]) - offset for line in out.splitlines() if line.startswith("echo ")]


def now() -> float:
    return time.monotonic()


def rule_to_first_packet(dep, src: str, dst: str, group: str, ports, every_s: float = 0.005,
                         timeout_s: float = 10.0, clock=None) -> list[float | None]:
    """Per port of ``ports`` (each with a listener on ``dst``, none admitted yet): a knock
    every ``every_s`` from ``src``, then a rule admitting that port added to ``group`` (a
    group of ``dst``); the ms from the request to the first answered knock (None: none
    within ``timeout_s``), counting only attempts started at or after the request.
    Resolution: the knock interval. The group's rules are put back afterwards. ``clock``:
    ``offset_s(dep, src)`` when the caller has it."""
    from vnetbench.testbed.model import SgRule
    from vnetbench.testbed.secgroups import with_rules
    before = dep.testbed.security_groups
    base = dep.testbed.security_group(group).rules
    offset, _ = clock or offset_s(dep, src)
    out = []
    try:
        for i, port in enumerate(ports):
            p = knock(dep, src, dep.ip(dst), port, every_s, timeout_s)
            rules = tuple(SgRule("ingress", "tcp", q, q) for q in ports[:i + 1]) + base
            t0 = request(p, offset)
            dep.update_security_groups(with_rules(dep.testbed, group, rules))
            t = admitted(p, timeout_s, offset)
            out.append(None if t is None else max(0.0, (t - t0) * 1000))
    finally:
        dep.update_security_groups(before)
    return out


def rule_removal(dep, src: str, dst: str, group: str, port: int, every_s: float, after_s: float,
                 tail_s: float) -> dict:
    """An echo stream from ``src`` to ``dst``:``port`` (a listener there, admitted by a TCP
    rule of ``group``), the group's TCP rules removed after 1 s and put back after: echoes
    answered before the request, in the last ``tail_s`` of the ``after_s`` after it (an
    API may answer before its agent applies the change), ms from the request to the last
    echo in that window, and how long the request took."""
    import time

    from vnetbench.testbed.secgroups import with_rules
    tb0 = dep.testbed
    rules = tb0.security_group(group).rules
    offset, uncertainty = offset_s(dep, src)
    seconds = 1.0 + after_s + 1.0
    stream = echo_stream(dep, src, dep.ip(dst), port, every_s, seconds)
    try:
        time.sleep(1.0)
        t0 = now()
        dep.update_security_groups(with_rules(tb0, group, (r for r in rules if r.protocol != "tcp")))
        applied = now()
    finally:
        times = echo_times(stream, seconds, offset)
        dep.update_security_groups(tb0.security_groups)
    end = t0 + after_s
    last = max((t for t in times if t0 <= t <= end), default=t0)
    return {"before": sum(t < t0 for t in times), "after": sum(end - tail_s < t <= end for t in times),
            "stopped_ms": (last - t0) * 1000, "window_s": after_s, "tail_s": tail_s,
            "apply_ms": (applied - t0) * 1000, "clock_uncertainty_ms": uncertainty * 1000}
