"""ovs-openflow behaviours that follow from the Floodlight v0.90 + IVS model, measured.
Each would fail if the mechanism were absent: flows that idle out (packet-in on the
first packet), the per-port packet-in meter, fail_mode, VNF letting broadcast through."""

import statistics
import subprocess
import time
from types import SimpleNamespace

import pytest

from vnetbench.battery.broadcast import _one as broadcast_once
from vnetbench.faults import Faults
from vnetbench.testbed.loader import loads
from vnetbench.traffic import ping


def _testbed(openflow: str, extra: str = "", ntype="vxlan"):
    return loads(f"vswitch: {{kind: ovs-openflow, openflow: {{{openflow}}}}}\n"
                 f"network: {{type: {ntype}}}\n{extra}", source="<test_openflow>",
                 online_cpus=[0, 1])


@pytest.fixture
def up(netns_up):
    return lambda *args, **kw: netns_up(_testbed(*args, **kw))


def _ping(dep, src, dst, count, interval):
    argv = ping.command(ping.PingParams(dest=dep.ip(dst), count=count, interval_s=interval))
    return ping.parse(dep.exec(src, argv, timeout=count * interval + 20).stdout)


def test_switches_are_not_refused_by_a_controller_still_importing(up):
    """The controller listens before it imports os-ken, so every bridge's first
    connection is accepted (a refused one waits OVS's 1 s minimum back-off, which
    was a third of the bring-up): one 'connected', no 'connection failed'."""
    dep = up("")
    for h in dep.testbed.hosts:
        log = [line for line in dep.host_file(h.name, "ovs-vswitchd.log").read_text().splitlines()
               if "|rconn|" in line and ":6653" in line]
        assert not [line for line in log if "failed" in line or "timed out" in line], log
        assert sum(line.endswith(": connected") for line in log) == 1, log


def test_a_restarted_controller_starts_from_an_empty_flow_table(up):
    """Floodlight clears a switch's flows at the handshake: flows pushed before a
    controller restart are gone after it (idle_timeout 60 s: they would still be there)."""
    from vnetbench.kinds.ovs_openflow.floodlight import COOKIE_FORWARDING
    dep = up("idle_timeout: 60")

    def forwarding_flows(host):
        sock = dep.host_file(host, f"{dep.names.ovs_int}.mgmt")
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", f"unix:{sock}",
                              f"cookie={COOKIE_FORWARDING:#x}/-1"],
                             capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if "cookie=" in line]
    assert _ping(dep, "cross-a", "cross-b", 3, 0.2)["received"] == 3
    assert forwarding_flows("h1") and forwarding_flows("h2")
    Faults(dep).controller_restart()
    assert forwarding_flows("h1") == [] and forwarding_flows("h2") == []
    assert _ping(dep, "cross-a", "cross-b", 3, 0.2)["received"] == 3   # set up again


def test_first_packet_after_idle_timeout_is_slower_than_steady_state(up):
    """Reactive set-up: once the flows idled out, a lone echo takes a packet-in on
    each switch of the path; a flood rides the installed flows."""
    dep = up("idle_timeout: 1")
    _ping(dep, "cross-a", "cross-b", 3, 0.2)                    # ARP + flows
    lone, lost = [], 0
    for _ in range(5):
        time.sleep(2.5)                                         # > idle_timeout: flows gone
        res = _ping(dep, "cross-a", "cross-b", 1, 0.2)
        lost += 1 - res["received"]
        lone += res["samples_ms"]
    # a lone echo is now and then lost while the path's flows are being set up (seen about
    # once in ten on a quiet machine; not yet explained -- docs/sdn.md says what it is not,
    # bench/bench_lone_echo.py records what could lose it): the claim here is the slowness
    assert lost <= 2 and len(lone) >= 3, (lost, lone)
    flood = _ping(dep, "cross-a", "cross-b", 200, 0.005)
    assert flood["received"] >= 190, flood
    assert statistics.median(lone) > 2 * statistics.median(flood["samples_ms"]), (lone, flood)


@pytest.mark.whole_machine     # a 1,000/s sender and the meter's delivered rate
def test_broadcast_at_1000_per_s_through_the_200_per_s_packet_in_limit(up):
    """Every broadcast frame is a packet-in; the port's meter passes ~200/s (+ burst 32),
    so a 1,000/s stream loses about 80% at the receiver."""
    dep = up("packet_in_rate: 200, packet_in_burst: 32")
    pair = dep.testbed.pair("cross")
    got, _ = broadcast_once(dep, pair, "icmp", 1000, 3)
    delivered_pps = got["received"] / 3
    assert got["achieved_pps"] > 900, got
    assert 140 <= delivered_pps <= 260, got                     # 200/s + 32 burst over 3 s
    assert 70 <= got["loss_pct"] <= 88, got


@pytest.mark.whole_machine     # the controller's packet-in rate (it runs short of CPU beside load)
@pytest.mark.parametrize("global_rate", [333, 0])
def test_broadcast_through_the_global_packet_in_limit(up, global_rate):
    """IVS's overall limit (~333/s per switch) alone, the per-port one off: a 1,000/s
    broadcast reaches a same-host peer at ~333/s; with the global limit off too, at
    well above it (the controller handles ~3,000/s on an idle machine, bench_controller)."""
    dep = up(f"packet_in_rate: 0, packet_in_global_rate: {global_rate}, "
             "packet_in_global_burst: 32")
    pair = dep.testbed.pair("same")
    got, _ = broadcast_once(dep, pair, "icmp", 1000, 3)
    delivered_pps = got["received"] / 3
    assert got["achieved_pps"] > 900, got
    if global_rate:
        assert 250 <= delivered_pps <= 420, got                 # 333/s + 32 burst over 3 s
    else:                      # the control: well above the limit (less under heavy load:
        assert delivered_pps >= 480, got       # the controller itself runs short of CPU)


@pytest.mark.whole_machine     # echoes around a 1 s controller probe
@pytest.mark.parametrize("fail_mode", ["secure", "standalone"])
def test_controller_killed(up, fail_mode):
    """secure: installed flows keep forwarding until their idle timeout, new flows fail;
    standalone: the bridge falls back to MAC learning and new flows work."""
    dep = up(f"fail_mode: {fail_mode}, idle_timeout: 3, inactivity_probe_ms: 1000")
    assert _ping(dep, "cross-a", "cross-b", 3, 0.2)["received"] == 3
    Faults(dep).controller_kill()
    kept = _ping(dep, "cross-a", "cross-b", 10, 0.2)           # < idle: the flows stay alive
    # one echo of an installed flow may die right after the control plane goes (9 of 10 in
    # a clean-clone run, as after a partition: bench/bench_partition.py)
    assert kept["received"] >= 9, kept
    if fail_mode == "secure":
        assert _ping(dep, "same-a", "same-b", 5, 0.2)["received"] == 0   # needs a packet-in
        time.sleep(4.5)                                          # > idle_timeout: flows expire
        assert _ping(dep, "cross-a", "cross-b", 5, 0.2)["received"] == 0
    else:
        time.sleep(4.0)                                          # 3 x inactivity probe: fail-open
        assert _ping(dep, "same-a", "same-b", 5, 0.2)["received"] > 0
    Faults(dep).controller_start()
    assert _ping(dep, "same-a", "same-b", 5, 0.2)["received"] > 0


TWO_VNETS = """
vnets:
  - {name: red, cidr: 198.19.1.0/24}
  - {name: blue, cidr: 198.19.2.0/24}
pairs:
  - {name: red, placement: cross-host, vnet: red}
  - {name: blue, placement: cross-host, vnet: blue}
"""


@pytest.mark.parametrize("isolation", [False, True])
def test_broadcast_crosses_vnets_unless_isolated(up, isolation):
    """Floodlight's VNF lets broadcast through: a red VM's broadcast is captured in a
    blue VM (on the other host too). broadcast_isolation floods within the vnet only."""
    dep = up(f"broadcast_isolation: {str(isolation).lower()}", TWO_VNETS)
    red_to_blue = SimpleNamespace(vms=("red-a", "blue-b"), vnet="red")
    got, _ = broadcast_once(dep, red_to_blue, "icmp", 100, 2)
    red_to_red = SimpleNamespace(vms=("red-a", "red-b"), vnet="red")
    inside, _ = broadcast_once(dep, red_to_red, "icmp", 100, 2)
    assert inside["received"] > 100, inside                    # the vnet itself gets it
    if isolation:
        assert got["received"] == 0, got
    else:
        assert got["received"] > 100, got


def test_deleting_a_vnet_in_the_controller_alone_stops_its_ongoing_traffic(up):
    """The controller's half of deprovisioning, without unplugging a port: the vnet's
    installed flows go and VNF drops its MACs from then on, so a stream that never
    idles out stops; the other vnet keeps going."""
    from vnetbench.functional import measure, verdict
    from vnetbench.kinds.ovs_openflow import netns as openflow
    dep = up("", TWO_VNETS)
    measure.ping_once(dep, "blue-a", dep.ip("blue-b"))
    m = measure.probes_around(dep, "blue-a", "blue-b", lambda: openflow.remove_vnet(dep, "blue"))
    m["new_ping"] = measure.ping_once(dep, "blue-a", dep.ip("blue-b"))
    m["other_vnet_ping"] = measure.ping_once(dep, "red-a", dep.ip("red-b"))
    v = verdict.deprovision(m)
    assert v.status is verdict.Status.PASS and v.value < 1000, v


def test_new_session_after_a_graceful_stop_rides_the_pairs_flows_unless_a_guest_must_arp(up):
    """The fault rows' mechanism (docs/functional.md): with the controller stopped while a
    ping keeps the host-pair flows alive, a new TCP session between the pair uses them
    (v0.90 matches no ports): Pass. A guest that must resolve its peer again meanwhile
    (its neighbour entry gone; or a stale one re-probed 5 s after use) sends ARP that only
    the controller could forward: the same session fails (No route to host). Earlier
    tests' leftovers decided which happened; measure.resolved_pair makes it the first."""
    from vnetbench.functional import measure
    dep = up("")
    a, b = "cross-a", "cross-b"
    f = Faults(dep)

    def new_session(drop_entry):
        measure.resolved_pair(dep, a, b)
        pinger = dep.popen(a, ["ping", "-n", "-i", "0.2", dep.ip(b)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            f.controller_stop()
            if drop_entry:
                dep.exec(b, ["ip", "neigh", "del", dep.ip(a), "dev", "eth0"])
            return measure.receiver_rate(dep, b, a, 2)["mbps"]
        except (ValueError, RuntimeError) as exc:     # iperf3 could not connect
            return str(exc)
        finally:
            pinger.terminate()
            pinger.wait()
            f.controller_start()
    assert isinstance(new_session(False), float)
    assert "No route to host" in new_session(True)
