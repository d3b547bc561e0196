"""VM migration through the Deployment interface (``migration_target``, ``migrate_vm``:
the backend moves the VM, here it is measured). The netns backend re-plugs a namespace's
NICs into another host's vSwitch (testbed/netns/migrate.py); the openstack backend asks
Nova to move the server to the compute node of the other testbed host
(testbed/openstack/nova_migration.py).

* live: downtime from sequence-numbered UDP probes a peer VM (one that stays) sends into
  the migrating VM every ``interval_s`` (``vnetbench.traffic.probe``): the longest run of
  lost probes x the interval. Namespaces run the round trip (the migrating VM echoes,
  the peer counts what came back); guests carry no Python, so there the Go tool's one
  way (the peer sends, the migrating guest receives): the receiver runs detached in the
  guest and writes a file, read back after the move, since the command channel to a
  guest that moved may be gone for a while;
* cold: the time the move took (and what the backend measured: a cloud's outage).
"""

from __future__ import annotations

import random
import select
import shlex
import subprocess
import time
from pathlib import PurePosixPath

from vnetbench.errors import VnetbenchError
from vnetbench.traffic import probe

GUEST_MOVE_S = 60.0     # guests: the probe stream runs this long beyond before_s + after_s, and
                        # the live migration must end inside it (a TCG guest's Nova live
                        # block migration took 9-15 s on the AIO: tools/aio/README.md)
REACH_S = 240.0         # guests: how long the receiver's file may be out of reach after the
                        # move (the runner reached a migrated guest again only after minutes
                        # in 2 of 5 runs: test_multinode)


def peer_of(dep, vm: str) -> str:
    """A VM on the same vnet to probe from: one that stays put."""
    v = dep.testbed.vm(vm)
    for other in dep.testbed.vms:
        if other.name != vm and any(n.vnet == v.nics[0].vnet for n in other.nics):
            return other.name
    raise VnetbenchError(f"no other VM on vnet {v.nics[0].vnet} to probe {vm} from")


def live(dep, vm: str, to_host: str, peer: str | None = None, interval_s: float = 0.005,
         before_s: float = 1.0, after_s: float = 2.0, move_s: float = GUEST_MOVE_S) -> dict:
    """Move ``vm`` while a peer probes it; returns the probe summary (downtime_ms, lost,
    sent, loss_pct, outages ...), the peer, move_s and what the backend said of the move.
    ``move_s``: guests only, how long the move may take inside the stream."""
    dep.migration_target(vm, to_host)           # refused before any probe is sent
    peer = peer or peer_of(dep, vm)
    if dep.backend == "netns":
        return _round_trip(dep, vm, to_host, peer, interval_s, before_s, after_s)
    return _one_way(dep, vm, to_host, peer, interval_s, before_s, after_s, move_s)


def cold(dep, vm: str, to_host: str) -> dict:
    """Shut down, move, boot: as the backend does it."""
    return dep.migrate_vm(vm, to_host, live=False)


def _round_trip(dep, vm, to_host, peer, interval_s, before_s, after_s) -> dict:
    """Namespaces: the probe tool's echo in the migrating VM, its round trip in the peer."""
    vnet = dep.testbed.vm(vm).nics[0].vnet
    port = random.randrange(20000, 60000)
    echo = dep.popen(vm, probe.echo_command(port, before_s + after_s + 30),
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        # probes sent before the echo listens would be lost and counted as downtime
        if not (select.select([echo.stdout], [], [], 30)[0] and '"ready"' in echo.stdout.readline()):
            raise VnetbenchError(f"probe echo in {vm} did not start")
        params = probe.RoundTripParams(dest=dep.ip(vm, vnet), port=port, interval_ms=interval_s * 1e3,
                                       seconds=before_s + after_s, marker=random.randrange(1, 2**31))
        sender = dep.popen(peer, probe.roundtrip_command(params), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if '"ready"' not in sender.stdout.readline():
            raise VnetbenchError(f"probe sender in {peer} did not start: {sender.stderr.read()[-200:]}")
        time.sleep(before_s)
        moved = dep.migrate_vm(vm, to_host, live=True)
        out, err = sender.communicate(timeout=before_s + after_s + 30)
        if sender.returncode != 0:
            raise VnetbenchError(f"probe sender in {peer} failed: {err.strip()[-200:]}")
    finally:
        echo.kill()
        echo.wait()
    res = probe.parse(out)
    return {**probe.summarize(res["sent"], res["received"], res["interval_ms"]), "peer": peer, **moved}


def _by_name(argv) -> list[str]:
    """The Go tool as the guest's image has it: on its PATH."""
    return [PurePosixPath(str(argv[0])).name, *map(str, argv[1:])]


def _one_way(dep, vm, to_host, peer, interval_s, before_s, after_s, move_s) -> dict:
    """Guests: the peer's probe-send streams into the migrating guest's probe-recv for
    before_s + move_s + after_s; the move starts before_s in and must end after_s before
    the stream does (else nothing says the stream saw all of the outage: an error)."""
    vnet = dep.testbed.vm(vm).nics[0].vnet
    port, marker = random.randrange(20000, 60000), random.randrange(1, 2**31)
    stream_s = before_s + move_s + after_s
    result = f"/tmp/vnb-migrate-{marker}.json"
    recv = _by_name(probe.recv_command(probe.RecvParams(port, stream_s + 2.0, marker, first_within=30.0),
                                       native=True))
    # detached (a process of its own, reparented in the guest) and bounded by its own
    # --seconds: the command channel may drop while the guest moves
    started = dep.exec(vm, ["sh", "-c", f"({shlex.join(recv)} >{result} 2>&1 </dev/null &)"], timeout=30)
    if started.returncode != 0:
        raise VnetbenchError(f"probe receiver in {vm} did not start: {started.stderr.strip()[-200:]}")
    sender = None
    try:
        _wait_ready(dep, vm, result)
        sender = dep.popen(peer, probe.send_command(probe.SendParams(
            dep.ip(vm, vnet), port, interval_s * 1e3, stream_s, marker), native=True),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not select.select([sender.stdout], [], [], 30)[0] or '"ready"' not in sender.stdout.readline():
            raise VnetbenchError(f"probe sender in {peer} did not start")
        t_ready = time.monotonic()
        time.sleep(before_s)
        moved = dep.migrate_vm(vm, to_host, live=True)
        t_moved = time.monotonic()
        out, err = sender.communicate(timeout=stream_s + 30)
        if sender.returncode != 0:
            raise VnetbenchError(f"probe sender in {peer} failed: {err.strip()[-200:]}")
        if t_moved + after_s > t_ready + stream_s:
            raise VnetbenchError(f"live migration of {vm} to {to_host} took {t_moved - t_ready - before_s:.1f} s: "
                                 f"the {stream_s:g} s probe stream from {peer} ended less than {after_s:g} s "
                                 "after it, so its downtime is not measured (the move itself is done)")
        sent, got = probe.parse(out), _result(dep, vm, result)
    finally:
        if sender is not None and sender.poll() is None:
            sender.kill()
            sender.wait()
        _remove(dep, vm, result)
    return {**probe.summarize(sent["sent"] + sent["errors"], [p[0] for p in got["probes"]],
                              interval_s * 1e3), "peer": peer, **moved}


def _wait_ready(dep, vm: str, result: str, timeout: float = 30.0) -> None:
    """The receiver listens (its ready line is in its file): probes sent before would be
    counted as lost."""
    deadline = time.monotonic() + timeout
    while True:
        if '"ready"' in dep.exec(vm, ["cat", result], timeout=30).stdout:
            return
        if time.monotonic() > deadline:
            raise VnetbenchError(f"probe receiver in {vm} did not start within {timeout:g} s")
        time.sleep(0.5)


def _result(dep, vm: str, result: str) -> dict:
    """The receiver's result line from its file in the guest, once it wrote it. The guest
    may be out of reach for a while after the move (``REACH_S``)."""
    deadline, last = time.monotonic() + REACH_S, "nothing read"
    while True:
        try:
            done = dep.exec(vm, ["cat", result], timeout=30)
            last = (done.stdout.strip().splitlines() or [done.stderr.strip() or "an empty file"])[-1]
            if done.returncode == 0:
                return probe.parse(done.stdout)
        except ValueError:
            pass                              # only its ready line yet: still receiving
        except subprocess.TimeoutExpired:
            last = "no answer within 30 s"
        if time.monotonic() > deadline:
            raise VnetbenchError(f"probe receiver's result in {vm} ({result}) not read within "
                                 f"{REACH_S:g} s after the stream: {last[:200]}")
        time.sleep(2.0)


def _remove(dep, vm: str, result: str) -> None:
    """The receiver's file, best effort (the guest goes with the run in any case)."""
    try:
        dep.exec(vm, ["rm", "-f", result], timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        pass
