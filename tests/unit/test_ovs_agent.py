"""The ovs kind's agent without a system: the canary it looks for, what it replays and
when, and the provisioning the builder hands it (pure argv)."""

import subprocess
from pathlib import Path
from types import SimpleNamespace

from vnetbench.kinds.ovs import agent as ovs_agent
from vnetbench.testbed.loader import loads
from vnetbench.kinds.ovs import netns as ovs
from vnetbench.testbed.netns.names import Names

DUMP = ("OFPST_FLOW reply (OF1.3) (xid=0x2):\n"
        " cookie=0x0, duration=3.1s, table=23, n_packets=0, n_bytes=0, priority=0 actions=drop\n")


def test_canary_is_neutrons_table_23_drop_flow():
    assert ovs_agent.canary_flow() == "table=23,priority=0,actions=drop"
    assert ovs_agent.canary_present(DUMP)
    assert not ovs_agent.canary_present("OFPST_FLOW reply (OF1.3) (xid=0x2):\n")


def _fake_ofctl(monkeypatch, dump_rc=0, dump=DUMP, fail=()):
    calls = []

    def run(args, timeout=5.0):
        calls.append(args)
        rc = dump_rc if args[0] == "dump-flows" else (1 if args[0] in fail else 0)
        return subprocess.CompletedProcess(args, rc, dump if args[0] == "dump-flows" else "", "")
    monkeypatch.setattr(ovs_agent, "_ofctl", run)
    return calls


CMDS = [["del-meters", "unix:/x"], ["add-meter", "unix:/x", "meter=1"],
        ["add-flow", "unix:/x", "table=23,priority=0,actions=drop"]]


def test_poll_replays_only_when_the_canary_is_gone(monkeypatch):
    calls = _fake_ofctl(monkeypatch)
    assert ovs_agent.poll("unix:/x", CMDS) == "ok" and len(calls) == 1
    calls = _fake_ofctl(monkeypatch, dump="")
    assert ovs_agent.poll("unix:/x", CMDS) == "restarted" and calls[1:] == CMDS


def test_poll_retries_while_vswitchd_is_down_or_a_replay_fails(monkeypatch):
    calls = _fake_ofctl(monkeypatch, dump_rc=1)
    assert ovs_agent.poll("unix:/x", CMDS) == "dead" and len(calls) == 1
    calls = _fake_ofctl(monkeypatch, dump="", fail=("add-meter",))
    assert ovs_agent.poll("unix:/x", CMDS) == "dead" and calls[-1][0] == "add-meter"


def _host(text, tmp=Path("/run/x")):
    tb = loads(text, source="<ovs>", online_cpus=[0, 1])
    names = Names("abc123")
    vm_i = {vm.name: i for i, vm in enumerate(tb.vms)}
    ctx = SimpleNamespace(testbed=tb, names=names, run=SimpleNamespace(run_id="abc123", dir=tmp),
                          qos_ports=lambda h: [(names.vm_port(vm_i[vm.name], n), nic.qos)
                                               for vm in tb.vms_on(h)
                                               for n, nic in enumerate(vm.nics) if nic.qos])
    return ovs.OvsHost(ctx, tb.hosts[0]), names


def test_egress_provisioning_starts_clean_and_ends_with_the_canary():
    host, names = _host("vswitch: ovs\nnetwork: {type: vxlan}\nvnets: [{name: red}]\nvms:\n"
                        "  - {name: a, host: h1, vnets: [{name: red, qos: {max_kbps: 10000, "
                        "direction: egress}}]}\n  - {name: b, host: h1, vnets: "
                        "[{name: red, qos: {max_kbps: 5000}}]}\n")
    sock = f"unix:/run/x/h1/{names.ovs_int}.mgmt"
    assert host.egress_commands() == [
        ["del-meters", sock],
        ["add-meter", sock, "meter=1,kbps,burst,band=type=drop,rate=10000,burst_size=8000"],
        ["add-flow", sock, f"priority=100,in_port={names.vm_port(0, 0)},actions=meter:1,NORMAL"],
        ["add-flow", sock, "table=23,priority=0,actions=drop"]]


def test_no_egress_limit_no_commands_no_agent():
    host, _ = _host("vswitch: ovs\nnetwork: {type: vxlan}\nvnets: [{name: red}]\nvms:\n"
                    "  - {name: a, host: h1, vnets: [{name: red, qos: {max_kbps: 5000}}]}\n")
    assert host.egress_commands() == []
