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
STAT = ("{pid} ({comm}) S {ppid} 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 "
        "{start} 0 0\n")
SOFTIRQS = """\
                    CPU0       CPU1
          HI:          1          2
       TIMER:        100        200
      NET_TX:          7         11
      NET_RX:       1000       2500
       BLOCK:          3          4
"""


def add_process(root, pid, name, threads=(), exe=None, comm=None, start=100, ppid=1):
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
                                            start=start + (tid - pid), ppid=ppid))
        total_u, total_s = total_u + ut, total_s + st
    (d / "stat").write_text(STAT.format(pid=pid, comm=comm, utime=total_u, stime=total_s,
                                        start=start, ppid=ppid))


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
    add_process(tmp_path, 9, "ksoftirqd/0", [(9, "ksoftirqd/0", 0, 120)], exe=False, ppid=2)
    add_process(tmp_path, 8, "ksoftirqd/1", [(8, "ksoftirqd/1", 0, 30)], exe=False, ppid=2)
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
    t = procfs.parse_stat(STAT.format(pid=7, comm="a) b (c", utime=30, stime=20, start=9, ppid=1), HZ)
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
        "vnetbench_softirq_cpu_seconds": "counter", "vnetbench_softirqs": "counter",
        "vnetbench_ksoftirqd_cpu_seconds": "counter", "vnetbench_datapath_lookups": "counter",
        "vnetbench_datapath_flows": "gauge", "vnetbench_irq_time_accounting": "gauge",
        "vnetbench_dataplane_cpu_seconds": "counter", "vnetbench_cpu_method": "gauge",
        "vnetbench_cpu_resolution_seconds": "gauge"}
    labels = {n: {tuple(sorted(s.labels)) for s in f.samples} for n, f in fams.items()}
    assert labels["vnetbench_vswitch_cpu_seconds"] == {("component", "host", "thread_class", "vswitch")}
    assert labels["vnetbench_softirq_cpu_seconds"] == {("cpu", "host")}
    assert labels["vnetbench_softirqs"] == {("cpu", "host", "type")}
    text = generate_latest(r).decode()
    assert "# TYPE vnetbench_vswitch_cpu_seconds_total counter" in text
    vswitch_series = [line for line in text.splitlines()
                      if line.startswith("vnetbench_vswitch_cpu_seconds_total")]
    assert not any('component="ksoftirqd' in line for line in vswitch_series)
    assert "sshd" not in text


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


def test_python_controller_is_named_by_the_comm_it_sets(proc):
    """vnetbench.sdn.controller runs under the interpreter but sets comm osken-manager."""
    add_process(proc, 60, "osken-manager", exe="/usr/bin/python3.11")
    add_process(proc, 61, "python3", exe="/usr/bin/python3.11")
    assert procfs.find_processes(proc, (), extra_pids=[60, 61]) == {60: "osken-manager", 61: "python3.11"}
    assert procfs.find_processes(proc)[60] == "osken-manager"


def test_python_agent_named_past_comms_15_bytes(proc):
    """vnetbench.kinds.vrouter.agent sets comm contrail-vrouter-agent, which the kernel cuts
    to contrail-vroute; by pidfile it is still the agent, not its interpreter."""
    add_process(proc, 62, "contrail-vrouter-agent", exe="/usr/bin/python3.11")
    assert procfs.find_processes(proc, (), extra_pids=[62]) == {62: "contrail-vrouter-agent"}


def test_pidfile_stems_tell_apart_two_daemons_of_one_program(proc, tmp_path):
    """OVN's NB and SB ovsdb-servers: one component each, named by their pidfiles;
    a stem that does not extend the process name (osken-0 for osken-manager) leaves it."""
    from vnetbench_collector.__main__ import pidfile_source
    add_process(proc, 70, "ovsdb-server", [(70, "ovsdb-server", 30, 0)])
    add_process(proc, 71, "ovsdb-server", [(71, "ovsdb-server", 10, 0)])
    add_process(proc, 72, "osken-manager", exe="/usr/bin/python3.11")
    files = []
    for stem, pid in (("ovsdb-server-nb", 70), ("ovsdb-server-sb", 71), ("osken-0", 72)):
        files.append(tmp_path / f"{stem}.pid")
        files[-1].write_text(f"{pid}\n")
    source = pidfile_source(files)
    assert source() == {70: "ovsdb-server-nb", 71: "ovsdb-server-sb", 72: "osken-0"}
    assert procfs.find_processes(proc, (), source()) == {
        70: "ovsdb-server-nb", 71: "ovsdb-server-sb", 72: "osken-manager"}
    r = scrape(VSwitchCollector("controller", "ovn", proc=proc, hz=HZ, pid_source=source,
                                qemu=False, controller=True))
    m, lab = "vnetbench_vswitch_cpu_seconds_total", dict(host="controller", vswitch="ovn")
    assert value(r, m, component="ovsdb-server-nb", thread_class="all", **lab) == pytest.approx(0.3)
    assert value(r, m, component="ovsdb-server-sb", thread_class="all", **lab) == pytest.approx(0.1)
    assert value(r, m, component="ovsdb-server", thread_class="all", **lab) is None
    assert procfs.qualified("ovs-vswitchd", "ovs-vswitchd") == "ovs-vswitchd"


def test_pid_filter_extra_names_and_pids(proc):
    add_process(proc, 60, "ovs-vswitchd", [(60, "ovs-vswitchd", 50, 50)], start=300)
    add_process(proc, 70, "qemu-kvm", [(70, "qemu-kvm", 10, 0), (71, "vhost-70", 20, 0)])
    r = scrape(VSwitchCollector("h2", "ovs", proc=proc, hz=HZ, pid_source=lambda: [60],
                                extra_pids=[40], qemu=False))
    m = "vnetbench_vswitch_cpu_seconds_total"
    lab = dict(host="h2", vswitch="ovs")
    assert value(r, m, component="ovs-vswitchd", thread_class="main", **lab) == pytest.approx(1.0)
    assert value(r, m, component="ovsdb-server", thread_class="all", **lab) is None
    assert value(r, m, component="sshd", thread_class="all", **lab) == 0.0   # extra pid, unfiltered
    r = scrape(VSwitchCollector("h2", "ovs", proc=proc, hz=HZ, extra_names=["sshd"]))
    assert value(r, m, component="sshd", thread_class="all", **lab) == 0.0


def test_exited_thread_keeps_its_time_so_counters_do_not_go_down(proc):
    c = VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ)
    r = scrape(c)
    m = "vnetbench_vswitch_cpu_seconds_total"
    lab = dict(host="cn1", vswitch="ovs", component="ovs-vswitchd")
    assert value(r, m, thread_class="handler", **lab) == pytest.approx(0.6)
    # handler13 exits, handler12 runs on
    shutil.rmtree(proc / "10" / "task" / "12")
    (proc / "10" / "task" / "11" / "stat").write_text(
        STAT.format(pid=11, comm="handler12", utime=40, stime=20, start=101, ppid=1))
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
                                str(proc / "ovsdb-server.pid"), "--cpus", "0-0"])
    (proc / "ovsdb-server.pid").write_text("20\n")      # the component is named after the pidfile
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


def test_qemu_vcpu_vhost_worker_and_vhost_kernel_threads(proc):
    add_process(proc, 70, "qemu-system-x86_64", [
        (70, "qemu-system-x86", 10, 5), (71, "CPU 0/KVM", 300, 100), (72, "CPU 1/KVM", 50, 50),
        (73, "vhost-70", 40, 0), (74, "IO mon_iothread", 1, 0)])       # kernel >= 6.4 workers
    add_process(proc, 80, "qemu-kvm", [(80, "qemu-kvm", 2, 2)])
    add_process(proc, 90, "vhost-80", [(90, "vhost-80", 0, 70)], exe=False, ppid=2)  # < 6.4
    add_process(proc, 91, "vhost-999", [(91, "vhost-999", 0, 70)], exe=False, ppid=2)  # not ours
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    m, lab = "vnetbench_vswitch_cpu_seconds_total", dict(host="cn1", vswitch="ovs", component="qemu")
    assert value(r, m, thread_class="vcpu", **lab) == pytest.approx(5.0)
    assert value(r, m, thread_class="vhost", **lab) == pytest.approx(0.4)
    assert value(r, m, thread_class="emulator", **lab) == pytest.approx(0.19)
    assert value(r, m, thread_class="iothread", **lab) == pytest.approx(0.01)
    assert value(r, m, host="cn1", vswitch="ovs", component="vhost",
                 thread_class="kernel") == pytest.approx(0.7)
    assert value(r, "vnetbench_vswitch_processes", host="cn1", vswitch="ovs", component="qemu") == 2
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ, qemu=False))
    assert value(r, m, thread_class="vcpu", **lab) is None


def test_ksoftirqd_is_exported_apart_as_a_part_of_softirq(proc):
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ, cpus={0}))
    k, s = "vnetbench_ksoftirqd_cpu_seconds_total", "vnetbench_softirq_cpu_seconds_total"
    assert value(r, k, host="cn1", cpu="0") == pytest.approx(1.2)
    assert value(r, k, host="cn1", cpu="1") is None                       # CPU filter
    assert value(r, k, host="cn1", cpu="0") <= value(r, s, host="cn1", cpu="0")
    # no vSwitch component carries kernel softirq time
    comps = {x.labels["component"] for f in r.collect() for x in f.samples
             if f.name == "vnetbench_vswitch_cpu_seconds"}
    assert comps == {"ovs-vswitchd", "ovsdb-server", "contrail-vrouter-agent"}


def test_irq_time_accounting_from_config_gz(proc):
    import gzip
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    assert value(r, "vnetbench_irq_time_accounting", host="cn1") is None    # unknown
    for line, expected in (("# CONFIG_IRQ_TIME_ACCOUNTING is not set", 0),
                           ("CONFIG_IRQ_TIME_ACCOUNTING=y", 1)):
        with gzip.open(proc / "config.gz", "wt") as f:
            f.write(f"CONFIG_X=y\n{line}\n")
        r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
        assert value(r, "vnetbench_irq_time_accounting", host="cn1") == expected


def test_dpctl_show_recorded_from_a_netdev_datapath():
    from pathlib import Path

    from vnetbench_collector import datapath
    text = (Path(__file__).parents[1] / "data" / "ovs-dpctl-show.netdev.txt").read_text()
    assert datapath.parse_show(text) == [datapath.Datapath("netdev@ovs-netdev", 27, 32, 0, 32)]
    two = text + "system@ovs-system:\n  lookups: hit:1 missed:2 lost:3\n  flows: 4\n"
    assert [d.name for d in datapath.parse_show(two)] == ["netdev@ovs-netdev", "system@ovs-system"]
    assert datapath.parse_show("") == []


def test_datapath_counters_from_an_injected_query(proc):
    from vnetbench_collector import datapath
    calls = []

    def runner(command):
        calls.append(command)
        return "netdev@ovs-netdev:\n  lookups: hit:10 missed:5 lost:1\n  flows: 7\n"
    src = datapath.ovs_source("/run/x/ovs-vswitchd.ctl", runner)
    r = scrape(VSwitchCollector("h1", "ovs", proc=proc, hz=HZ, datapaths=src))
    lab = dict(host="h1", vswitch="ovs", datapath="netdev@ovs-netdev")
    m = "vnetbench_datapath_lookups_total"
    assert [value(r, m, result=x, **lab) for x in ("hit", "missed", "lost")] == [10, 5, 1]
    assert value(r, "vnetbench_datapath_flows", **lab) == 7
    assert set(calls) == {"dpctl/show"}

    now = [0.0]

    def broken(command):
        calls.append(command)
        raise FileNotFoundError("no such socket")
    calls.clear()
    src = datapath.ovs_source(None, broken, clock=lambda: now[0])
    r = scrape(VSwitchCollector("h1", "ovs", proc=proc, hz=HZ, datapaths=src))
    assert value(r, m, result="hit", **lab) is None
    src(), src()
    assert len(calls) == 1                              # not asked again at every scrape
    now[0] += datapath.RETRY_S
    src()
    assert len(calls) == 2


def test_unixctl_json_rpc_and_control_socket_of_a_pidfile(tmp_path):
    import json
    import socket
    import threading

    from vnetbench_collector import datapath
    (tmp_path / "ovs-vswitchd.pid").write_text("4242\n")
    ctl = datapath.control_socket(str(tmp_path / "ovs-vswitchd.pid"))
    assert ctl == tmp_path / "ovs-vswitchd.4242.ctl"
    assert datapath.control_socket(str(ctl)) == ctl
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(ctl))
    server.listen(1)
    got = {}

    def serve():                    # what ovs-vswitchd answers, in two chunks
        conn, _ = server.accept()
        got["request"] = json.loads(conn.recv(4096))
        reply = json.dumps({"id": 0, "error": None, "result": "netdev@ovs-netdev:\n"
                            "  lookups: hit:1 missed:2 lost:3\n  flows: 4\n"}).encode()
        conn.sendall(reply[:10])
        conn.sendall(reply[10:])
        conn.close()
    t = threading.Thread(target=serve)
    t.start()
    out = datapath.ovs_source(str(tmp_path / "ovs-vswitchd.pid"))()
    t.join()
    server.close()
    assert got["request"] == {"method": "dpctl/show", "params": [], "id": 0}
    assert out == [datapath.Datapath("netdev@ovs-netdev", 1, 2, 3, 4)]


def test_one_proc_scan_per_scrape_and_none_with_pidfiles(proc, monkeypatch):
    scans = []
    real = procfs.scan
    monkeypatch.setattr(procfs, "scan", lambda *a, **k: scans.append(1) or real(*a, **k))
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ))
    generate_latest(r)
    assert len(scans) == 1
    scans.clear()
    col = VSwitchCollector("h1", "ovs", proc=proc, hz=HZ, pid_source=lambda: [10], qemu=False)
    r = scrape(col)
    generate_latest(r)                            # the first scrape finds ksoftirqd
    generate_latest(r)
    assert len(scans) == 1
    assert value(r, "vnetbench_ksoftirqd_cpu_seconds_total", host="h1", cpu="0") == pytest.approx(1.2)
    import shutil
    shutil.rmtree(proc / "9")                   # a CPU went offline: its ksoftirqd is gone
    generate_latest(r)
    assert len(scans) == 2
    assert value(r, "vnetbench_ksoftirqd_cpu_seconds_total", host="h1", cpu="0") is None


def test_full_scan_at_most_every_rescan_s_and_early_when_a_process_is_gone(proc, monkeypatch):
    scans, now = [], [0.0]
    real = procfs.scan
    monkeypatch.setattr(procfs, "scan", lambda *a, **k: scans.append(now[0]) or real(*a, **k))
    r = scrape(VSwitchCollector("cn1", "ovs", proc=proc, hz=HZ, rescan_s=10, clock=lambda: now[0]))
    m, lab = "vnetbench_vswitch_processes", dict(host="cn1", vswitch="ovs", component="ovs-vswitchd")
    assert value(r, m, **lab) == 1
    add_process(proc, 61, "ovs-vswitchd", [(61, "ovs-vswitchd", 1, 1)], start=500)
    now[0] = 5.0
    assert value(r, m, **lab) == 1 and len(scans) == 1        # not yet: read the known pids only
    now[0] = 10.0
    assert value(r, m, **lab) == 2 and len(scans) == 2        # found by the next full scan
    import shutil
    shutil.rmtree(proc / "61")
    now[0] = 11.0
    assert value(r, m, **lab) == 1 and len(scans) == 3        # gone: rescanned at once


def test_tcg_guest_given_by_pidfile_is_qemu_and_not_data_plane(proc):
    """A libvirt guest under TCG, exported by its pidfile (the embedded testbed: no scan by
    name, which would take other users' VMs): its threads are vcpu/iothread/emulator of
    component qemu, and none of its time enters the data-plane split."""
    add_process(proc, 70, "qemu-system-x86_64", [
        (70, "qemu-system-x86", 30, 10), (71, "CPU 0/TCG", 500, 20), (72, "IO mon_iothread", 2, 0),
        (73, "call_rcu", 1, 0)])
    add_process(proc, 80, "qemu-system-x86_64", [(81, "CPU 0/TCG", 900, 0)])    # not ours
    col = VSwitchCollector("h1", "ovs", proc=proc, hz=HZ, pid_source=lambda: [10, 70], qemu=False)
    r = scrape(col)
    m, lab = "vnetbench_vswitch_cpu_seconds_total", dict(host="h1", vswitch="ovs", component="qemu")
    assert value(r, m, thread_class="vcpu", **lab) == pytest.approx(5.2)
    assert value(r, m, thread_class="iothread", **lab) == pytest.approx(0.02)
    assert value(r, m, thread_class="emulator", **lab) == pytest.approx(0.41)
    assert value(r, "vnetbench_vswitch_processes", host="h1", vswitch="ovs", component="qemu") == 1
    split = [s for f in r.collect() for s in f.samples if s.name.startswith("vnetbench_dataplane")]
    assert split and not [s for s in split if s.labels.get("component") == "qemu"]


def test_unixctl_sends_a_commands_arguments(tmp_path):
    """tnl/neigh/set's three arguments, as ovs-appctl would send them."""
    import json
    import socket
    import threading

    from vnetbench_collector import datapath
    ctl = tmp_path / "ovs-vswitchd.ctl"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(ctl))
    server.listen(1)
    got = {}

    def serve():
        conn, _ = server.accept()
        got["request"] = json.loads(conn.recv(4096))
        conn.sendall(json.dumps({"id": 0, "error": None, "result": "OK\n"}).encode())
        conn.close()
    t = threading.Thread(target=serve)
    t.start()
    out = datapath.unixctl(ctl, "tnl/neigh/set", params=("br-phy", "198.18.0.2", "02:00:00:00:00:02"))
    t.join()
    server.close()
    assert got["request"] == {"method": "tnl/neigh/set", "id": 0,
                              "params": ["br-phy", "198.18.0.2", "02:00:00:00:00:02"]}
    assert out == "OK\n"
