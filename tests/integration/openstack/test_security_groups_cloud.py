"""Security groups on real Neutron ports (issue 27): the all-in-one cloud runs Neutron's
openvswitch firewall driver, the Heat stack carries the testbed's groups and rules, and
the functional suite's probes (vnetbench-flowgen sg-* in the guests) judge them:
an allowed port passes and another of the same VM does not (its listener is there, so
'blocked' is the firewall's drop, not a refusal), replies pass where a new connection
the other way does not (stateful), a rule added through Neutron's API admits its first
packet, and a removed rule stops an established connection; from the runner, SSH passes
by the run's control group and a port no rule admits is dropped. Two pinned guests on
the shared flat network, one per compute node (each node's one dedicated CPU; def-1 moves
to h2 of the recorded testbed, so every verdict is between two nodes' firewalls): the
full six rows with four guests run on an AIO of shared CPUs
(docs/security-groups.md, 'On a cloud')."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from aio_nodes import kind_of, layout_of
from aio_testbed import up_on_the_aio
from vnetbench.functional import sgmeasure as sg
from vnetbench.functional import verdict
from vnetbench.functional.verdict import Status

VNETBENCH = str(Path(sys.executable).parent / "vnetbench")
CLOUD, NETWORK = "vnetbench-aio", "vnetbench-flat"
# also the testbed of the recorded firewall flows (tests/data/ovs-firewall/README.md)
TESTBED = (Path(__file__).resolve().parents[2] / "data" / "ovs-firewall" / "testbed.yaml").read_text()
OPEN, CLOSED = 5201, 5202
KNOCK_PORTS = (5301, 5302, 5303)        # the row takes 20; three show the path here


@pytest.fixture(scope="module")
def secured(aio_cloud, tmp_path_factory):
    """The testbed up as admin on the flat network the runner reaches (a pinned flavor;
    SSH on the test NIC, admitted by the run's control group), attached in this process;
    torn down after."""
    text = TESTBED.replace("vswitch: ovs", f"vswitch: {kind_of(aio_cloud)}")
    if layout_of(aio_cloud).computes >= 2:      # one dedicated CPU per node: one guest each
        moved = text.replace("{name: def-1, host: h1}", "{name: def-1, host: h2}")
        assert moved != text
        text = moved
    with up_on_the_aio(aio_cloud, tmp_path_factory.mktemp("sg-cloud"), text,
                            "--existing-network", NETWORK) as (dep, st):
        servers = [sg.serve(dep, vm, (OPEN, CLOSED, *KNOCK_PORTS)) for vm in ("web-1", "def-1")]
        yield dep, st
        for p in servers:
            p.kill()
            p.wait()


def test_the_stack_carries_the_groups_onto_real_ports(secured, conn):
    dep, st = secured
    rid = dep.run_id
    groups = {g.name: g for g in conn.network.security_groups() if g.name.startswith(f"vnb-{rid}-")}
    named = {f"vnb-{rid}-sg-{n}" for n in ("default", "web", "knock")} | {f"vnb-{rid}-control"}
    assert set(groups) == named
    web_rules = {(r["direction"], r["protocol"], r["port_range_min"])
                 for r in groups[f"vnb-{rid}-sg-web"].security_group_rules if r["ethertype"] == "IPv4"}
    assert web_rules == {("ingress", "tcp", 5201), ("egress", None, None)}
    web = conn.network.get_port(dep.run.meta()["ports"]["web-1"])
    assert web.is_port_security_enabled
    assert set(web.security_group_ids) == {groups[n].id for n in
                                           (f"vnb-{rid}-sg-web", f"vnb-{rid}-sg-knock", f"vnb-{rid}-control")}
    assert "testbed's security groups" in dep.run.meta()["security_groups"]


def _dropped(address: str, port: int, timeout_s: float = 2.0) -> bool:
    """From the runner to a port with a listener and no rule: dropped (no answer) by the
    firewall; an answer of any kind is not."""
    import socket
    try:
        socket.create_connection((address, port), timeout=timeout_s).close()
        return False
    except (socket.timeout, TimeoutError):
        return True
    except OSError:
        return False


def test_the_runner_reaches_ssh_and_nothing_else_no_rule_admits(secured):
    dep, _ = secured
    assert dep.exec("web-1", ["true"]).returncode == 0          # SSH, by the control group
    assert sg.tcp_open(dep, "def-1", dep.ip("web-1"), OPEN)      # the listener is there
    assert _dropped(dep.ip("web-1"), CLOSED) and _dropped(dep.ip("def-1"), OPEN)


def _probe(dep, what, src, dst, port):
    return {"what": f"{src}->{dst} tcp/{port} ({what})", "open": sg.tcp_open(dep, src, dep.ip(dst), port)}


def test_rules_admit_what_they_say_and_replies_by_state(secured):
    dep, _ = secured
    m = {"allowed": [_probe(dep, "allowed port", "def-1", "web-1", OPEN)],
         "denied": [_probe(dep, "no rule", "def-1", "web-1", CLOSED),
                    _probe(dep, "not a member of default", "web-1", "def-1", OPEN)]}
    v = verdict.sg_admits(m)
    assert v.status is Status.PASS, (v, m)


def test_a_rule_added_through_neutron_admits_its_first_packet(secured):
    dep, _ = secured
    latencies = sg.rule_to_first_packet(dep, "def-1", "web-1", "knock", KNOCK_PORTS, 0.005, 15.0)
    v = verdict.sg_rule_latency({"latencies_ms": latencies, "knock_ms": 5, "timeout_s": 15.0})
    print(f"rule to first packet on the cloud: {v.detail}")
    assert v.status is Status.PASS, v
    # put back: the knock ports close again once the agent has the change (seconds here)
    deadline = time.monotonic() + 15
    while sg.tcp_open(dep, "def-1", dep.ip("web-1"), KNOCK_PORTS[0], timeout=0.3):
        assert time.monotonic() < deadline, "the rules put back never closed the knock port"


def test_a_removed_rule_stops_an_established_connection(secured):
    dep, _ = secured
    m = sg.rule_removal(dep, "def-1", "web-1", "web", OPEN, 0.01, 4.0, 1.0)
    print(f"removal: {m['before']} echoes before, the last {m['stopped_ms']:.0f} ms after the request")
    assert m["before"] and not m["after"], m
