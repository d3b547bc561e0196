"""Fault tolerance (seed 003): the controller stopped (SIGTERM) or killed (SIGKILL) under
an ongoing stream, new sessions and new pairs after the stop, the flow idle timeout,
and a vSwitch restart — through the fault API (``vnetbench.faults``).

Kinds without a controller get N/A for the controller rows, with the reason the
fault API gives. Every controller test starts the controller again afterwards.
"""

import subprocess
import time
from types import SimpleNamespace

import pytest

from vnetbench import kinds
from vnetbench.battery import session
from vnetbench.errors import VnetbenchError
from vnetbench.faults import LOCAL_HOSTS, Faults, control, unsupported
from vnetbench.functional import measure, verdict
from vnetbench.functional.plugin import deployment, deployment_fixture, one_vnet

TESTBED = one_vnet(4)
IDLE_WAITS_S = (2, 4, 8)
CONNECT_TIMEOUT_MS = 5000     # a new session that cannot connect: Fail-close after 5 s, not
                              # after TCP's SYN retries hit the 32 s bound (vrouter's stop)      # then one bisection step between the last survived and the first expired

PER_KIND = True      # controller faults and migration hardly depend on the encapsulation:
                     # one network per kind unless --every-network
dep = deployment_fixture(TESTBED, "faults")


@pytest.fixture(scope="module", autouse=True)
def faultable(target):
    """N/A with the backend's reason before any testbed is built for nothing (as
    test_migration does)."""
    unsupported(SimpleNamespace(backend=target[0]), "controller or vSwitch faults", LOCAL_HOSTS)


class Controller:
    """The controller of the testbed through the fault API; started again only when this
    test stopped it (starting a running OVN database is an error)."""

    def __init__(self, dep):
        self.faults, self.down = Faults(dep), False

    def stop(self, graceful=True):
        self.down = True
        self.faults.controller_stop(graceful=graceful)

    def start(self):
        if self.down:
            self.faults.controller_start()
            self.down = False


@pytest.fixture
def faults(dep):
    """N/A for kinds without a controller; the controller runs again after the test."""
    try:
        control.components(dep)
    except VnetbenchError as exc:
        pytest.skip(str(exc))
    ctl = Controller(dep)
    yield ctl
    ctl.start()


def stops(graceful_row: str, kill_row: str):
    """The two ways a controller goes (SIGTERM, SIGKILL): one row each."""
    return pytest.mark.parametrize("graceful", [
        pytest.param(True, marks=pytest.mark.row(graceful_row), id="stop"),
        pytest.param(False, marks=pytest.mark.row(kill_row), id="kill")])


@pytest.mark.whole_machine      # "continues" = no pause over 1 s: a starved prober pauses too
@stops("fault.ping-stop", "fault.ping-kill")
def test_ping_continues_when_the_controller_stops(dep, faults, record, graceful):
    neighbours = measure.resolved_pair(dep, "red-1", "red-2")     # and the flows exist
    m = measure.probes_around(dep, "red-1", "red-2", lambda: faults.stop(graceful=graceful),
                              after_s=3.0)
    record(verdict.traffic_continues(m), {**m, "neighbours": neighbours})


@stops("fault.iperf-stop", "fault.iperf-kill")
def test_new_iperf_after_the_controller_stops(dep, faults, record, graceful):
    m = _new_iperf(dep, faults, graceful)
    record(verdict.new_session(m), m)


def _new_iperf(dep, faults, graceful):
    """As the seed: a ping starts between the two VMs (neighbours fresh), the controller
    stops, then a new iperf3 session starts between them. The ping keeps their flows
    from idling out; where a flow matches the host pair (Floodlight v0.90), the new TCP
    connection rides the ping's flows."""
    neighbours = measure.resolved_pair(dep, "red-1", "red-2")
    pinger = dep.popen("red-1", ["ping", "-n", "-i", "0.2", dep.ip("red-2")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        faults.stop(graceful=graceful)
        return {**measure.receiver_rate(dep, "red-2", "red-1", 2,
                                        connect_timeout_ms=CONNECT_TIMEOUT_MS),
                "neighbours": neighbours}
    except (ValueError, RuntimeError) as exc:     # iperf3 could not connect / no result
        return {"mbps": 0.0, "error": str(exc), "neighbours": neighbours}
    except subprocess.TimeoutExpired:
        return {"mbps": 0.0, "error": "iperf3 hung: its connection never completed",
                "neighbours": neighbours}
    finally:
        session.stop(pinger)


@pytest.mark.row("fault.new-ping")
def test_new_ping_after_stop_is_fail_open_or_close(dep, faults, record):
    """red-3 and red-4 never talked: no flow, no neighbour entry."""
    dep.exec("red-3", ["ip", "neigh", "flush", "all"])
    faults.stop()
    m = measure.ping_once(dep, "red-3", dep.ip("red-4"))
    record(verdict.fail_open_close(m), m)


def _survives(dep, faults, idle_s) -> bool:
    """Flows installed with the controller up, controller stopped, ``idle_s`` of silence,
    then one echo: answered = the flows are still there."""
    faults.start()
    if not measure.ping_once(dep, "red-1", dep.ip("red-2"))["received"]:
        raise RuntimeError("red-1 does not reach red-2 with the controller up")
    faults.stop()
    time.sleep(idle_s)
    return bool(measure.ping_once(dep, "red-1", dep.ip("red-2"), count=1)["received"])


@pytest.mark.row("fault.idle-timeout")
def test_flow_idle_timeout(dep, faults, record):
    """The longest wait first: flows that survive it have no idle timeout this row can
    see (one trial, not one per wait); flows that do not are bracketed by the shorter
    waits, shortest first, and one trial between the last survived and the first lost."""
    longest = IDLE_WAITS_S[-1]
    trials = [[longest, _survives(dep, faults, longest)]]
    if not trials[0][1]:
        for wait in IDLE_WAITS_S[:-1]:
            trials.append([wait, _survives(dep, faults, wait)])
            if not trials[-1][1]:
                break
        lo = max((w for w, ok in trials if ok), default=0)
        hi = min(w for w, ok in trials if not ok)
        trials.append([(lo + hi) / 2, _survives(dep, faults, (lo + hi) / 2)])
    m = {"trials": trials}
    record(verdict.idle_timeout(m), m)


@pytest.mark.whole_machine      # back within the probe window: ovn's re-programming took 3.1 s
@pytest.mark.row("fault.vswitch-restart")   # alone, and over the 4 s window beside the other lane
def test_vswitch_restart_traffic_flows_again(dep, record):
    measure.ping_once(dep, "red-1", dep.ip("red-2"))          # neighbours and flows exist
    m = measure.probes_around(dep, "red-1", "red-2", lambda: Faults(dep).vswitch_restart("h2"),
                              after_s=4.0)
    record(verdict.traffic_recovers(m), m)


def multi(kind) -> str | None:
    """The testbed with two controller instances (``Kind.redundant_options``), None when
    the kind declares none."""
    k = kinds.get(kind)
    if not k.redundant_options:
        return None
    opts = ", ".join(f"{key}: {value}" for key, value in k.redundant_options.items())
    return TESTBED.replace("vswitch: {kind}",
                           f"vswitch: {{{{kind: {k.name}, {k.options_key}: {{{{{opts}}}}}}}}}")


SYNC_TIMEOUT_S = 10.0


@pytest.mark.whole_machine      # the stream goes on: no pause over 1 s
@pytest.mark.row("fault.multi-controller")
def test_one_of_two_controller_instances_killed(combo, caps, target, dep, record):
    """Two instances; the one doing the work (ovs-openflow's master, OVN's ovn-northd
    holding the SB lock) is killed under a probe stream. Then the control plane must
    still work: two VMs that never talked reach each other (a reactive controller's new
    flows) and, where the kind has one, a new configuration change is carried through
    (OVN: NB -> SB, which needs an active ovn-northd), timed from the kill.
    (``dep``: an unbuildable configuration stays out of the columns.)"""
    kind, _ = combo
    text = multi(kind)
    if text is None:
        having = [f"{k.name} has {k.options_key}.{next(iter(k.redundant_options))}"
                  for k in kinds.all_kinds() if k.redundant_options]
        pytest.skip(f"{kind}: the testbed declares no controller instances ({', '.join(having)})")
    with deployment(combo, caps, text, "multi-controller", target) as d:
        f, after = Faults(d), {}
        first = control.active(d)
        measure.ping_once(d, "red-1", d.ip("red-2"))

        def kill_then_sync():
            f.controller_kill(first)
            after["sync"] = _sync(d)
        m = measure.probes_around(d, "red-1", "red-2", kill_then_sync, after_s=3.0)
        m["killed"] = first
        m["new_ping"] = measure.ping_once(d, "red-3", d.ip("red-4"))
        m["sync"] = after.get("sync")
    record(verdict.survives_instance_loss(m), m)


def _sync(d) -> dict | None:
    """Right after the kill: a configuration change carried through, how long it took
    and which instance did it (None: the kind has no such probe)."""
    try:
        s = control.sync(d, SYNC_TIMEOUT_S)
    except VnetbenchError as exc:
        return {"ok": False, "detail": str(exc)[:200]}
    return None if s is None else {"ok": True, "s": s, "by": control.active(d)}
