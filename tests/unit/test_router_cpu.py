"""The router's CPU (docs/metrics.md#the-routers-cpu): the sampler's program and its
recorded output, the window arithmetic on fake snapshots and readings, which testbeds
carry the figure and which say why not."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from vnetbench import cpu
from vnetbench.testbed import loader
from vnetbench.testbed.netns import cpuprobe
from vnetbench_collector import attribution as attr
from vnetbench_collector import probe, reading

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "cpu"


def test_recorded_sampler_output_counts_every_sample_and_those_in_ip_forward():
    """tests/data/cpu/bpftrace-router.jsonl: the probe's program with the sampler at 997 Hz
    and 200 ms intervals, recorded while iperf3 sent TCP through a namespace router."""
    deltas = list(probe.parse((DATA / "bpftrace-router.jsonl").read_text().splitlines()))
    assert len(deltas) == 2
    for d in deltas:
        assert set(d.samples) == {0, 1}
        for total, router in d.samples.values():
            assert 0.8 * 997 * 0.2 < total < 1.2 * 997 * 0.2      # one sample per ms per CPU
            assert 0 <= router < total
        assert d.softirq                                           # the probe itself still runs
    assert sum(r for d in deltas for _, r in d.samples.values()) == 3


def test_is_router_matches_whole_function_names_only():
    stack = "\n    pskb_expand_head+123\n    ip_forward+456\n    process_backlog+7\n"
    assert probe.is_router(stack)
    assert probe.is_router("\n    nf_hook_slow+1\n    ip6_forward+2\n")
    assert not probe.is_router("\n    ip_forward_options+1\n    ip_rcv+2\n")   # not the forwarding
    assert not probe.is_router("\n    tcp_v4_rcv+1\n    ip_local_deliver+2\n")


def test_program_holds_the_sampler_only_when_asked():
    on, off = probe.program(100, 997), probe.program(100)
    assert "profile:hz:997" in on and "print(@k0)" in on and "clear(@k1)" in on
    assert "profile" not in off and "@k0" not in off and "PRINT" not in off
    assert not re.search(r"\b(PROFILE|PRINT[01]|CLEAR|HZ)\b", on)
    argv = probe.bpftrace_argv("/run/x/cpuprobe.json", 100, profile_hz=997)
    assert "profile:hz:997" in argv[-2] and argv[-1] == "/run/x/cpuprobe.json"


def test_snapshot_carries_the_samples_and_reads_old_files_as_not_sampling():
    acc = probe.Accumulator(start_ns=0, interval_ns=100, profile_hz=997)
    acc.add(probe.Delta(100, samples={0: (100, 4), 1: (99, 0)}))
    acc.add(probe.Delta(200, samples={0: (100, 6)}))
    doc = json.loads(json.dumps(acc.snapshot()))
    snap = probe.Snapshot.from_dict(doc)
    assert snap.profile_hz == 997
    assert snap.samples_cpu == {0: 200, 1: 99} and snap.router_samples_cpu == {0: 10, 1: 0}
    for key in ("profile_hz", "samples_cpu", "router_samples_cpu"):
        del doc[key]
    old = probe.Snapshot.from_dict(doc)
    assert old.profile_hz == 0 and old.samples_cpu == {}


def snap(t_ns, total, router, hz=997):
    return probe.Snapshot(seq=1, t_ns=t_ns, start_ns=0, interval_ns=100_000_000, softirq={},
                          hardirq={}, softirq_cpu={}, hardirq_cpu={}, profile_hz=hz,
                          samples_cpu=total, router_samples_cpu=router)


def test_samples_are_interpolated_on_the_scopes_cpus():
    lo = snap(0, {0: 100, 1: 100, 2: 50}, {0: 10, 1: 0, 2: 50})
    hi = snap(100, {0: 200, 1: 200, 2: 100}, {0: 30, 1: 0, 2: 100})
    s = reading.samples_at(0.25, frozenset({0, 1}), lo, hi)          # CPU 2 is not the scope's
    assert (s.hz, s.total, s.router) == (997, 250.0, 15.0)
    assert s.err == pytest.approx(15.0)                              # 0.75 x the 20 between
    assert reading.samples_at(0.5, frozenset({0}), snap(0, {}, {}, hz=0), snap(1, {}, {}, hz=0)) is None


def test_router_seconds_are_samples_over_the_rate_with_a_binomial_2_sigma():
    """1 s on 2 CPUs at 1 kHz: 2,000 periods, 200 samples in forwarding: 0.2 CPU s."""
    r = attr.router_cpu(attr.Samples(1000, 0, 0), attr.Samples(1000, 2000, 200, err=1.0), 1.0, 2)
    assert r.seconds == pytest.approx(0.2) and r.resolution_s == pytest.approx(0.001)
    assert r.err_s == pytest.approx((2 * (2000 * 0.1 * 0.9) ** 0.5 + 1.0) / 1000)
    assert (r.samples, r.router_samples, r.expected) == (2000, 200, 2000)
    nothing = attr.router_cpu(attr.Samples(1000, 0, 0), attr.Samples(1000, 2000, 0), 1.0, 2)
    assert nothing.seconds == 0 and nothing.err_s == 0            # 0 of n: no spread, not N/A
    assert attr.router_cpu(None, attr.Samples(1000, 1, 1), 1.0, 2) is None
    assert attr.router_cpu(attr.Samples(997, 0, 0), attr.Samples(1000, 1, 1), 1.0, 2) is None
    assert attr.router_cpu(attr.Samples(1000, 0, 0), attr.Samples(1000, 1, 1), 1.0, 0) is None


def test_an_idle_cpus_missing_samples_do_not_inflate_the_router():
    """One CPU idle, so not sampled (measured: 79 of 2,991 periods in 3 s): 1,050 samples
    of 2,000 periods; the 100 in forwarding are 0.1 s, not 100/1,050 of 2 CPU seconds."""
    r = attr.router_cpu(attr.Samples(1000, 0, 0), attr.Samples(1000, 1050, 100), 1.0, 2)
    assert r.seconds == pytest.approx(0.1) and r.expected == 2000 and r.samples == 1050
    assert r.err_s == pytest.approx(2 * (2000 * 0.05 * 0.95) ** 0.5 / 1000)


def reading_at(t, sirq, samples):
    th = {(1, 1, 1, 1): attr.ThreadTime("ovs-vswitchd", "main", t, 0.0)}
    return attr.Reading(t=t, method="bpf", irq_in_task=True, threads=th, ncpus=2, softirq_s=sirq,
                        samples=samples)


def test_the_router_is_inside_the_softirq_parts_never_added_to_the_headline():
    a = reading_at(10.0, 1.0, attr.Samples(1000, 0, 0))
    b = reading_at(12.0, 1.5, attr.Samples(1000, 4000, 100))      # 2 s x 2 CPUs x 1 kHz
    s = attr.split(a, b)
    pct = s.percent()
    assert pct["router"] == pytest.approx(5.0)                      # 0.1 s of 2 s
    assert pct["dataplane"] == pytest.approx(100.0 * (2.0 + 0.5) / 2.0)   # no router term
    m = cpu.metrics(s)
    assert m["cpu_router_pct"] == pytest.approx(5.0) and m["cpu_router_pct_err"] > 0
    assert m["cpu_router_pct"] <= m["cpu_softirq_other_pct"] + m["cpu_softirq_in_vswitch_pct"]
    d = cpu.describe(s)["router"]
    assert (d["hz"], d["samples"], d["router_samples"]) == (1000, 4000, 100)
    plain = attr.split(reading_at(10.0, 1.0, None), reading_at(12.0, 1.5, None))
    assert plain.router is None and "cpu_router_pct" not in cpu.metrics(plain)
    assert "router" not in cpu.describe(plain)


def load_example(name, **changes):
    text = (ROOT / "examples" / name).read_text()
    for old, new in changes.items():
        text = text.replace(old, new)
    return loader.loads(text, source=name, online_cpus=range(2))


def test_which_testbeds_carry_a_router_figure():
    assert cpu.router_not_applicable(load_example("routed-two-subnets.yaml")) is None
    for kind in ("linuxbridge", "ovs-openflow"):
        assert cpu.router_not_applicable(load_example("routed-two-subnets.yaml",
                                                 **{"vswitch: ovs": f"vswitch: {kind}"})) is None
    assert cpu.router_not_applicable(load_example("seed000-svi.yaml")) is None        # ovs SVI: kernel
    assert cpu.router_not_applicable(load_example("seed000-stick.yaml")) is None
    faucet = cpu.router_not_applicable(load_example("seed000-svi.yaml", **{"vswitch: ovs": "vswitch: faucet"}))
    assert faucet.startswith("faucet routes inside")                               # its own flows
    assert cpu.router_not_applicable(load_example("ovs-vxlan.yaml")) == "no router in the testbed"
    why = cpu.router_not_applicable(load_example("routed-two-subnets.yaml", **{"vswitch: ovs": "vswitch: ovn"}))
    assert "pipeline" in why and "not separable" in why


def test_the_probe_samples_only_for_kernel_routers(monkeypatch):
    dep = lambda name, **c: SimpleNamespace(testbed=load_example(name, **c))
    monkeypatch.delenv(cpuprobe.ROUTER_ENV, raising=False)
    assert cpuprobe.profile_hz(dep("routed-two-subnets.yaml")) == probe.DEFAULT_PROFILE_HZ
    assert cpuprobe.profile_hz(dep("ovs-vxlan.yaml")) == 0
    assert cpuprobe.profile_hz(dep("routed-two-subnets.yaml", **{"vswitch: ovs": "vswitch: ovn"})) == 0
    monkeypatch.setenv(cpuprobe.ROUTER_ENV, "off")
    assert cpuprobe.profile_hz(dep("routed-two-subnets.yaml")) == 0


def test_collector_exports_the_router_seconds_once_the_probe_samples(tmp_path, monkeypatch):
    """vnetbench_router_cpu_seconds_total: the samples in forwarding on the host's CPUs over
    the rate (between scrapes 1 s apart on a fake clock), from 0 at the first scrape; not
    grown while the probe does not sample."""
    import time
    from prometheus_client import CollectorRegistry
    from vnetbench_collector import procfs
    from vnetbench_collector.collector import VSwitchCollector
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "stat").write_text("cpu1 0 0 0 0 0 0 0 0 0 0\n")
    (tmp_path / "proc" / "softirqs").write_text("   CPU0 CPU1\nNET_RX: 1 2\n")
    out = tmp_path / "probe.json"
    snap = lambda seq, t, total, router, hz=1000: probe.write_json(out, {
        "version": 1, "seq": seq, "t_ns": t, "start_ns": 1, "interval_ns": 100_000_000,
        "softirq_cpu": {}, "hardirq_cpu": {}, "softirq": {}, "hardirq": {}, "profile_hz": hz,
        "samples_cpu": {"1": total, "0": 7}, "router_samples_cpu": {"1": router, "0": 7}})
    future = time.monotonic_ns() + 10**12            # no waiting: the snapshot is "after" now
    clock = [future - 1]
    monkeypatch.setattr(reading, "time", SimpleNamespace(monotonic_ns=lambda: clock[0]))
    snap(1, future, 100, 10)
    registry = CollectorRegistry()
    registry.register(VSwitchCollector("h1", "ovs", proc=tmp_path / "proc", names=(), cpus={1},
                                       qemu=False, hz=procfs.clk_tck(), probe_file=out))
    value = lambda: next((s.value for f in registry.collect() if f.name == "vnetbench_router_cpu_seconds"
                          for s in f.samples if s.name.endswith("_total")), None)
    assert value() == 0.0
    clock[0] += 10**9
    snap(2, clock[0] + 1, 1100, 260)                  # CPU 0 is not the host's
    assert value() == pytest.approx(0.25)             # 250 samples at 1 kHz
    clock[0] += 10**9
    snap(3, clock[0] + 1, 2100, 260, hz=0)            # the probe restarted without the sampler
    assert value() == pytest.approx(0.25)
