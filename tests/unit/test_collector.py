"""vnetbench-collector (collectors/, installed on its own) against fake /proc trees."""

import shutil
import socket
import subprocess
import sys
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from vnetbench_collector import procfs
from vnetbench_collector.__main__ import main
from vnetbench_collector.collector import VSwitchCollector

HZ = 100
STAT = ("{pid} ({comm}) S 1 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 "
        "{start} 0 0\n")
SOFTIRQS = """\
                    CPU0       CPU1
          HI:          1          2
       TIMER:        100        200
      NET_TX:          7         11
      NET_RX:       1000       2500
       BLOCK:          3          4
"""


def add_process(root, pid, name, threads=(), exe=None, comm=None, start=100):
    """threads: [(tid, comm, utime, stime)]; the main thread (tid == pid) is added if absent."""
    d = root / str(pid)
    (d / "task").mkdir(parents=True, exist_ok=True)
    comm = comm if comm is not None else name[:15]
    (d / "comm").write_text(comm + "\n")
    if exe is not False:
        link = d / "exe"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(exe or f"/usr/sbin/{name}")
    threads = list(threads) or [(pid, comm, 0, 0)]
    total_u = total_s = 0
    for tid, tcomm, ut, st in threads:
        t = root / str(pid) / "task" / str(tid)
        t.mkdir(parents=True, exist_ok=True)
        (t / "stat").write_text(STAT.format(pid=tid, comm=tcomm, utime=ut, stime=st,
                                            start=start + (tid - pid)))
        total_u, total_s = total_u + ut, total_s + st
    (d / "stat").write_text(STAT.format(pid=pid, comm=comm, utime=total_u, stime=total_s,
                                        start=start))


def add_stat(root, softirq):
    """softirq: cpu -> ticks."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{c} 10 0 10 100 0 0 {s} 0 0 0" for c, s in sorted(softirq.items())]
    lines += ["intr 0", "ctxt 0", "softirq 0 0 0"]
    (root / "stat").write_text("\n".join(lines) + "\n")
    (root / "softirqs").write_text(SOFTIRQS)


@pytest.fixture
def proc(tmp_path):
    add_stat(tmp_path, {0: 500, 1: 250})
    add_process(tmp_path, 10, "ovs-vswitchd", [
        (10, "ovs-vswitchd", 100, 50), (11, "handler12", 30, 20), (12, "handler13", 10, 0),
        (13, "revalidator14", 5, 5), (14, "pmd-c01/id:5", 200, 0), (15, "urcu3", 1, 1),
        (16, "ct_clean2", 2, 0)])
    add_process(tmp_path, 20, "ovsdb-server", [(20, "ovsdb-server", 4, 4), (21, "log_fsync3", 1, 1)])
    add_process(tmp_path, 30, "contrail-vrouter-agent", [(30, "contrail-vroute", 7, 3)])
    add_process(tmp_path, 40, "sshd")
    add_process(tmp_path, 9, "ksoftirqd/0", exe=False)          # kernel thread: no exe
    return tmp_path


def scrape(collector):
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def value(registry, name, **labels):
    return registry.get_sample_value(name, labels)


def test_thread_classes():
    c = procfs.thread_class
    assert c("handler12", "ovs-vswitchd") == "handler"
    assert c("revalidator3", "ovs-vswitchd") == "revalidator"
    assert c("pmd12", "ovs-vswitchd") == "pmd"
    assert c("pmd-c03/id:7", "ovs-vswitchd") == "pmd"
    assert c("urcu2", "ovs-vswitchd") == "urcu"
    assert c("ovs-vswitchd", "ovs-vswitchd") == "main"
    assert c("ct_clean1", "ovs-vswitchd") == "main"
    assert c("handler1", "ovsdb-server") == "all"


def test_parse_stat_with_odd_comm():
    t = procfs.parse_stat(STAT.format(pid=7, comm="a) b (c", utime=30, stime=20, start=9), HZ)
    assert (t.tid, t.comm, t.start, t.seconds) == (7, "a) b (c", 9, 0.5)


def test_vswitch_cpu_seconds_per_component_and_thread_class(proc):
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    m = "vnetbench_vswitch_cpu_seconds_total"
    lab = dict(host="cn1", vswitch="ovs")
    assert value(r, m, component="ovs-vswitchd", thread_class="main", **lab) == pytest.approx(1.52)
    assert value(r, m, component="ovs-vswitchd", thread_class="handler", **lab) == pytest.approx(0.6)
    assert value(r, m, component="ovs-vswitchd", thread_class="revalidator", **lab) == pytest.approx(0.1)
    assert value(r, m, component="ovs-vswitchd", thread_class="pmd", **lab) == pytest.approx(2.0)
    assert value(r, m, component="ovs-vswitchd", thread_class="urcu", **lab) == pytest.approx(0.02)
    assert value(r, m, component="ovsdb-server", thread_class="all", **lab) == pytest.approx(0.1)
    assert value(r, m, component="contrail-vrouter-agent", thread_class="all",
                 **lab) == pytest.approx(0.1)
    components = {s.labels["component"] for f in r.collect() for s in f.samples
                  if s.name == m}
    assert components == {"ovs-vswitchd", "ovsdb-server", "contrail-vrouter-agent"}
    assert value(r, "vnetbench_vswitch_processes", component="ovn-controller", **lab) == 0
    assert value(r, "vnetbench_vswitch_processes", component="ovs-vswitchd", **lab) == 1


def test_metric_names_labels_and_types(proc):
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    fams = {f.name: f for f in r.collect()}
    assert {n: f.type for n, f in fams.items()} == {
        "vnetbench_vswitch_cpu_seconds": "counter", "vnetbench_vswitch_processes": "gauge",
        "vnetbench_softirq_cpu_seconds": "counter", "vnetbench_softirqs": "counter"}
    labels = {n: {tuple(sorted(s.labels)) for s in f.samples} for n, f in fams.items()}
    assert labels["vnetbench_vswitch_cpu_seconds"] == {("component", "host", "thread_class", "vswitch")}
    assert labels["vnetbench_softirq_cpu_seconds"] == {("cpu", "host")}
    assert labels["vnetbench_softirqs"] == {("cpu", "host", "type")}
    text = generate_latest(r).decode()
    assert "# TYPE vnetbench_vswitch_cpu_seconds_total counter" in text
    assert "ksoftirqd" not in text and "sshd" not in text


def test_softirq_seconds_per_cpu_and_cpu_filter(proc):
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    m = "vnetbench_softirq_cpu_seconds_total"
    assert value(r, m, host="cn1", cpu="0") == pytest.approx(5.0)
    assert value(r, m, host="cn1", cpu="1") == pytest.approx(2.5)
    r = scrape(VSwitchCollector("h1", "ovs", proc=proc, hz=HZ, cpus={1}))
    assert value(r, m, host="h1", cpu="0") is None
    assert value(r, m, host="h1", cpu="1") == pytest.approx(2.5)


def test_net_rx_tx_counts(proc):
    assert procfs.softirq_counts(proc) == {"NET_TX": {0: 7, 1: 11}, "NET_RX": {0: 1000, 1: 2500}}
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    m = "vnetbench_softirqs_total"
    assert value(r, m, host="cn1", cpu="1", type="NET_RX") == 2500
    assert value(r, m, host="cn1", cpu="0", type="NET_TX") == 7
    assert value(r, m, host="cn1", cpu="0", type="TIMER") is None


def test_process_discovery_by_exact_name(proc):
    # comm exact, or exe basename (needed past comm's 15 bytes), never a prefix
    add_process(proc, 50, "ovs-vswitchd-wrapper")           # comm "ovs-vswitchd-wr"
    add_process(proc, 51, "ovs-vswitch")
    add_process(proc, 52, "contrail-vrouter-agent-x")        # comm == "contrail-vroute"
    add_process(proc, 53, "ovsdb-server", exe=False)         # exe unreadable: comm decides
    add_process(proc, 54, "x", exe="/usr/sbin/ovn-controller (deleted)", comm="ovn-controll")
    found = procfs.find_processes(proc)
    assert found == {10: "ovs-vswitchd", 20: "ovsdb-server", 30: "contrail-vrouter-agent",
                     53: "ovsdb-server", 54: "ovn-controller"}
    assert procfs.find_processes(proc, ["sshd"], extra_pids=[9, 999]) == {40: "sshd", 9: "ksoftirqd/0"}


def test_pid_filter_extra_names_and_pids(proc):
    add_process(proc, 60, "ovs-vswitchd", [(60, "ovs-vswitchd", 50, 50)], start=300)
    add_process(proc, 70, "qemu-kvm", [(70, "qemu-kvm", 10, 0), (71, "vhost-70", 20, 0)])
    r = scrape(VSwitchCollector("h2", "ovs", proc=proc, hz=HZ, pid_filter=lambda p: p == 60,
                                extra_names=["qemu-kvm"], extra_pids=[40]))
    m = "vnetbench_vswitch_cpu_seconds_total"
    lab = dict(host="h2", vswitch="ovs")
    assert value(r, m, component="ovs-vswitchd", thread_class="main", **lab) == pytest.approx(1.0)
    assert value(r, m, component="ovsdb-server", thread_class="all", **lab) is None
    assert value(r, m, component="sshd", thread_class="all", **lab) == 0.0   # extra pid, unfiltered
    r = scrape(VSwitchCollector("h2", "ovs", proc=proc, hz=HZ, extra_names=["qemu-kvm"]))
    assert value(r, m, component="qemu-kvm", thread_class="all", **lab) == pytest.approx(0.3)


def test_exited_thread_keeps_its_time_so_counters_do_not_go_down(proc):
    c = VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ)
    r = scrape(c)
    m = "vnetbench_vswitch_cpu_seconds_total"
    lab = dict(host="cn1", vswitch="ovs", component="ovs-vswitchd")
    assert value(r, m, thread_class="handler", **lab) == pytest.approx(0.6)
    # handler13 exits, handler12 runs on
    shutil.rmtree(proc / "10" / "task" / "12")
    (proc / "10" / "task" / "11" / "stat").write_text(
        STAT.format(pid=11, comm="handler12", utime=40, stime=20, start=101))
    assert value(r, m, thread_class="handler", **lab) == pytest.approx(0.7)
    # the process restarts (new start time): its counters legitimately reset
    shutil.rmtree(proc / "10")
    add_process(proc, 10, "ovs-vswitchd", [(10, "ovs-vswitchd", 1, 0), (11, "handler1", 2, 0)],
                start=5000)
    assert value(r, m, thread_class="handler", **lab) == pytest.approx(0.02)


def test_vanished_process_is_skipped(proc):
    c = VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ, extra_pids=[12345])
    (proc / "20" / "stat").unlink()
    shutil.rmtree(proc / "20" / "task")
    r = scrape(c)
    assert value(r, "vnetbench_vswitch_cpu_seconds_total", host="cn1", vswitch="ovs",
                 component="ovsdb-server", thread_class="all") is None


def test_import_registers_nothing_in_the_global_registry():
    code = ("import prometheus_client as p; before = set(p.REGISTRY._names_to_collectors);"
            "import vnetbench_collector, vnetbench_collector.collector, vnetbench_collector.procfs,"
            " vnetbench_collector.__main__;"
            "after = set(p.REGISTRY._names_to_collectors);"
            "assert before == after, after - before;"
            "assert not [n for n in after if n.startswith('vnetbench')]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_port_taken_exits_2_with_one_line(proc, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SystemExit) as e:
            main(["--host", "cn1", "--proc", str(proc), "--listen", f"127.0.0.1:{port}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert f"127.0.0.1:{port}" in err and "--listen" in err and "in use" in err


def test_bad_proc_root_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--proc", str(tmp_path / "nope"), "--listen", "127.0.0.1:0"])
    assert e.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_serves_metrics_over_http(proc):
    from prometheus_client import start_http_server
    from vnetbench_collector.__main__ import build_registry, parser
    args = parser().parse_args(["--host", "h1", "--proc", str(proc), "--pidfile",
                                str(proc / "pidfile"), "--cpus", "0-0"])
    (proc / "pidfile").write_text("20\n")
    server, thread = start_http_server(0, addr="127.0.0.1", registry=build_registry(args))
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics",
                                      timeout=5).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'vnetbench_vswitch_cpu_seconds_total{component="ovsdb-server",host="h1",' \
           'thread_class="all",vswitch="ovs"}' in body
    assert 'component="ovs-vswitchd",host="h1",thread_class' not in body   # not in the pidfile
    assert 'vnetbench_softirq_cpu_seconds_total{cpu="0",host="h1"}' in body
    assert 'cpu="1"' not in body


def test_cli_argument_parsing():
    from vnetbench_collector.__main__ import cpu_list, listen_address
    assert listen_address("127.0.0.1:9477") == ("127.0.0.1", 9477)
    assert listen_address("[::1]:9") == ("::1", 9)
    assert cpu_list("0-2,5") == {0, 1, 2, 5}
    with pytest.raises(Exception):
        listen_address("9477")
