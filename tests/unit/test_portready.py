"""port_ready (issue 48): each kind's readiness parser on outputs recorded on this
suite's testbeds (tests/data/portready/), the probe's reply time, the per-step
quantiles, and the family's arguments refused by name before anything is built."""

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vnetbench.battery import portready
from vnetbench.errors import VnetbenchError
from vnetbench.testbed import readiness

DATA = Path(__file__).resolve().parents[1] / "data"
PORTS = DATA / "portready"


def _read(name):
    return (PORTS / name).read_text()


def test_ovn_a_port_is_programmed_once_ovn_controller_marks_it_installed():
    # recorded with ovn-controller of h1 stopped (SIGSTOP), then running again
    port, vm = "ppd7be1a-0", "tpd7be1a-0-0"
    assert readiness.ovn_installed(_read("ovn-pending.json"), [port]) == {}
    ready = readiness.ovn_installed(_read("ovn-ready.json"), [port, vm, "bpd7be1a"])
    # ovn-controller's own time (ovn-installed-ts, ms) is the programmed time
    assert ready == {port: 1796615019.596, vm: 1796615018.976}


def test_ovs_a_port_is_bound_with_its_vlan_tag_and_an_openflow_port():
    out = _read("ovs-ready.json")
    assert readiness.ovs_bound(out, ["ppa274b2-0", "upa274b2", "bpa274b2", "nothere"]) == {"ppa274b2-0": None}


def test_linuxbridge_a_port_is_ready_when_forwarding():
    out = _read("linuxbridge-ready.json")
    assert readiness.bridge_forwarding(out, ["pp87d524-0", "missing"]) == {"pp87d524-0": None}
    blocked = out.replace('"ifname":"pp87d524-0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],'
                          '"mtu":1450,"master":"br87d524-0","state":"forwarding"',
                          '"ifname":"pp87d524-0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],'
                          '"mtu":1450,"master":"br87d524-0","state":"learning"')
    assert blocked != out and readiness.bridge_forwarding(blocked, ["pp87d524-0"]) == {}


def test_first_reply_is_pings_first_answered_line():
    assert portready.first_reply((DATA / "ping" / "first_lost.txt").read_text()) == 1795761431.421069
    assert portready.first_reply("PING 198.19.1.4 (198.19.1.4) 56(84) bytes of data.\n") is None


def test_summary_orders_quantiles_and_names_never_ready():
    lines = [{"name": f"p{i}", "host": "h1", "requested_ms": 1.0 + i, "programmed_ms": 5.0 + 2 * i,
              "first_packet_ms": 6.0 + 3 * i} for i in range(40)]
    lines.append({"name": "late", "host": "h2", "requested_ms": 1.0, "programmed_ms": None,
                  "first_packet_ms": None})
    s = portready.summary(lines, deadline_ms=10_000)
    assert s["ports"] == 41 and s["not_ready"] == 1
    for stage in ("requested", "programmed", "first_packet"):
        qs = [s[f"{stage}_{q}_ms"] for q, _ in portready.QUANTILES]
        assert qs == sorted(qs)
    assert s["first_packet_min_ms"] == 6.0 and s["first_packet_max_ms"] == 6.0 + 3 * 39


@pytest.mark.parametrize("args, named", [
    ((0, 2, 8, 1000, 1.0), "ports"), ((-3, 2, 8, 1000, 1.0), "ports"), ((5, 0, 8, 1000, 1.0), "steps"),
    ((5, 2, 0, 1000, 1.0), "concurrency"), ((5, 2, 8, 0.5, 1.0), "deadline_ms"),
    ((5, 2, 8, 1000, 0), "probe_interval_ms"), ((200, 2, 8, 1000, 1.0), "ports x steps")])
def test_bad_arguments_are_named(args, named):
    with pytest.raises(VnetbenchError, match=f"port_ready: {named}"):
        portready.check(*args)


@settings(max_examples=60, deadline=None)
@given(ports=st.integers(-5, 400), steps=st.integers(-2, 6), conc=st.integers(-1, 4),
       deadline=st.floats(allow_nan=True, allow_infinity=True), probe=st.floats(allow_nan=True))
def test_check_refuses_or_accepts_with_one_line(ports, steps, conc, deadline, probe):
    try:
        portready.check(ports, steps, conc, deadline, probe)
    except VnetbenchError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith("port_ready: ")
        return
    assert ports >= 1 and steps >= 1 and conc >= 1 and 0 < probe <= deadline <= 3_600_000
    assert ports * steps <= portready.ADDRESS_SPACE


@settings(max_examples=8, deadline=None)
@given(flag=st.sampled_from([("--ports", st.integers(-10, 0)), ("--steps", st.integers(-3, 0)),
                             ("--concurrency", st.integers(-3, 0)), ("--ports", st.integers(254, 10**6)),
                             ("--deadline-ms", st.floats(0.001, 0.99)), ("--probe-interval-ms",
                                                                          st.floats(-5, 0))]),
       data=st.data())
def test_compare_refuses_bad_port_ready_arguments_before_building(flag, data, tmp_path_factory):
    name, values = flag
    value = data.draw(values)
    out = tmp_path_factory.mktemp("results")
    state = tmp_path_factory.mktemp("state")
    done = subprocess.run([sys.executable, "-m", "vnetbench", "compare", "--test", "port_ready",
                           "--no-monitor", "--results", str(out), f"{name}={value}"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "VNETBENCH_STATE_DIR": str(state),
                               "PYTHONPATH": str(Path(portready.__file__).parents[2])})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "port_ready:" in lines[0]
    assert list(out.iterdir()) == [] and list(state.iterdir()) == []


def test_libvirt_refuses_ports_with_the_reason():
    from types import SimpleNamespace

    from vnetbench.errors import UnsupportedError
    from vnetbench.testbed.libvirt.deployment import LibvirtDeployment
    dep = object.__new__(LibvirtDeployment)
    dep.run = SimpleNamespace(meta=lambda: {"backend": "libvirt"}, run_id="abc123")
    for call in (lambda: dep.add_port("h1", "vnet1"), lambda: dep.remove_port("p0"),
                 lambda: dep.ports_ready("h1", ["p0"])):
        with pytest.raises(UnsupportedError, match="libvirt: no ports without a VM: .*backend: netns"):
            call()


def step_record(existing, chassis=None, **samples):
    """A port_ready step's record as run() writes it (figures given as SAMPLES)."""
    from vnetbench.results.record import Result
    params = {"ports": 10, "existing": existing, **({"chassis": chassis} if chassis else {})}
    return Result(test="port_ready", samples={k: [v] for k, v in samples.items()},
                  labels={"test": "port_ready", "vswitch": "ovn", "network": "geneve",
                          "placement": "cross-host", "pair": "new-ports", "params": params,
                          "point": f"{existing} existing"},
                  extra={"never_ready": [], "existing_ports": existing})


def test_rally_output_draws_each_daemons_memory_against_the_existing_ports():
    from vnetbench.rally_plugins import scenarios_portready as scenario
    steps = [step_record(2, not_ready=0, first_packet_p95_ms=9.0, rss_ovn_controller_mib=30.0,
                         rss_ovn_controller_growth_mib=1.5, rss_ovsdb_server_sb_mib=8.0,
                         rss_controller_mib=38.0, rss_controller_growth_mib=2.0),
             step_record(12, not_ready=0, first_packet_p95_ms=11.0, rss_ovn_controller_mib=31.5,
                         rss_ovn_controller_growth_mib=1.5, rss_ovsdb_server_sb_mib=8.5,
                         rss_controller_mib=40.0, rss_controller_growth_mib=2.0)]
    outs = scenario.outputs(steps)
    mem, = [o["complete"] for o in outs if "memory" in o["complete"]["title"]]
    assert dict(mem["data"]) == {"ovn-controller": [[2, 30.0], [12, 31.5]],
                                 "ovsdb-server-sb": [[2, 8.0], [12, 8.5]]}
    table = outs[0]["additive"]["data"]
    assert ["cross-host 12 existing rss_controller_growth_mib", 2.0] in table


# -- the chassis a step ran against: in the record, its cell, the report and Rally ---------

def ovn_deployment(light: int):
    from vnetbench.testbed.loader import loads
    text = "name: pr\nvswitch: ovn\nnetwork: {type: geneve}\n" + (f"chassis: {{count: {light}}}\n" if light else "")
    tb = loads(text, source="t.yaml", online_cpus=[0, 1])
    from types import SimpleNamespace
    return SimpleNamespace(testbed=tb, run_id="ab12cd", run=SimpleNamespace(meta=dict))


def step_of(dep, existing, monkeypatch):
    monkeypatch.setattr(portready.provenance, "collect", lambda dep, vms: {})
    lines = [{"name": "p0", "host": "ch1", "requested_ms": 3.0, "programmed_ms": 40.0,
              "first_packet_ms": 55.0}]
    args = {"ports": 1, "steps": 1, "concurrency": 1, "deadline_ms": 1000, "probe_interval_ms": 1.0}
    return portready.record(dep, args, existing, lines, {"cpu_controller_pct": 12.0, "rss_controller_mib": 50.0},
                            {"poll_periods": [0.005], "memory": {"unit": "MiB"}, "started": 1.0,
                             "port_hosts": ["ch1"]})


def test_a_step_record_names_the_chassis_it_ran_against(monkeypatch):
    r = step_of(ovn_deployment(8), 4, monkeypatch)
    assert r.labels["params"]["chassis"] == 10 and r.labels["point"] == "4 existing, 10 chassis"
    assert r.extra["chassis"] == 10 and r.extra["light_chassis"] == 8 and r.extra["port_hosts"] == ["ch1"]
    assert r.samples["first_packet_p95_ms"] == [55.0] and r.samples["rss_controller_mib"] == [50.0]
    assert r.extra["memory"] == {"unit": "MiB"}
    plain = step_of(ovn_deployment(0), 4, monkeypatch)
    assert plain.labels["params"]["chassis"] == 2 and plain.extra["light_chassis"] == 0


def test_steps_on_8_and_50_chassis_are_two_history_cells(monkeypatch):
    from vnetbench.history import cells
    a, b = step_of(ovn_deployment(6), 2, monkeypatch), step_of(ovn_deployment(48), 2, monkeypatch)
    assert cells.cell_of(a.test, a.labels) != cells.cell_of(b.test, b.labels)
    again = step_of(ovn_deployment(6), 2, monkeypatch)
    again.labels["run_id"] = "ff00ee"                   # another run of the same configuration
    assert cells.cell_of(a.test, a.labels) == cells.cell_of(again.test, again.labels)


def test_compare_table_and_chart_keep_chassis_counts_apart(monkeypatch):
    from vnetbench.report import charts, text
    from vnetbench.report import table as model
    from vnetbench.results.load import Run
    few, many = step_of(ovn_deployment(6), 2, monkeypatch), step_of(ovn_deployment(48), 2, monkeypatch)
    t = model.build([Run("", None, (few, many))])
    heads = [row.label for row in t.rows if row.metric == "first_packet_p95_ms"]
    assert heads == ["port_ready 2 existing, 8 chassis", "port_ready 2 existing, 50 chassis"]
    assert "2 existing, 50 chassis" in text.plain(t)
    lines = charts._port_ready(t, "first_packet")
    assert sorted(lines["p95"]) == ["ovn/geneve, 50 chassis", "ovn/geneve, 8 chassis"]
    assert lines["p95"]["ovn/geneve, 8 chassis"] == [(2, charts.Point(55.0))]     # once, not per row
    assert [c.id for c in charts.charts(t)] == ["fig-port-ready"]      # drawn with the new names


def test_rally_output_has_a_chassis_column_and_says_it_in_the_titles(monkeypatch):
    from vnetbench.rally_plugins import scenarios_portready as scenario
    outs = scenario.outputs([step_of(ovn_deployment(8), 2, monkeypatch),
                             step_of(ovn_deployment(8), 3, monkeypatch)])
    table = outs[0]["complete"]["data"]
    at = table["cols"].index("chassis")
    assert table["cols"][:at + 1] == ["placement", "path", "point", "chassis"]
    assert [row[at] for row in table["rows"]] == [10, 10]
    assert outs[1]["complete"]["title"] == "Port readiness vs existing ports on 10 chassis"


def test_a_step_record_with_its_chassis_and_memory_loads_against_the_published_schema(monkeypatch):
    import json

    from vnetbench.results import load
    r = step_of(ovn_deployment(8), 4, monkeypatch)
    back = load.record(Path("records.jsonl"), 1, json.dumps(r.to_dict()))
    assert back.labels["params"]["chassis"] == 10 and back.samples["rss_controller_mib"] == [50.0]
    assert back.extra["light_chassis"] == 8 and back.labels["point"] == "4 existing, 10 chassis"
