"""Guests on a remote KVM host: the "remote host" is a network namespace with a mount
namespace of its own (its own /run, /var/lib/libvirt, /var/tmp, /root), running its own
sshd (dropbear), libvirtd and Open vSwitch, reached only at 198.19.254.x over SSH and
qemu+ssh://. It shares no socket, no bridge and no run directory with the runner: the
guests' taps, bridges, image and consoles must all be made there, and removed there."""

import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaks import leftovers
from vnetbench.errors import VnetbenchError
from vnetbench.testbed import deployment
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.libvirt.remote_deployment import bridge_names
from vnetbench.testbed.loader import loads
from vnetbench.traffic import ping

VNETBENCH = str(Path(sys.executable).parent / "vnetbench")

START = r"""set -e
D={d}
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mkdir -p /run/libvirt /run/openvswitch /run/lock
for x in lib:/var/lib/libvirt log:/var/log/libvirt cache:/var/cache/libvirt vartmp:/var/tmp home:/root; do
  mount --bind $D/${{x%%:*}} ${{x#*:}}
done
ip link set lo up
ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server --remote=punix:/run/openvswitch/db.sock --pidfile=/run/openvswitch/ovsdb-server.pid --detach --log-file=$D/ovsdb.log $D/conf.db
ovs-vsctl --no-wait init
ovs-vswitchd --pidfile=/run/openvswitch/ovs-vswitchd.pid --detach --log-file=$D/vswitchd.log
cp /run/openvswitch/ovsdb-server.pid $D/ovsdb.pid; cp /run/openvswitch/ovs-vswitchd.pid $D/vswitchd.pid
ovs-vsctl add-br br-int -- set bridge br-int datapath_type=netdev
virtlogd -d -p $D/virtlogd.pid
libvirtd -d -p $D/libvirtd.pid
dropbear -s -r $D/hostkey -p {addr}:22 -P $D/dropbear.pid
echo ready
exec sleep infinity
"""


@pytest.fixture(scope="module")
def hypervisor(tmp_path_factory):
    """qemu+ssh://root@198.19.254.N/system?keyfile=..: a second machine, as far as the
    runner can tell. Everything it is (namespace, veth, daemons) is the fixture's own and
    stopped by pid."""
    d = tmp_path_factory.mktemp("hv")
    for sub in ("lib", "log", "cache", "vartmp", "home/.ssh"):
        (d / sub).mkdir(parents=True)
    (d / "home").chmod(0o700)
    tag = "%04x" % random.randrange(1 << 16)
    ns, veth = f"vnbt-hv{tag}", f"vnbthv{tag}"
    k = random.randrange(1, 63)
    runner, addr = f"198.19.254.{4 * k + 1}", f"198.19.254.{4 * k + 2}"
    key = d / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (d / "home/.ssh/authorized_keys").write_text(key.with_suffix(".pub").read_text())
    subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(d / "hostkey")], check=True,
                   capture_output=True)
    known = d / "known_hosts"    # the host's key as its owner would hand it over
    known.write_text(f"{addr} {_public_host_key(d / 'hostkey')}\n")
    wrapper = d / "ssh"          # libvirt's ssh transport checks the key against the same file
    wrapper.write_text(f"#!/bin/sh\nexec ssh -o UserKnownHostsFile={known} "
                       "-o StrictHostKeyChecking=yes -o BatchMode=yes \"$@\"\n")
    wrapper.chmod(0o755)
    sh = lambda *a: subprocess.run(a, check=True, capture_output=True)    # noqa: E731
    sh("ip", "netns", "add", ns)
    holder = None
    try:
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", f"{runner}/30", "dev", veth)
        sh("ip", "link", "set", veth, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/30", "dev", "eth0")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        (d / "start.sh").write_text(START.format(d=d, addr=addr))
        holder = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "-m", "sh", str(d / "start.sh")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = holder.stdout.readline()
        assert line.strip() == "ready", holder.stderr.read()
        uri = (f"qemu+ssh://root@{addr}/system?keyfile={key}&known_hosts={known}"
               f"&command={wrapper}&no_tty=1")
        yield {"uri": uri, "addr": addr, "key": key, "ns": ns, "holder": holder.pid, "known": known}
    finally:
        if holder is not None:
            _destroy_domains(holder.pid)
            for daemon in ("dropbear", "libvirtd", "virtlogd", "vswitchd", "ovsdb"):
                pidfile = d / f"{daemon}.pid"
                if pidfile.exists():
                    try:
                        os.kill(int(pidfile.read_text().split()[0]), 15)
                    except (ProcessLookupError, ValueError):
                        pass
            holder.kill()
            holder.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _public_host_key(path: Path) -> str:
    """"TYPE BASE64" of a dropbear host key."""
    out = subprocess.run(["dropbearkey", "-y", "-f", str(path)], check=True, capture_output=True,
                         text=True).stdout
    return " ".join(next(line for line in out.splitlines() if line.startswith("ssh-")).split()[:2])


def _destroy_domains(holder_pid: int) -> None:
    """Guests a failed test left on the fixture's own libvirtd (all of them are tests')."""
    virsh = ["nsenter", "-t", str(holder_pid), "-m", "-n", "virsh", "-c", "qemu:///system"]
    names = subprocess.run([*virsh, "list", "--name"], capture_output=True, text=True).stdout.split()
    for name in names:
        subprocess.run([*virsh, "destroy", name], capture_output=True)


def on_hypervisor(hv, command: str) -> str:
    return subprocess.run(
        ["ssh", "-i", str(hv["key"]), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", f"UserKnownHostsFile={hv['known']}", "-o", "LogLevel=ERROR", f"root@{hv['addr']}", command],
        capture_output=True, text=True, timeout=30, check=True).stdout


TESTBED = """name: remote-{kind}
vswitch: {kind}
network: {{type: flat}}
hosts: [{{name: kvm1}}]
pairs:
  - {{name: p, placement: same-host}}
"""


@pytest.mark.parametrize("kind", ["ovs", "linuxbridge"])
def test_guest_pair_on_a_remote_hypervisors_own_vswitch(state_dir, image, hypervisor, kind, tmp_path):
    """A same-host pair on the hypervisor's own OVS (access VLAN per vnet) or Linux bridge:
    taps there and not here, SSH through the hypervisor, pings, a capture on the
    hypervisor's tap; down removes domains, bridges and files there and the run here."""
    tb = loads(TESTBED.format(kind=kind), source="<test>", online_cpus=sorted(os.sched_getaffinity(0)))
    dep = deployment.build("libvirt", tb, image_dir=image, uris=hypervisor["uri"])
    rid = dep.run_id
    bridges = bridge_names(rid, tb)
    try:
        # the guests' taps exist on the hypervisor, in its own vSwitch, and not here
        taps = [dom.Names(rid).tap(i, 0) for i in range(2)]
        if kind == "ovs":
            ports = on_hypervisor(hypervisor, f"ovs-vsctl list-ports {bridges['ovs']}").split()
            assert sorted(ports) == sorted(taps)
            assert on_hypervisor(hypervisor, f"ovs-vsctl get port {taps[0]} tag").strip() == "1"
        else:
            members = on_hypervisor(hypervisor, f"ls /sys/class/net/{bridges['linux'][0][0]}/brif").split()
            assert sorted(members) == sorted(taps)
        assert not [t for t in taps if Path(f"/sys/class/net/{t}").exists()]
        # the command channel through the hypervisor; the pair reaches each other
        a, b = [v.name for v in tb.vms]
        echoes = ping.command(ping.PingParams(dep.ip(b), count=5, interval_s=0.2, reply_timeout_s=10))
        res = None
        for _ in range(3):
            res = ping.parse(dep.exec(a, echoes, timeout=30).stdout)
            if res["received"] >= 3:
                break
        assert res["received"] >= 3, res
        # a host-side capture on the hypervisor, on the sender's tap
        host, port = dep.vm_port(a)
        cap = dep.host_popen(host, ["tcpdump", "-l", "-n", "-c", "3", "-i", port, "icmp"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(2)
        dep.exec(a, echoes, timeout=30)
        out, _ = cap.communicate(timeout=30)
        assert out.count("ICMP echo request") >= 1, out
        if kind == "ovs":
            _host_cpu_from_the_hypervisors_collector(dep, tmp_path, hypervisor)
        st = deployment.attach(rid).status()
        assert st["remote"] and all(vm["present"] and vm["uri"] == hypervisor["uri"] for vm in st["vms"])
        # a decoy: the run's bridge names, another run's stamp; cleanup must leave it
        decoy = _decoy(hypervisor, kind, bridges)
    finally:
        if kind == "ovs":        # the journal alone, as after a crash: cleanup reaches the host
            env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir)}
            done = subprocess.run([VNETBENCH, "cleanup", "--run", rid], env=env, capture_output=True,
                                  text=True, timeout=120)
            errors = [] if done.returncode == 0 else [done.stdout + done.stderr]
        else:
            errors = dep.down()
    assert not errors
    assert leftovers(rid, state_dir / rid) == {}
    left = on_hypervisor(hypervisor, "ls /sys/class/net /var/tmp; ovs-vsctl list-br")
    assert decoy in left.split()                  # named like ours, stamped for another run
    assert rid not in left.replace(decoy, ""), left
    assert f"vnb-{rid}" not in on_hypervisor(hypervisor, "ps -eo args")
    on_hypervisor(hypervisor, f"ovs-vsctl --if-exists del-br {decoy}; ip link del {decoy} 2>/dev/null; true")


def _host_cpu_from_the_hypervisors_collector(dep, tmp_path, hv) -> None:
    """Watched, the run's collector runs on the hypervisor (not here) and the monitor's
    Prometheus scrapes it through the run's SSH connection: a TCP window's host CPU is
    that host's, from Prometheus, and its QEMU threads (by libvirt's pidfiles there)
    are counted. The monitor goes down here; the collector and relay go with the run."""
    from vnetbench import cpu
    from vnetbench.battery.session import iperf3_server
    from vnetbench.monitor import server, watch
    from vnetbench.traffic import iperf3

    mon = server.up(tmp_path / "prometheus")
    try:
        targets = watch.watch(dep, mon)
        assert len(targets) == 1 and targets[0].startswith("127.0.0.1:")
        ps = on_hypervisor(hv, "ps -eo args")
        assert f"/var/tmp/vnb-{dep.run_id}/collector.pyz" in ps          # there ...
        assert not Path(f"/var/tmp/vnb-{dep.run_id}").exists()                 # ... not here
        a, b = [v.name for v in dep.testbed.vms]
        with iperf3_server(dep, b):
            with cpu.Window(dep) as w:
                out = dep.exec(a, iperf3.client_command(iperf3.ClientParams(dest=dep.ip(b), seconds=4)),
                               timeout=60)
                time.sleep(2)                   # the window's end reaches Prometheus's next scrape
        mbps = iperf3.parse(out.stdout)["bits_per_second"] / 1e6
        print(f"remote host CPU over a {mbps:.0f} Mbit/s window: {w.result}")
        assert w.result["method"] == "prometheus", w.result
        assert set(w.result["hosts"]) == {"kvm1"} and w.result["hosts"]["kvm1"] > 0, w.result
        assert w.metrics()["cpu_pct"] > 0
        qemu = mon.query('sum(increase(vnetbench_vswitch_cpu_seconds_total{host="kvm1",'
                         f'component="qemu",run_id="{dep.run_id}"}}[30s]))')
        assert qemu and float(qemu[0]["value"][1]) > 0, qemu      # the guests' QEMU, there
    finally:
        mon.down()


def _decoy(hv, kind, bridges) -> str:
    """A bridge like the run's (name + 'x') stamped for run ffffff."""
    if kind == "ovs":
        name = bridges["ovs"] + "x"
        on_hypervisor(hv, f"ovs-vsctl add-br {name} -- set bridge {name} datapath_type=netdev "
                      "external_ids:vnetbench-run=ffffff")
    else:
        name = bridges["linux"][0][0] + "x"
        on_hypervisor(hv, f"ip link add {name} type bridge && ip link set {name} alias "
                      f"'vnetbench run=ffffff decoy'")
    return name


def test_remote_testbed_with_two_hosts_is_refused_before_anything_is_made(state_dir, image, hypervisor):
    tb = loads(TESTBED.format(kind="ovs").replace("[{name: kvm1}]", "[{name: kvm1}, {name: kvm2}]"),
               source="<test>", online_cpus=sorted(os.sched_getaffinity(0)))
    with pytest.raises(VnetbenchError, match="one host for now"):
        deployment.build("libvirt", tb, image_dir=image, uris=hypervisor["uri"])
    assert not state_dir.exists() or not list(state_dir.iterdir())
    assert "vnb" not in shlex.join(on_hypervisor(hypervisor, "ls /var/tmp; ip -br link").split())


@pytest.mark.parametrize("keys", ["another", "none"])
def test_an_unknown_or_changed_host_key_is_refused_before_anything_is_made(state_dir, image, hypervisor,
                                                                          tmp_path, keys):
    """The hypervisor's key is checked against known_hosts (the URI's, else the user's):
    a host whose key differs from the one on file, or is not on file, is refused in one
    line naming the host, the file and the fix, before any run, file or bridge exists."""
    known = tmp_path / "known_hosts"
    if keys == "another":
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
        known.write_text(f"{hypervisor['addr']} {(tmp_path / 'k.pub').read_text()}")
    else:
        known.write_text("")
    uri = hypervisor["uri"].replace(f"known_hosts={hypervisor['known']}", f"known_hosts={known}")
    tb = loads(TESTBED.format(kind="ovs"), source="<test>", online_cpus=sorted(os.sched_getaffinity(0)))
    with pytest.raises(VnetbenchError) as err:
        deployment.build("libvirt", tb, image_dir=image, uris=uri)
    line = str(err.value)
    assert "\n" not in line and hypervisor["addr"] in line and str(known) in line and "ssh-keyscan" in line
    assert not state_dir.exists() or not list(state_dir.iterdir())
    assert "vnb" not in shlex.join(on_hypervisor(hypervisor, "ls /var/tmp; ip -br link").split())
