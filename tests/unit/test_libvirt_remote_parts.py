"""The remote-hypervisor parts that need no hypervisor: which URIs are another machine,
what SSH to it and through it looks like, the run's bridge names and the NICs libvirt
plugs itself."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.remote import Hypervisor, is_remote
from vnetbench.testbed.libvirt.remote_deployment import bridge_names
from vnetbench.testbed.loader import loads


@pytest.mark.parametrize("uri,remote", [
    ("qemu:///system", False), ("qemu+ssh://root@localhost/system", False),
    ("qemu+ssh://root@127.0.0.1:2222/system?keyfile=/k", False), ("qemu+ssh://root@[::1]/system", False),
    ("qemu+ssh://root@198.19.254.2/system", True), ("qemu+ssh://kvm7.example.org/system", True),
    ("qemu+tcp://198.19.254.2/system", False)])
def test_which_uris_are_another_machine(uri, remote):
    assert is_remote(uri) is remote


def test_hypervisor_ssh_takes_the_uris_user_port_and_key():
    hv = Hypervisor.of("qemu+ssh://admin@198.19.254.2:2222/system?keyfile=/k/id&no_tty=1")
    assert (hv.user, hv.host, hv.port, hv.key) == ("admin", "198.19.254.2", 2222, Path("/k/id"))
    argv = hv.ssh(Path("/tmp/m")).argv(["ovs-vsctl", "list-br"])
    assert argv[0] == "ssh" and "admin@198.19.254.2" in argv and "Port=2222" in argv
    assert argv[argv.index("-i") + 1] == "/k/id" and argv[-1] == "ovs-vsctl list-br"
    proxy = hv.proxy()
    assert proxy[-3:] == ("-W", "[%h]:%p", "admin@198.19.254.2") and "/k/id" in proxy
    assert not any(o.startswith("ControlPath") for o in proxy)
    assert "-i" not in Hypervisor.of("qemu+ssh://h.example.org/system").ssh(Path("/tmp/m")).argv(["true"])


def test_bridge_names_fit_ifnamsiz_and_carry_the_run():
    for kind in ("ovs", "linuxbridge"):
        tb = loads(f"vswitch: {kind}\nnetwork: {{type: flat}}\nhosts: [{{name: k}}]\n"
                   "vnets: [{name: a, cidr: 198.19.1.0/24}, {name: b, cidr: 198.19.2.0/24}]\n"
                   "pairs: [{name: pa, placement: same-host, vnet: a}, {name: pb, placement: same-host, vnet: b}]\n",
                   source="<t>", online_cpus=[0, 1])
        names = bridge_names("abc123", tb)
        every = [n for n, _ in names["linux"]] + ([names["ovs"]] if names["ovs"] else [])
        assert all(len(n) <= 15 and "abc123" in n for n in every)
        assert len(set(every)) == len(every)
        assert (names["ovs"] is None) == (kind == "linuxbridge")
        assert len(names["linux"]) == (3 if kind == "linuxbridge" else 1)     # + management


def test_nics_libvirt_plugs_itself():
    ovs = ET.fromstring(dom.nic_xml("vtx-0-0", "fa:16:3e:00:00:01", dom.Plug("vnbabc", ovs=True, vlan=2)))
    assert ovs.get("type") == "bridge" and ovs.find("source").get("bridge") == "vnbabc"
    assert ovs.find("virtualport").get("type") == "openvswitch"
    assert ovs.find("vlan/tag").get("id") == "2" and ovs.find("target").get("dev") == "vtx-0-0"
    lb = ET.fromstring(dom.nic_xml("vtx-0-1", "fa:16:3e:00:00:02", dom.Plug("vnbabcv0")))
    assert lb.find("virtualport") is None and lb.find("vlan") is None
    eth = ET.fromstring(dom.nic_xml("vtx-0-2", "fa:16:3e:00:00:03"))
    assert eth.get("type") == "ethernet" and eth.find("target").get("managed") == "no"


# -- the hypervisor's collector -----------------------------------------------------------------

def test_remote_collector_counts_the_hosts_vswitch_and_only_the_runs_guests():
    from vnetbench.testbed.libvirt.remote_collector import OVS_PIDFILES, collector_argv
    host = loads("vswitch: ovs\nnetwork: {type: flat}\nhosts: [{name: kvm1, cpus: [0, 1]}]\n"
                 "pairs: [{name: p, placement: same-host}]\n", source="<t>", online_cpus=[0, 1]).hosts[0]
    argv = collector_argv("/var/tmp/vnb-abc123/collector.pyz", host, "ovs", ["vnb-abc123-a"], "/x.port")
    assert argv[:2] == ["python3", "/var/tmp/vnb-abc123/collector.pyz"]
    assert argv[argv.index("--host") + 1] == "kvm1" and argv[argv.index("--cpus") + 1] == "0,1"
    assert argv[argv.index("--listen") + 1] == "127.0.0.1:0"        # nothing on the host's network
    pidfiles = [a.split("=", 1)[1] for a in argv if a.startswith("--pidfile=")]
    assert pidfiles == [*OVS_PIDFILES, "/run/libvirt/qemu/vnb-abc123-a.pid"]
    lb = collector_argv("/p", host, "linuxbridge", [], "/x.port")
    assert "--no-datapath" in lb and "--no-processes" in lb and not [a for a in lb if a.startswith("--pidfile")]


def test_the_collector_zipapp_runs_without_the_venv(tmp_path):
    import subprocess
    import zipfile
    from vnetbench.testbed.libvirt.remote_collector import zipapp_of
    pyz = zipapp_of(tmp_path / "c.pyz")
    names = zipfile.ZipFile(pyz).namelist()
    assert "vnetbench_collector/__main__.py" in names and "prometheus_client/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n]
    done = subprocess.run(["/usr/bin/python3", "-I", str(pyz), "--version"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and "vnetbench-collector" in done.stdout + done.stderr


def _fake_proc(root, pid, fds, tcp_lines):
    (root / str(pid) / "fd").mkdir(parents=True)
    (root / str(pid) / "net").mkdir()
    for i, target in enumerate(fds):
        (root / str(pid) / "fd" / str(i)).symlink_to(target)
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (root / str(pid) / "net" / "tcp").write_text(head + "".join(tcp_lines))


def test_the_relays_port_is_read_from_its_own_listening_socket(tmp_path):
    from vnetbench.testbed.libvirt.remote_collector import listening_port
    row = "   {n}: 0100007F:{port:04X} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000     0        0 {ino} 1\n"
    _fake_proc(tmp_path, 7, ["/dev/null", "socket:[555]"], [
        row.format(n=0, port=9090, st="0A", ino=111),        # someone else's listener
        row.format(n=1, port=40000, st="01", ino=555),       # ours, but established
        row.format(n=2, port=41234, st="0A", ino=555)])      # ours, listening
    assert listening_port(7, tmp_path) == 41234
    _fake_proc(tmp_path, 8, ["/dev/null"], [row.format(n=0, port=9090, st="0A", ino=111)])
    assert listening_port(8, tmp_path) is None
    assert listening_port(9, tmp_path) is None                # gone


def test_cleanup_never_kills_on_a_hypervisor_outside_the_runs_directory():
    from vnetbench.state import Run
    from vnetbench.testbed.libvirt.undo import undo_remote_process
    run = Run("abc123", Path("/nonexistent"))
    for mark in ("/usr/bin/python3", "/var/tmp/vnb-ffffff/collector.pyz", "/var/tmp/vnb-abc123x/c",
                 "/var/tmp/vnb-abc123/c' ; reboot '"):
        with pytest.raises(ValueError, match="left alone"):
            undo_remote_process(run, {"uri": "qemu+ssh://h/system", "mark": mark, "pidfile": "/p"})


def test_remote_cpu_window_reads_the_runs_own_series_from_the_monitor():
    from vnetbench import promcpu
    seen = {}

    def fetch(url, promql, at):
        seen.update(url=url, promql=promql)
        return [{"metric": {"host": "kvm1"}, "value": [at, "1.0"]}]
    clock = __import__("itertools").count(100, 4).__next__
    src = {"monitor": "m1", "prometheus": "", "hosts": ["kvm1"], "labels": {"run_id": "abc123"}, "why_not": "x"}
    with promcpu.Window(src, fetch, clock) as w:
        pass
    assert 'host=~"kvm1",run_id="abc123"' in seen["promql"] and w.result["hosts"] == {"kvm1": 25.0}
    with promcpu.Window({**src, "monitor": ""}) as w:         # not watched: says why, no figure
        pass
    assert w.metrics() == {} and w.result == {"method": "n/a", "reason": "x"}


def test_a_hypervisors_host_key_is_checked_as_libvirt_does():
    def trust(uri):
        argv = Hypervisor.of(uri).ssh(Path("/tmp/m")).argv(["true"])
        return {o.split("=", 1)[0]: o.split("=", 1)[1] for o in argv if "=" in o and
                o.split("=", 1)[0] in ("StrictHostKeyChecking", "UserKnownHostsFile")}
    assert trust("qemu+ssh://h.example.org/system") == {
        "StrictHostKeyChecking": "yes", "UserKnownHostsFile": str(Path.home() / ".ssh/known_hosts")}
    assert trust("qemu+ssh://h/system?known_hosts=/etc/vnb/kh") == {
        "StrictHostKeyChecking": "yes", "UserKnownHostsFile": "/etc/vnb/kh"}
    assert trust("qemu+ssh://h/system?no_verify=1")["StrictHostKeyChecking"] == "no"
    proxy = Hypervisor.of("qemu+ssh://h/system?known_hosts=/kh").proxy()   # the guests' way in too
    assert "StrictHostKeyChecking=yes" in proxy and "UserKnownHostsFile=/kh" in proxy
    line = Hypervisor.of("qemu+ssh://root@h:2222/system?known_hosts=/kh")._untrusted()
    assert "/kh" in line and "ssh-keyscan -p 2222 h" in line and "[h]:2222" in line
