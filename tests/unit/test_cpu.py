"""vSwitch CPU windows (through vnetbench-collector) against fake /proc trees."""

from types import SimpleNamespace

import pytest

from vnetbench import cpu

STAT = "{pid} ({comm}) S 1 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 100 0 0\n"


def fake_proc(root, processes, softirq, hz):
    """processes: pid -> (name, [(tid, comm, utime, stime)]); softirq: cpu -> seconds."""
    for pid, (name, tasks) in processes.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "comm").write_text(name + "\n")
        total = [0, 0]
        for tid, comm, ut, st in tasks:
            d = root / str(pid) / "task" / str(tid)
            d.mkdir(parents=True, exist_ok=True)
            (d / "stat").write_text(STAT.format(pid=tid, comm=comm, utime=ut, stime=st))
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


def test_window_percent_per_component_and_softirq_of_host_cpus_only(tmp_path):
    dep = deployment({"ovs-vswitchd": 10, "ovsdb-server": 20})
    col = cpu.host_collector(dep, dep.testbed.hosts[0], proc=tmp_path)
    hz = col.hz
    fake_proc(tmp_path, {10: ("ovs-vswitchd", [(10, "ovs-vswitchd", 5, 5), (11, "handler1", 0, 0)]),
                         20: ("ovsdb-server", [(20, "ovsdb-server", 1, 1)]),
                         30: ("ovs-vswitchd", [(30, "ovs-vswitchd", 0, 0)])},   # another run's
              {0: 10.0, 1: 0.5}, hz)
    a = cpu.sample(col)
    fake_proc(tmp_path, {10: ("ovs-vswitchd", [(10, "ovs-vswitchd", 5 + hz // 10, 5),
                                               (11, "handler1", hz // 2, 0)]),
                         20: ("ovsdb-server", [(20, "ovsdb-server", 1, 1)]),
                         30: ("ovs-vswitchd", [(30, "ovs-vswitchd", 9 * hz, 0)])},
              {0: 99.0, 1: 0.75}, hz)
    b = cpu.sample(col)
    b = cpu.Sample(t=a.t + 1.0, components=b.components, softirq=b.softirq)
    pct = cpu.percent(a, b)
    assert pct["ovs-vswitchd/main"] == pytest.approx(10.0)
    assert pct["ovs-vswitchd/handler"] == pytest.approx(50.0)
    assert pct["ovsdb-server"] == pytest.approx(0.0)
    assert pct["vswitch"] == pytest.approx(60.0)        # pid 30 is not this host's daemon
    assert pct["softirq"] == pytest.approx(25.0)        # CPU 0's softirq is another host's


def test_vanished_daemon_is_skipped(tmp_path):
    dep = deployment({"ovs-vswitchd": 99})
    col = cpu.host_collector(dep, dep.testbed.hosts[0], proc=tmp_path)
    fake_proc(tmp_path, {}, {1: 0.0}, col.hz)
    assert cpu.sample(col).components == {}


def test_samples_out_of_order_are_refused():
    a = cpu.Sample(t=2.0, components={}, softirq=0.0)
    with pytest.raises(ValueError):
        cpu.percent(a, a)
