"""vSwitch CPU accounting against fake /proc trees."""

import pytest

from vnetbench.cpu import HostCpu, Sample, percent, thread_class

STAT = "{pid} ({comm}) S 1 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 100 0 0\n"


def fake_proc(root, threads, softirq):
    """threads: pid -> [(tid, comm, utime, stime)]; softirq: cpu -> ticks."""
    for pid, tasks in threads.items():
        for tid, comm, ut, st in tasks:
            d = root / str(pid) / "task" / str(tid)
            d.mkdir(parents=True, exist_ok=True)
            (d / "stat").write_text(STAT.format(pid=tid, comm=comm, utime=ut, stime=st))
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{c} 10 0 10 100 0 0 {s} 0 0 0" for c, s in sorted(softirq.items())]
    (root / "stat").write_text("\n".join(lines) + "\n")


def test_thread_classes():
    assert thread_class("handler12", "ovs-vswitchd") == "ovs-vswitchd/handler"
    assert thread_class("revalidator3", "ovs-vswitchd") == "ovs-vswitchd/revalidator"
    assert thread_class("ovs-vswitchd", "ovs-vswitchd") == "ovs-vswitchd/main"
    assert thread_class("ovsdb-server", "ovsdb-server") == "ovsdb-server"


def test_window_percent_per_component_and_softirq_of_host_cpus_only(tmp_path):
    meter = HostCpu("h1", cpus=(1,), pids={"ovs-vswitchd": 10, "ovsdb-server": 20}, proc=tmp_path)
    fake_proc(tmp_path, {10: [(10, "ovs-vswitchd", 5, 5), (11, "handler1", 0, 0)],
                         20: [(20, "ovsdb-server", 1, 1)]}, {0: 1000, 1: 50})
    a = meter.sample()
    fake_proc(tmp_path, {10: [(10, "ovs-vswitchd", 15, 5), (11, "handler1", 40, 10)],
                         20: [(20, "ovsdb-server", 1, 1)]}, {0: 9999, 1: 75})
    b = meter.sample()
    b = Sample(t=a.t + 1.0, components=b.components, softirq=b.softirq)
    pct = percent(a, b, hz=100)
    assert pct["ovs-vswitchd/main"] == pytest.approx(10.0)
    assert pct["ovs-vswitchd/handler"] == pytest.approx(50.0)
    assert pct["ovsdb-server"] == pytest.approx(0.0)
    assert pct["vswitch"] == pytest.approx(60.0)
    assert pct["softirq"] == pytest.approx(25.0)      # CPU 0's softirq is another host's


def test_vanished_thread_is_skipped(tmp_path):
    meter = HostCpu("h1", cpus=(0,), pids={"ovs-vswitchd": 99}, proc=tmp_path)
    fake_proc(tmp_path, {}, {0: 0})
    assert meter.sample().components == {}
