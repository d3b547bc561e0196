"""Background helpers inside VMs: an iperf3 server, a tcpdump capture."""

from __future__ import annotations

import select
import subprocess
import time
import warnings
from contextlib import contextmanager

from vnetbench.traffic import iperf3


def start_timeout(dep) -> float:
    """Seconds a background tool may take to start in a VM: a namespace starts it in
    milliseconds; a TCG guest starved by a loaded 2-CPU machine (load 20+) took more than
    the 10-15 s this once was (compare --backend libvirt lost flow_setup and rfc2544 to it)."""
    return 10.0 if getattr(dep, "backend", "netns") == "netns" else 45.0


class ChannelLost(RuntimeError):
    """The SSH session that was to run a guest's server ended before it ran: ssh's own
    exit 255, without a word (the command channel failed, not the network under test)."""


def wait_listening(dep, vm: str, port: int, proto="tcp", timeout=None, server=None) -> None:
    """Until VM listens on PORT; a SERVER (its Popen, stderr piped) that exited says why."""
    timeout = timeout or max(15.0, start_timeout(dep))
    flag = "-ltnH" if proto == "tcp" else "-lunH"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            err = (server.stderr.read() if server.stderr else b"") or b""
            lost = server.returncode == 255 and not err.strip()
            raise (ChannelLost if lost else RuntimeError)(
                f"iperf3 server in {vm} exited with {server.returncode} before listening on "
                f"{port}: {_why(err, server.returncode)[:200]}")
        try:        # one slow answer (a starved guest's command channel) is not the verdict
            if f":{port}" in dep.exec(vm, ["ss", flag, f"sport = :{port}"],
                                      timeout=max(5.0, deadline - time.monotonic())).stdout:
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.02)
    state = "" if server is None or server.poll() is not None else " (its process is still running)"
    raise RuntimeError(f"iperf3 server in {vm} not listening on {port} after {timeout:.0f} s{state}")


def _why(stderr: bytes, rc: int) -> str:
    """The line of a dead server's stderr that says why (iperf3 ends with 'iperf3:
    exiting' after its error line); an SSH client's own 255 has none."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    errors = [ln for ln in lines if "error" in ln.lower()]
    if errors or lines:
        return (errors or lines)[-1]
    return ("no output (255: the SSH session to the guest failed, or the remote command was "
            "killed by a signal)" if rc == 255 else "no output")


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
def iperf3_server(dep, vm: str, port: int = iperf3.DEFAULT_PORT, interval_s: float | None = None):
    """A one-off iperf3 server in ``vm``; stopped on exit even if the client failed.
    ``interval_s``: its own reporting interval (what --get-server-output returns)."""
    # -J, though its report is not read: a text-mode server sending a reverse (-R) UDP test
    # into a 10 Mbit/s shaped port left the client waiting past its 37 s in 2 of 4 runs (7 of
    # 7 passed with -J); iperf3's own error then goes to the discarded stdout, unnamed
    argv = iperf3.server_command(iperf3.ServerParams(bind=dep.ip(vm), port=port, interval_s=interval_s))
    server = _listening(dep, vm, port, argv)
    try:
        yield server
    finally:
        stop(server)


def _listening(dep, vm: str, port: int, argv) -> subprocess.Popen:
    """ARGV started in VM and listening on PORT. A session the guest's SSH server closed
    before the server ran is opened once more: dropbear did that to the first session
    opened right after another one ended (no exit status, so ssh exits 255 in silence:
    the libvirt feature rows, 1 run in 3); a second loss is an error."""
    for attempt in (1, 2):
        server = dep.popen(vm, argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_listening(dep, vm, port, server=server)
            return server
        except ChannelLost as exc:
            stop(server)
            if attempt == 2:
                raise
            warnings.warn(f"{exc}; its session opened once more", RuntimeWarning, stacklevel=2)
        except BaseException:
            stop(server)
            raise


@contextmanager
def captures(dep, specs: dict, ready_timeout=30.0):
    """tcpdumps started together: ``specs`` {key: (vm, argv)}, {key: (None, argv, host)}
    (host side) or {key: (None, argv_of, host, link)} (HOST's LINK as a wire:
    ``Deployment.link_popen``). Each is armed (its "listening on" line) before the body runs; the
    waits overlap (up to ``ready_timeout``: a starved guest's channel can take seconds). Yields ``outputs(grace)``: each capture may end on its own (``-c``)
    within ``grace`` seconds (frames in flight), then the rest are stopped; {key: output}."""
    procs, box = {}, {}
    try:
        for key, (vm, argv, *host) in specs.items():
            kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
            if callable(argv):       # argv_of(interface) for HOST's link
                procs[key] = dep.link_popen(host[0], host[1], argv, **kw)
            elif host and host[0]:
                procs[key] = dep.host_popen(host[0], argv, **kw)
            else:
                procs[key] = dep.popen(vm, argv, **kw)
        waiting = {p.stderr.fileno(): p for p in procs.values()}
        deadline = time.monotonic() + ready_timeout
        while waiting and (left := deadline - time.monotonic()) > 0:
            for fd in select.select(list(waiting), [], [], left)[0]:
                waiting.pop(fd).stderr.readline()

        def outputs(grace=0.2):
            if "out" not in box:
                deadline = time.monotonic() + grace
                for p in procs.values():
                    try:
                        p.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                box["out"] = {k: stop(p) or "" for k, p in procs.items()}
            return box["out"]
        yield outputs
    finally:
        for p in procs.values():
            if p.poll() is None:
                stop(p)


@contextmanager
def capture(dep, vm: str, argv, ready_timeout=30.0, host: str | None = None, link: str | None = None):
    """One tcpdump in ``vm`` (or on ``host``'s side; with ``link``, ``argv`` is
    argv_of(interface) for that link of ``host``, ``Deployment.link_popen``); yields
    ``output(timeout)``: its output once it ended by itself or ``timeout`` passed."""
    spec = (vm, argv, host) if link is None else (None, argv, host, link)
    with captures(dep, {0: spec}, ready_timeout) as outs:
        yield lambda timeout=5.0: outs(timeout)[0]
