"""Background helpers inside VMs: an iperf3 server, a tcpdump capture."""

from __future__ import annotations

import select
import subprocess
import time
from contextlib import contextmanager

from vnetbench.traffic import iperf3


def wait_listening(dep, vm: str, port: int, proto="tcp", timeout=15.0) -> None:
    flag = "-ltnH" if proto == "tcp" else "-lunH"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f":{port}" in dep.exec(vm, ["ss", flag, f"sport = :{port}"], timeout=5).stdout:
            return
        time.sleep(0.02)
    raise RuntimeError(f"iperf3 server in {vm} not listening on {port} after {timeout:.0f} s")


def stop(p: subprocess.Popen, timeout: float = 5.0) -> str | None:
    """Terminate a background process if it still runs and reap it, killing it when it
    outlives ``timeout``; returns its remaining stdout (None when not piped)."""
    if p.poll() is None:
        p.terminate()
    try:
        return p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()[0]


@contextmanager
def iperf3_server(dep, vm: str, port: int = iperf3.DEFAULT_PORT):
    """A one-off iperf3 server in ``vm``; stopped on exit even if the client failed."""
    argv = iperf3.server_command(iperf3.ServerParams(bind=dep.ip(vm), port=port))
    server = dep.popen(vm, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(dep, vm, port)
        yield server
    finally:
        stop(server)


@contextmanager
def capture(dep, vm: str, argv, ready_timeout=5.0, host: str | None = None):
    """tcpdump in ``vm`` (or on ``host``'s side); yields a callable returning its output
    once it is done."""
    spawn = (lambda a, **kw: dep.host_popen(host, a, **kw)) if host else \
        (lambda a, **kw: dep.popen(vm, a, **kw))
    p = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stderr], [], [], ready_timeout)
    if ready:
        p.stderr.readline()            # "listening on eth0 ..." : the capture is armed
    box = {}

    def output(timeout=5.0):
        try:
            box["out"], _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.terminate()
            box["out"], _ = p.communicate()
        return box["out"]
    try:
        yield output
    finally:
        if p.poll() is None:
            stop(p)
