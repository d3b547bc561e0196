"""Data-plane CPU split: the probe's output parser, the attribution arithmetic on
recorded /proc and probe samples, and the battery's windows on fake /proc trees."""

import json
import threading
import time
from unittest import mock
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as hst

from vnetbench import cpu
from vnetbench_collector import attribution as attr
from vnetbench_collector import probe, procfs, reading

DATA = Path(__file__).resolve().parents[1] / "data" / "cpu"
STAT = "{pid} ({comm}) S 1 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 100 0 0\n"


# ----------------------------------------------------------------- the probe's output

def test_parse_recorded_bpftrace_output():
    deltas = list(probe.parse((DATA / "bpftrace.jsonl").read_text().splitlines()))
    assert len(deltas) >= 20                                # 100 ms intervals over ~3 s
    ts = [d.t_ns for d in deltas]
    # an interval whose timer was skipped (a BPF program was running on that CPU) is folded
    # into the next one: the generation did not flip, nothing is lost
    steps = [(b - a) / 100e6 for a, b in zip(ts, ts[1:])]
    assert all(abs(x - round(x)) < 0.01 and round(x) >= 1 for x in steps)
    assert all(isinstance(c, int) and isinstance(t, int) and ns > 0
               for d in deltas for (c, t), ns in d.softirq.items())
    busy = max(sum(d.softirq.values()) for d in deltas)
    assert busy > 1e6                                       # traffic ran: >1 ms of softirq in 100 ms


def test_accumulator_sums_deltas_and_prunes_exited_tasks():
    acc = probe.Accumulator(start_ns=0, interval_ns=100)
    acc.add(probe.Delta(100, softirq={(0, 0): 5, (0, 7): 10, (1, 8): 1}, hardirq={(1, 8): 2}))
    acc.add(probe.Delta(200, softirq={(0, 7): 10}))
    acc.prune(lambda tid: tid != 8)
    snap = probe.Snapshot.from_dict(json.loads(json.dumps(acc.snapshot())))
    assert (snap.seq, snap.t_ns) == (2, 200)
    assert snap.softirq == {(0, 0): 5, (0, 7): 20}           # tid 8 exited: per task forgotten,
    assert snap.softirq_cpu == {0: 25, 1: 1} and snap.hardirq_cpu == {1: 2}   # per CPU kept
    assert snap.hardirq == {}


def test_program_measures_net_softirq_and_flips_generations():
    text = probe.program(50)
    assert "interval:ms:50" in text and "args->vec == 2 || args->vec == 3" in text
    argv = probe.bpftrace_argv("/run/x/cpuprobe.json", 50)
    assert argv[:3] == ["bpftrace", "-f", "json"] and argv[-1] == "/run/x/cpuprobe.json"


def test_following_waits_for_the_next_snapshot(tmp_path):
    out = tmp_path / "snap.json"
    acc = probe.Accumulator(start_ns=1, interval_ns=50_000_000)
    acc.add(probe.Delta(time.monotonic_ns()))
    probe.write_json(out, acc.snapshot())
    lo = probe.read_snapshot(out)
    t_ns = time.monotonic_ns()

    def later():
        time.sleep(0.05)
        acc.add(probe.Delta(time.monotonic_ns(), softirq={(0, 1): 9}))
        probe.write_json(out, acc.snapshot())
    threading.Thread(target=later).start()
    hi = probe.following(out, lo, t_ns)
    assert hi is not None and lo.t_ns <= t_ns <= hi.t_ns and hi.softirq == {(0, 1): 9}
    restarted = probe.Accumulator(start_ns=2, interval_ns=50_000_000)
    restarted.add(probe.Delta(time.monotonic_ns()))
    probe.write_json(out, restarted.snapshot())
    assert probe.following(out, lo, t_ns, timeout_s=0.1) is None    # counters began again


# ----------------------------------------------------------------- the arithmetic

def reading_at(t, runtime, sirq, hirq=0.0, all_sirq=0.0, own_sirq=None, idle=0.0, method="bpf",
               err=0.0, threads=None):
    threads = threads or {(1, 1, 1, 1): attr.ThreadTime("ovs-vswitchd", "main", runtime, sirq, hirq)}
    return attr.Reading(t=t, method=method, irq_in_task=True, threads=threads, ncpus=2,
                        softirq_s=all_sirq, own_softirq_s=sirq if own_sirq is None else own_sirq,
                        hardirq_s=hirq, own_hardirq_s=hirq, contexts={"idle": idle}, err_s=err,
                        resolution_s=0.1)


def test_softirq_in_a_vswitch_thread_is_taken_out_of_its_runtime_once():
    a = reading_at(10.0, runtime=5.0, sirq=1.0, hirq=0.1, all_sirq=3.0, idle=0.5)
    b = reading_at(11.0, runtime=5.9, sirq=1.3, hirq=0.15, all_sirq=3.6, idle=0.6)
    s = attr.split(a, b)
    assert s.parts["vswitch"] == pytest.approx(0.9 - 0.3 - 0.05)
    assert s.parts["softirq_in_vswitch"] == pytest.approx(0.3)
    assert s.parts["softirq_other"] == pytest.approx(0.6 - 0.3)            # other contexts only
    assert s.components[("softirq_other", "idle", "all")] == pytest.approx(0.1)
    assert s.components[("softirq_other", "task", "all")] == pytest.approx(0.2)
    assert s.parts["hardirq"] == pytest.approx(0.05)
    assert s.dataplane_s == pytest.approx(0.9 + 0.3)     # runtime + softirq elsewhere: no overlap
    assert s.percent()["dataplane"] == pytest.approx(120.0)


def test_controller_daemons_are_their_own_part():
    th = lambda run: {(1, 1, 1, 1): attr.ThreadTime("ovs-vswitchd", "main", run),
                      (2, 1, 2, 1): attr.ThreadTime("osken-manager", "all", run / 2)}
    s = attr.split(reading_at(0.0, 0, 0, threads=th(0.0)), reading_at(2.0, 0, 0, threads=th(1.0)))
    assert s.parts["vswitch"] == pytest.approx(1.0) and s.parts["controller"] == pytest.approx(0.5)
    assert attr.role("ovn-controller") == "controller" and attr.role("ovsdb-server") == "vswitch"


def test_tick_method_is_labelled_inexact_and_irqtime_exact():
    for method, exact in (("tick", False), ("irqtime", True)):
        a = attr.Reading(t=0.0, method=method, irq_in_task=method == "tick", threads={}, ncpus=1)
        assert attr.split(a, attr.Reading(t=1.0, method=method, irq_in_task=method == "tick",
                                          threads={}, ncpus=1)).exact is exact


def test_readings_of_different_methods_fall_back_to_proc_stat():
    stat_a = reading_at(0.0, 1.0, 0, method="tick", all_sirq=1.0, own_sirq=0)
    stat_b = reading_at(1.0, 1.5, 0, method="tick", all_sirq=1.2, own_sirq=0)
    bpf_b = attr.Reading(**{**vars(reading_at(1.0, 1.5, 0.1)), "fallback": stat_b})
    s = attr.split(stat_a, bpf_b)
    assert s.method == "tick" and s.parts["vswitch"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        attr.split(stat_b, stat_a)


def test_interpolation_bound():
    assert attr.interpolate(10.0, 20.0, 0.25) == (12.5, 7.5)
    assert attr.interpolate(10.0, 20.0, 1.0) == (20.0, 10.0)


# ----------------------------------------------------------------- recorded samples

def fake_proc(root: Path, raw: dict) -> dict:
    """A /proc tree holding one recorded reading; returns {host: {pid: daemon}}."""
    root.mkdir(parents=True)
    (root / "stat").write_text(raw["proc_stat"])
    hosts = {}
    for host, h in raw["hosts"].items():
        for name, d in h["daemons"].items():
            base = root / str(d["pid"])
            (base / "task").mkdir(parents=True)
            (base / "stat").write_text(d["stat"])
            for tid, t in d["tasks"].items():
                (base / "task" / tid).mkdir()
                (base / "task" / tid / "stat").write_text(t["stat"])
                (base / "task" / tid / "schedstat").write_text(t["schedstat"])
            hosts.setdefault(host, {})[d["pid"]] = name
    return hosts


def recorded(tmp_path, name):
    """(bpf reading, /proc/stat reading, naive seconds, busy seconds) at both ends."""
    doc = json.loads((DATA / name).read_text())
    out = []
    for end in ("start", "end"):
        raw, root = doc[end], tmp_path / end
        hosts = fake_proc(root, raw)
        threads = {}
        for procs in hosts.values():
            threads.update(reading.daemon_threads(root, procs, doc["hz"]))
        cpus = frozenset(c for h in raw["hosts"].values() for c in h["cpus"])
        scope = reading.Scope(threads, cpus)
        lo, hi = (probe.Snapshot.from_dict(raw[k]) for k in ("probe_lo", "probe_hi"))
        stat = procfs.cpu_times(root, doc["hz"])
        ticks = sum(t.seconds for procs in hosts.values() for pid in procs
                    for t in procfs.thread_cpu(root, pid, doc["hz"]))
        out.append((reading.probe_reading(raw["t_ns"], scope, lo, hi, irq_in_task=True),
                    reading.stat_reading(raw["t_ns"], scope, stat, True, doc["hz"]),
                    ticks + sum(stat[c]["softirq"] for c in cpus),
                    sum(procfs.busy_seconds(stat[c]) for c in cpus)))
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("ovs-*.json")))
def test_recorded_split_never_exceeds_the_cpus_busy_time(tmp_path, name):
    (a, a_stat, a_naive, a_busy), (b, b_stat, b_naive, b_busy) = recorded(tmp_path, name)
    s = attr.split(a, b)
    pct = s.percent()
    assert s.method == "bpf" and s.exact and s.ncpus == 2
    assert pct["dataplane"] <= 200.0 and s.dataplane_s <= (b_busy - a_busy) + s.err_s
    assert min(pct[p] for p in attr.PARTS) >= 0
    # the vSwitch threads' runtime is vswitch + the interrupts that ran on their back, exactly
    runtime = sum(t.runtime_s for t in b.threads.values()) - sum(t.runtime_s for t in a.threads.values())
    inside = s.parts["vswitch"] + s.parts["softirq_in_vswitch"] + sum(
        v for (part, comp, _), v in s.components.items() if part == "hardirq" and comp != "other")
    assert inside == pytest.approx(runtime, rel=1e-6)
    naive = 100 * (b_naive - a_naive) / s.seconds       # what cpu_pct used to add up
    tick = attr.split(a_stat, b_stat)
    assert not tick.exact and naive > pct["dataplane"] + 0.5 * pct["softirq_in_vswitch"]


def test_where_naive_addition_exceeds_two_cpus_the_split_does_not(tmp_path):
    """The issue's case (227% on 2 CPUs), on the recordings made while the data plane
    saturated both CPUs (a shared, loaded machine cannot make one: they are kept)."""
    found = []
    for path in sorted(DATA.glob("ovs-*.json")):
        (a, _, a_naive, _), (b, _, b_naive, _) = recorded(tmp_path / path.stem, path.name)
        s = attr.split(a, b)
        if 100 * (b_naive - a_naive) / s.seconds > 200.0:
            found.append(path.name)
            assert s.percent()["dataplane"] <= 200.0 and s.ncpus == 2
    assert found, ("no recording in tests/data/cpu/ where processes + softirq exceeded 200%: "
                   "record one on an idle machine (python tests/data/cpu/record.py tests/data/cpu "
                   "--nice --name=ovs-vxlan-tcp-saturated)")


# ----------------------------------------------------------------- battery windows

def write_proc(root, processes, softirq, hz, runtime_ns=None):
    """processes: pid -> (name, [(tid, comm, utime, stime)]); softirq: cpu -> seconds."""
    for pid, (name, tasks) in processes.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "comm").write_text(name + "\n")
        total = [0, 0]
        for tid, comm, ut, st in tasks:
            d = root / str(pid) / "task" / str(tid)
            d.mkdir(parents=True, exist_ok=True)
            (d / "stat").write_text(STAT.format(pid=tid, comm=comm, utime=ut, stime=st))
            ns = (runtime_ns or {}).get(tid, (ut + st) * 1_000_000_000 // hz)
            (d / "schedstat").write_text(f"{ns} 0 1\n")
            total = [total[0] + ut, total[1] + st]
        (root / str(pid) / "stat").write_text(STAT.format(pid=pid, comm=name, utime=total[0],
                                                          stime=total[1]))
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{c} 10 0 10 100 0 0 {int(s * hz)} 0 0 0" for c, s in sorted(softirq.items())]
    (root / "stat").write_text("\n".join(lines) + "\n")
    (root / "softirqs").write_text("   CPU0 CPU1\nNET_RX: 1 2\n")


def deployment(pids):
    host = SimpleNamespace(name="h1", cpus=(1,))
    return SimpleNamespace(vswitch_pids=lambda name: pids, controller_pids=dict,
                           testbed=SimpleNamespace(hosts=[host], vswitch=SimpleNamespace(
                               kind=SimpleNamespace(value="ovs"))))


def test_window_without_probe_uses_runtime_and_softirq_of_host_cpus_only(tmp_path):
    dep = deployment({"ovs-vswitchd": 10, "ovsdb-server": 20})
    col = cpu.host_collector(dep, dep.testbed.hosts[0], proc=tmp_path)
    hz = col.hz
    write_proc(tmp_path, {10: ("ovs-vswitchd", [(10, "ovs-vswitchd", 5, 5), (11, "handler1", 0, 0)]),
                          20: ("ovsdb-server", [(20, "ovsdb-server", 1, 1)]),
                          30: ("ovs-vswitchd", [(30, "ovs-vswitchd", 0, 0)])},   # another run's
               {0: 10.0, 1: 0.5}, hz)
    _, a = cpu.read([col])
    # runtime (ns) is what counts; ticks of utime/stime say less (a short window reads 0 ticks)
    write_proc(tmp_path, {10: ("ovs-vswitchd", [(10, "ovs-vswitchd", 5, 5), (11, "handler1", 0, 0)]),
                          20: ("ovsdb-server", [(20, "ovsdb-server", 1, 1)]),
                          30: ("ovs-vswitchd", [(30, "ovs-vswitchd", 9 * hz, 0)])},
               {0: 99.0, 1: 0.75}, hz,
               runtime_ns={10: 10 * 10**9 // hz + 100_000_000, 11: 500_000_000, 20: 2 * 10**9 // hz})
    _, b = cpu.read([col])
    b = attr.Reading(**{**vars(b), "t": a.t + 1.0})
    s = attr.split(a, b)
    m = cpu.metrics(s)
    assert s.method == ("irqtime" if col.irq_time_accounting else "tick") and s.ncpus == 1
    assert s.components[("vswitch", "ovs-vswitchd", "main")] == pytest.approx(0.1)
    assert s.components[("vswitch", "ovs-vswitchd", "handler")] == pytest.approx(0.5)
    assert m["cpu_vswitch_pct"] == pytest.approx(60.0)       # pid 30 is not this host's daemon
    assert m["cpu_softirq_other_pct"] == pytest.approx(25.0)  # CPU 0's softirq is another host's
    assert m["cpu_pct"] == pytest.approx(85.0) and m["cpu_pct_err"] > 0


def test_vanished_daemon_is_skipped(tmp_path):
    dep = deployment({"ovs-vswitchd": 99})
    col = cpu.host_collector(dep, dep.testbed.hosts[0], proc=tmp_path)
    write_proc(tmp_path, {}, {1: 0.0}, col.hz)
    assert cpu.read([col])[1].threads == {}


def test_readings_out_of_order_are_refused():
    a = reading_at(2.0, 0, 0)
    with pytest.raises(ValueError):
        attr.split(a, a)


def test_fields_of_a_missing_window_are_none():
    assert cpu.fields(None) == dict.fromkeys(cpu.METRICS)
    assert set(cpu.METRICS) == {"cpu_pct", "cpu_pct_err", "cpu_vswitch_pct", "cpu_controller_pct",
                                "cpu_softirq_in_vswitch_pct", "cpu_softirq_other_pct",
                                "cpu_hardirq_pct", "cpu_router_pct", "cpu_router_pct_err"}


def test_irqtime_kernel_keeps_runtime_whole_and_softirq_from_proc_stat(tmp_path):
    threads = {(1, 1, 1, 1): ("ovs-vswitchd", "main", 1, 2.0, "")}
    stat = lambda sirq: {0: {"softirq": sirq, "irq": 0.1}, 1: {"softirq": 9.0, "irq": 0.0}}
    scope = reading.Scope(threads, frozenset({0}))
    a = reading.stat_reading(0, scope, stat(1.0), irq_in_task=False, hz=250)
    scope = reading.Scope({(1, 1, 1, 1): ("ovs-vswitchd", "main", 1, 2.5, "")}, frozenset({0}))
    b = reading.stat_reading(1_000_000_000, scope, stat(1.2), irq_in_task=False, hz=250)
    s = attr.split(a, b)
    assert s.method == "irqtime" and s.exact
    assert s.parts["vswitch"] == pytest.approx(0.5) and s.parts["softirq_in_vswitch"] == 0
    assert s.parts["softirq_other"] == pytest.approx(0.2)
    assert s.err_s == pytest.approx(2 * 2 / 250)        # one tick per CPU, counter and edge


def test_collector_counters_grow_by_the_split_between_scrapes(tmp_path):
    """The exporter's counters with a probe file: every series at 0 on the first
    scrape, then the split since the last scrape (runtime minus the softirq in the
    thread's context; softirq elsewhere on the host's CPU as softirq_other)."""
    from prometheus_client import CollectorRegistry
    from vnetbench_collector.collector import VSwitchCollector
    proc, out = tmp_path / "proc", tmp_path / "probe.json"
    proc.mkdir()
    hz = procfs.clk_tck()
    snap = lambda seq, t, sirq: probe.write_json(out, {
        "version": 1, "seq": seq, "t_ns": t, "start_ns": 1, "interval_ns": 100_000_000,
        "softirq_cpu": {"1": sirq[0] + sirq[1]}, "hardirq_cpu": {},
        "softirq": {"1,10": sirq[0], "1,0": sirq[1]}, "hardirq": {}})
    future = time.monotonic_ns() + 10**12            # no waiting: the snapshot is "after" now
    write_proc(proc, {10: ("ovs-vswitchd", [(10, "ovs-vswitchd", 0, 0)])}, {1: 0.0}, hz,
               runtime_ns={10: 1_000_000_000})
    snap(1, future, (100_000_000, 50_000_000))
    col = VSwitchCollector("h1", "ovs", proc=proc, names=(), extra_pids=[10], cpus={1}, qemu=False,
                           hz=hz, probe_file=out)
    registry = CollectorRegistry()
    registry.register(col)

    def counters():
        return {(s.labels["part"], s.labels["component"]): s.value for f in registry.collect()
                if f.name == "vnetbench_dataplane_cpu_seconds" for s in f.samples
                if s.name.endswith("_total")}
    first = counters()
    assert first and set(first.values()) == {0.0}
    write_proc(proc, {10: ("ovs-vswitchd", [(10, "ovs-vswitchd", 0, 0)])}, {1: 0.0}, hz,
               runtime_ns={10: 1_800_000_000})
    snap(2, future + 10**8, (400_000_000, 150_000_000))
    got = counters()
    assert got[("vswitch", "ovs-vswitchd")] == pytest.approx(0.8 - 0.3)
    assert got[("softirq_in_vswitch", "ovs-vswitchd")] == pytest.approx(0.3)
    assert got[("softirq_other", "idle")] == pytest.approx(0.1)
    methods = [s.labels["method"] for f in registry.collect() if f.name == "vnetbench_cpu_method"
               for s in f.samples]
    assert methods == ["bpf"]


def test_ovn_nb_and_sb_are_two_controller_components(tmp_path):
    """Both OVN databases run ovsdb-server: the window's components name them after
    their pidfiles (ovsdb-server-nb, ovsdb-server-sb), not one 'ovsdb-server'."""
    proc = tmp_path / "proc"
    hz = procfs.clk_tck()
    write_proc(proc, {7: ("ovsdb-server", [(7, "ovsdb-server", 0, 0)]),
                      8: ("ovsdb-server", [(8, "ovsdb-server", 0, 0)]),
                      9: ("ovn-northd", [(9, "ovn-northd", 0, 0)])}, {1: 0.0}, hz)
    dep = deployment({})
    dep.controller_pids = lambda: {"ovsdb-server-nb": 7, "ovsdb-server-sb": 8, "ovn-northd": 9}
    col = cpu.controller_collector(dep, proc=proc)
    assert col.processes()[0] == {7: "ovsdb-server-nb", 8: "ovsdb-server-sb", 9: "ovn-northd"}


# -- a host's busy share: /proc/stat's own time, never the window's clock -------------

_ROW = hst.fixed_dictionaries({f: hst.integers(0, 10_000) for f in procfs.CPU_FIELDS})


@given(hst.lists(hst.tuples(_ROW, _ROW), min_size=1, max_size=4),
       hst.floats(min_value=0.01, max_value=100.0))
def test_host_busy_never_exceeds_its_cpus_whatever_the_window_seconds(rows, seconds):
    """A loaded machine's collectors can time a window shorter than the /proc/stat reads
    around it (a 1-CPU host read 132 % busy in CI): the busy share is each CPU's own."""
    hz = 100
    a = {c: {f: v / hz for f, v in r.items()} for c, (r, _) in enumerate(rows)}
    b = {c: {f: (r[f] + d[f]) / hz for f in r} for c, (r, d) in enumerate(rows)}
    split = SimpleNamespace(seconds=seconds, percent=dict)
    with mock.patch.object(cpu, "describe", return_value={"components": {}}):
        out = cpu._host(split, set(a), a, b)
    shares = [procfs.busy_share(a[c], b[c]) for c in a]
    if None in shares:
        assert "busy_pct" not in out
    else:
        assert 0.0 <= out["busy_pct"] <= 100.0 * len(a) + 1e-9
        busy = sum(procfs.busy_seconds(b[c]) - procfs.busy_seconds(a[c]) for c in a)
        assert (out["busy_pct"] == 0.0) == (busy == 0)


def test_busy_share_leaves_steal_out():
    a = dict.fromkeys(procfs.CPU_FIELDS, 0.0)
    b = {**a, "user": 0.5, "idle": 0.5, "steal": 1.0}
    assert procfs.busy_share(a, b) == 0.5
    assert procfs.busy_share(a, a) is None
