"""vnetbench.monitor without root or processes: the Prometheus config, the result
exposition pushed to the Pushgateway, the collector command line of a testbed host,
the CLI parsers and the namespace HTTP client's failure path."""

import argparse
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vnetbench.monitor import commands, nshttp, publish, server, watch
from vnetbench.results.record import Result
from vnetbench.results.stats import summarize
from vnetbench_collector.__main__ import parser as collector_parser

PROMTOOL = Path("/usr/bin/promtool")


# ---------------------------------------------------------------- server.config

def test_config_scrapes_every_second_from_file_sd_and_pushgateway(tmp_path):
    cfg = server.config(tmp_path / "targets")
    assert cfg["global"]["scrape_interval"] == "1s"
    assert cfg["global"]["scrape_timeout"] == "1s"          # may not exceed the interval
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"vnetbench-collector", "vnetbench-results"}
    sd = jobs["vnetbench-collector"]["file_sd_configs"]
    assert sd == [{"files": [str(tmp_path / "targets" / "*.json")], "refresh_interval": "1s"}]
    results = jobs["vnetbench-results"]
    assert results["honor_labels"] is True
    assert results["static_configs"] == [{"targets": [f"127.0.0.1:{server.PUSHGATEWAY_PORT}"]}]
    assert not jobs["vnetbench-collector"].get("honor_labels")   # run_id comes from discovery


def test_config_passes_promtool(tmp_path):
    targets = tmp_path / "targets"
    targets.mkdir()
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(server.config(targets), sort_keys=False))
    done = subprocess.run([str(PROMTOOL), "check", "config", str(path)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- publish

BASE_LABELS = {"test": "tcp_stream", "run_id": "a1b2c3", "testbed": "ovs-vxlan", "vswitch": "ovs",
               "network": "vxlan", "placement": "cross-host", "pair": "p2"}


def record(samples=None, point="mss=1410", params=None, **more) -> Result:
    labels = {**BASE_LABELS, "params": {**(params or {}), **more}}
    if point is not None:
        labels["point"] = point
    return Result(test="tcp_stream", labels=labels,
                  samples={"gbps": [1.0, 1.2, 1.1], "cpu_pct": [80.0, 90.0, 85.0]}
                  if samples is None else samples, started=1700000000.5, finished=1700000030.25)


def samples_of(fams) -> dict:
    """{(sample name, frozenset(labels)): value}."""
    return {(s.name, frozenset(s.labels.items())): s.value for f in fams for s in f.samples}


def test_result_labels_keep_configuration_point_and_scalar_params():
    r = record(mode="flood", payload=1410, rate=0.5, flush_flows=True, retry=False,
               reason="kernel lacks the geneve module", long="x" * 41, just40="y" * 40,
               nested={"a": 1}, listed=[1, 2], missing=None, **{"frame-size": 64})
    labels = publish.result_labels(r)
    assert labels == {**BASE_LABELS, "point": "mss=1410", "mode": "flood", "payload": "1410",
                      "rate": "0.5", "flush_flows": "true", "retry": "false", "just40": "y" * 40}
    assert all(isinstance(v, str) for v in labels.values())


def test_result_labels_reserved_names_are_not_overridden_by_params():
    r = record(params={"metric": "gbps", "run_id": "other", "pair": "p9", "family": "x",
                       "job": "j", "instance": "i", "vswitch": "linuxbridge", "test": "other",
                       "point": "other"})
    labels = publish.result_labels(r)
    assert labels == {**BASE_LABELS, "point": "mss=1410"}
    # reserved even when the record lacks them (an N/A record has no run_id/pair)
    na = Result(test="t", labels={"test": "t", "params": {"run_id": "x", "pair": "y", "job": "z",
                                                          "metric": "m", "family": "f"}},
                samples={})
    assert publish.result_labels(na) == {"test": "t"}


def test_result_labels_skip_empty_configuration_labels():
    r = Result(test="t", labels={"test": "t", "vswitch": "ovs", "network": "", "pair": None,
                                 "point": ""}, samples={})
    assert publish.result_labels(r) == {"test": "t", "vswitch": "ovs"}


def test_families_one_result_and_ci_per_metric_with_timestamps():
    r = record(mode="flood")
    labels = publish.result_labels(r)
    fams = publish.families([r], None)
    assert [f.name for f in fams] == ["vnetbench_result", "vnetbench_result_ci95",
                                      "vnetbench_result_start_timestamp_seconds",
                                      "vnetbench_result_end_timestamp_seconds"]
    assert all(f.type == "gauge" for f in fams)
    got = samples_of(fams)
    want = {}
    for metric, values in r.samples.items():
        s = summarize(values)
        want[("vnetbench_result", frozenset({**labels, "metric": metric}.items()))] = s["mean"]
        want[("vnetbench_result_ci95", frozenset({**labels, "metric": metric}.items()))] = s["ci95"]
    want[("vnetbench_result_start_timestamp_seconds", frozenset(labels.items()))] = 1700000000.5
    want[("vnetbench_result_end_timestamp_seconds", frozenset(labels.items()))] = 1700000030.25
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v)
    assert got[("vnetbench_result", frozenset({**labels, "metric": "gbps"}.items()))] == \
        pytest.approx(1.1)


def test_a_scale_steps_cpu_per_host_is_a_result_series_per_host():
    """The scale dashboard's per-host CPU panel reads vnetbench_result{metric=
    "host_dataplane_pct", host=...}: one series per host of the record's ``per_host``."""
    import dataclasses
    r = dataclasses.replace(record(step="0004"),
                            extra={"per_host": {"host_dataplane_pct": {"h1": 96.0, "h2": 88.5, "h3": None}}})
    labels = publish.result_labels(r)
    got = samples_of(publish.families([r], None))
    assert labels["step"] == "0004"
    for host, value in (("h1", 96.0), ("h2", 88.5)):
        key = ("vnetbench_result", frozenset({**labels, "metric": "host_dataplane_pct", "host": host}.items()))
        assert got[key] == value
    assert not any(dict(k[1]).get("host") == "h3" for k in got)


def test_families_running_flag():
    running = {"labels": {"testbed": "ovs-vxlan", "vswitch": "ovs", "network": "vxlan",
                          "placement": "cross-host", "test": "tcp_stream"}, "value": 1}
    fams = publish.families([], running)
    assert [f.name for f in fams] == ["vnetbench_test_running"]
    assert [(s.labels, s.value) for s in fams[0].samples] == [(running["labels"], 1)]
    ended = publish.families([record()], {**running, "value": 0})
    flag = [f for f in ended if f.name == "vnetbench_test_running"]
    assert [s.value for s in flag[0].samples] == [0]
    assert publish.families([], None) == []


def test_two_windows_of_one_family_on_one_pair_push_to_two_groups(monkeypatch):
    """ICMP RTT deferred, then flood, on one borrowed testbed: each window keeps its own
    Pushgateway group (a group per family replaced the first's results with the second's)."""
    pushes = []
    monkeypatch.setattr(publish, "push", lambda mon, group, fams: pushes.append(dict(group)))
    tb = SimpleNamespace(name="t", vswitch=SimpleNamespace(kind=SimpleNamespace(value="ovs")),
                         network=SimpleNamespace(type=SimpleNamespace(value="vxlan")))
    dep, pair = SimpleNamespace(testbed=tb, run_id="r1"), SimpleNamespace(name="p", placement="same-host")
    for mode in ("deferred", "flood"):
        with publish.window(object(), dep, "icmp_rtt", pair) as results:
            results.append(record(mode=mode))
            time.sleep(0.002)
    assert len(pushes) == 4 and pushes[0] == pushes[1] and pushes[2] == pushes[3]
    assert pushes[0] != pushes[2] and {k for g in pushes for k in g} == set(publish.GROUP)


def test_families_not_applicable_record_yields_only_timestamps():
    # as rally_plugins.scenarios._not_applicable records it: no samples, no run_id/pair
    na = Result(test="tcp_stream", labels={"test": "tcp_stream", "vswitch": "ovs",
                                           "network": "geneve", "placement": "-"},
                samples={}, started=1700000100.0, finished=1700000100.5,
                extra={"not_applicable": "kernel lacks geneve"})
    fams = publish.families([na], None)
    assert [f.name for f in fams] == ["vnetbench_result_start_timestamp_seconds",
                                      "vnetbench_result_end_timestamp_seconds"]
    labels = {"test": "tcp_stream", "vswitch": "ovs", "network": "geneve", "placement": "-"}
    assert samples_of(fams) == {
        ("vnetbench_result_start_timestamp_seconds", frozenset(labels.items())): 1700000100.0,
        ("vnetbench_result_end_timestamp_seconds", frozenset(labels.items())): 1700000100.5}


def test_families_skip_metric_without_values():
    r = record(samples={"gbps": [1.0, 2.0], "loss_pct": [None, None]})
    metrics = {s.labels["metric"] for f in publish.families([r], None) for s in f.samples
               if "metric" in s.labels}
    assert metrics == {"gbps"}


def test_exposition_parses_back_to_the_same_values():
    results = [record(mode="flood", payload=1410), record(point="mss=8950", mode="flood"),
               Result(test="tcp_stream", labels={"test": "tcp_stream", "vswitch": "ovs"},
                      samples={}, started=1.0, finished=2.0)]
    running = {"labels": {"testbed": "ovs-vxlan", "test": "tcp_stream"}, "value": 0}
    fams = publish.families(results, running)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(publish._Static(fams))
    text = generate_latest(registry).decode()
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(parsed) == {f.name for f in fams}
    assert all(f.type == "gauge" for f in parsed.values())
    back = samples_of(parsed.values())
    want = samples_of(fams)
    assert back.keys() == want.keys()
    for k, v in want.items():
        assert back[k] == pytest.approx(v, rel=1e-12)


# ---------------------------------------------------------------- watch.collector_argv

def fake_dep(tmp_path, kind, pids, guests=()):
    return SimpleNamespace(run=SimpleNamespace(dir=tmp_path / "run"),
                           testbed=SimpleNamespace(vswitch=SimpleNamespace(kind=SimpleNamespace(value=kind))),
                           vswitch_pids=lambda host: dict(pids),
                           host_file=lambda host, name: tmp_path / "run" / host / name,
                           vm_pidfiles=lambda host: [Path(f"/run/libvirt/qemu/{g}.pid") for g in guests])


def parse_collector(argv):
    assert argv[1:3] == ["-m", "vnetbench_collector"]
    return collector_parser().parse_args(argv[3:])


def test_collector_argv_ovs_host(tmp_path):
    dep = fake_dep(tmp_path, "ovs", {"ovs-vswitchd": 101, "ovsdb-server": 100})
    host = SimpleNamespace(name="h1", cpus=(0, 2))
    port_file = tmp_path / "run" / "collector-h1.port"
    argv = watch.collector_argv(dep, host, port_file)
    hdir = tmp_path / "run" / "h1"
    assert f"--pidfile={hdir}/ovs-vswitchd.pid" in argv
    assert f"--pidfile={hdir}/ovsdb-server.pid" in argv
    assert argv[argv.index("--ovs-target") + 1] == str(hdir / "ovs-vswitchd.ctl")
    assert argv[argv.index("--cpus") + 1] == "0,2"
    assert "--no-processes" not in argv and "--no-datapath" not in argv
    args = parse_collector(argv)
    assert (args.host, args.vswitch, args.listen) == ("h1", "ovs", ("127.0.0.1", 0))
    assert args.port_file == port_file
    assert sorted(args.pidfile) == [hdir / "ovs-vswitchd.pid", hdir / "ovsdb-server.pid"]
    assert args.ovs_target == str(hdir / "ovs-vswitchd.ctl")
    assert args.cpus == frozenset({0, 2})
    assert args.no_qemu and not args.no_processes and not args.no_datapath


def test_collector_argv_linux_bridge_host(tmp_path):
    dep = fake_dep(tmp_path, "linuxbridge", {})
    host = SimpleNamespace(name="h2", cpus=(1,))
    port_file = tmp_path / "run" / "collector-h2.port"
    argv = watch.collector_argv(dep, host, port_file)
    assert not any(a.startswith("--pidfile") for a in argv) and "--ovs-target" not in argv
    args = parse_collector(argv)
    assert (args.host, args.vswitch, args.port_file) == ("h2", "linuxbridge", port_file)
    assert args.no_processes and args.no_datapath and args.no_qemu
    assert args.pidfile == [] and args.ovs_target is None
    assert args.cpus == frozenset({1})


def test_collector_argv_exports_the_hosts_guests_by_pidfile(tmp_path):
    """libvirt guests: their QEMU processes by pidfile (never by name: other users' VMs)."""
    for kind, pids in (("linuxbridge", {}), ("ovs", {"ovs-vswitchd": 101})):
        dep = fake_dep(tmp_path, kind, pids, guests=["vnb-abc123-same-a", "vnb-abc123-same-b"])
        args = parse_collector(watch.collector_argv(dep, SimpleNamespace(name="h1", cpus=(0,)),
                                                    tmp_path / "p"))
        assert {Path("/run/libvirt/qemu/vnb-abc123-same-a.pid"),
                Path("/run/libvirt/qemu/vnb-abc123-same-b.pid")} <= set(args.pidfile)
        assert args.no_qemu


# ---------------------------------------------------------------- commands

@pytest.fixture
def monitor_parser():
    p = argparse.ArgumentParser(prog="vnetbench")
    commands.add_parsers(p.add_subparsers(required=True))
    return p


class _CountingPrometheus:
    """A monitor whose Prometheus scrapes one more target per query, and records them."""

    def __init__(self, scraped=0, step=1):
        self.scraped, self.step, self.queries, self.id = scraped, step, [], "m1"

    def query(self, expr, at=None):
        self.queries.append(expr)
        self.scraped += self.step
        return [{"value": [0, str(self.scraped)]}] if self.scraped else []


def test_wait_scraped_until_every_target_of_the_run_has_a_fresh_scrape():
    mon = _CountingPrometheus()
    watch.wait_scraped(mon, "ab12cd", 3, after=1700000000.5, timeout=5)
    assert len(mon.queries) == 3
    assert mon.queries[0] == ('count(timestamp(up{run_id="ab12cd"}) >= 1700000000.500 '
                              'and on(instance) up{run_id="ab12cd"} == 1)')


def test_wait_scraped_names_the_run_and_the_count_when_prometheus_never_scrapes():
    mon = _CountingPrometheus(scraped=1, step=0)
    with pytest.raises(watch.BuildError, match=r"run ab12cd: Prometheus scraped 1 of its 2 "
                                               r"collectors within 0 s \(monitor m1"):
        watch.wait_scraped(mon, "ab12cd", 2, after=0, timeout=0.3)


def test_monitor_up_parses(monitor_parser):
    args = monitor_parser.parse_args(["monitor", "up", "--data", "X"])
    assert (args.monitor_cmd, args.data, args.func) == ("up", "X", commands.cmd_up)
    assert monitor_parser.parse_args(["monitor", "up"]).data is None


def test_monitor_query_parses(monitor_parser):
    args = monitor_parser.parse_args(["monitor", "query", 'vnetbench_result{metric="gbps"}',
                                      "--run", "ID", "--json"])
    assert (args.expr, args.run, args.json, args.func) == \
        ('vnetbench_result{metric="gbps"}', "ID", True, commands.cmd_query)
    plain = monitor_parser.parse_args(["monitor", "query", "up"])
    assert (plain.run, plain.json) == (None, False)


def test_monitor_down_and_status_parse(monitor_parser):
    args = monitor_parser.parse_args(["monitor", "down", "--run", "ID"])
    assert (args.run, args.func) == ("ID", commands.cmd_down)
    assert monitor_parser.parse_args(["monitor", "status"]).func is commands.cmd_status


def test_monitor_needs_a_subcommand(monitor_parser, capsys):
    with pytest.raises(SystemExit) as e:
        monitor_parser.parse_args(["monitor"])
    assert e.value.code == 2


# ---------------------------------------------------------------- nshttp

def missing_ns() -> str:
    name = f"vnb-test-missing-{uuid.uuid4().hex[:8]}"
    assert not (nshttp.NETNS_DIR / name).exists()
    return name


def test_connect_to_missing_namespace_raises_and_leaves_no_thread():
    ns = missing_ns()
    before = set(threading.enumerate())
    with pytest.raises(FileNotFoundError):
        nshttp.connect(ns, "127.0.0.1", 9, timeout=1)
    assert set(threading.enumerate()) == before
    assert not any(t.name == f"netns-{ns}" for t in threading.enumerate())


def test_request_to_missing_namespace_raises_oserror():
    with pytest.raises(OSError):
        nshttp.request(missing_ns(), 9090, "GET", "/-/ready", timeout=1)


def test_connect_to_missing_namespace_leaks_no_fd():
    def fds():
        return set(os.listdir("/proc/self/fd"))
    before = fds()
    for _ in range(5):
        with pytest.raises(FileNotFoundError):
            nshttp.connect(missing_ns(), "127.0.0.1", 9, timeout=1)
    assert fds() <= before


def test_one_repetition_has_no_ci_sample_and_odd_params_are_not_labels():
    r = Result(test="t", labels={"test": "t", "params": {"__name__": "x", "__meta": "y", "empty": "",
                                                         "ok": 5}},
               samples={"gbps": [1.0]})
    assert publish.result_labels(r) == {"test": "t", "ok": "5"}
    names = {s.name for f in publish.families([r], None) for s in f.samples}
    assert "vnetbench_result" in names and "vnetbench_result_ci95" not in names
