"""Security-group measurements in the VMs: TCP probes, a knock every few ms, an echo
stream. Small Python programs run in the VM namespaces (the netns backend: security
groups are realised there only); their times are CLOCK_MONOTONIC, which every
namespace shares, so they compare with the caller's ``time.monotonic()``."""

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
import socket, sys, time
ip, port, every, until = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), time.monotonic() + float(sys.argv[4])
print("knocking", flush=True)
while time.monotonic() < until:
    t = time.monotonic()
    s = socket.socket(); s.settimeout(every)
    try:
        s.connect((ip, port)); print(f"open {t:.6f}", flush=True); break
    except OSError:
        pass
    finally:
        s.close()
    time.sleep(max(0.0, every - (time.monotonic() - t)))
else:
    print("never", flush=True)
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


def serve(dep, vm: str, ports) -> subprocess.Popen:
    """Echo servers on ``ports`` in ``vm`` (journaled: teardown stops them)."""
    p = dep.popen(vm, [sys.executable, "-c", SERVER, *map(str, ports)], stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "listening":
        raise RuntimeError(f"echo server in {vm} did not start")
    return p


def tcp_open(dep, src: str, ip: str, port: int, timeout: float = 0.8) -> bool:
    """A new TCP connection from ``src`` is answered (connect and one byte echoed)."""
    out = dep.exec(src, [sys.executable, "-c", PROBE, ip, str(port), str(timeout)], timeout=30)
    return out.stdout.strip() == "open"


def icmp_open(dep, src: str, ip: str) -> bool:
    return dep.exec(src, ["ping", "-n", "-c", "1", "-W", "1", ip], timeout=30).returncode == 0


def knock(dep, src: str, ip: str, port: int, every_s: float, timeout_s: float) -> subprocess.Popen:
    """A new connection attempted every ``every_s`` until one is answered; ``admitted``
    reads its time. Started (and knocking) when this returns."""
    p = dep.popen(src, [sys.executable, "-c", KNOCK, ip, str(port), str(every_s), str(timeout_s)],
                  stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "knocking":
        raise RuntimeError(f"knocker in {src} did not start")
    return p


def admitted(p: subprocess.Popen, timeout_s: float) -> float | None:
    """The monotonic time of the first answered knock; None: never."""
    out, _ = p.communicate(timeout=timeout_s + 10)
    word, _, t = out.strip().partition(" ")
    return float(t) if word == "open" else None


def echo_stream(dep, src: str, ip: str, port: int, every_s: float, seconds: float) -> subprocess.Popen:
    """One established connection echoing a byte every ``every_s`` for ``seconds``."""
    p = dep.popen(src, [sys.executable, "-c", STREAM, ip, str(port), str(every_s), str(seconds)],
                  stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "connected":
        raise RuntimeError(f"echo stream from {src} did not connect")
    return p


def echo_times(p: subprocess.Popen, seconds: float) -> list[float]:
    out, _ = p.communicate(timeout=seconds + 10)
    return [float(line.split()[1]) for line in out.splitlines() if line.startswith("echo ")]


def now() -> float:
    return time.monotonic()


def rule_to_first_packet(dep, src: str, dst: str, group: str, ports, every_s: float = 0.005,
                         timeout_s: float = 10.0) -> list[float | None]:
    """Per port of ``ports`` (each with a listener on ``dst``, none admitted yet): a knock
    every ``every_s`` from ``src``, then a rule admitting that port added to ``group`` (a
    group of ``dst``); the ms from the request to the first answered knock (None: none
    within ``timeout_s``). Resolution: the knock interval. The group's rules are put
    back afterwards."""
    from vnetbench.testbed.model import SgRule
    from vnetbench.testbed.secgroups import with_rules
    before = dep.testbed.security_groups
    base = dep.testbed.security_group(group).rules
    out = []
    try:
        for i, port in enumerate(ports):
            p = knock(dep, src, dep.ip(dst), port, every_s, timeout_s)
            rules = tuple(SgRule("ingress", "tcp", q, q) for q in ports[:i + 1]) + base
            t0 = now()
            dep.update_security_groups(with_rules(dep.testbed, group, rules))
            t = admitted(p, timeout_s)
            out.append(None if t is None else max(0.0, (t - t0) * 1000))
    finally:
        dep.update_security_groups(before)
    return out
