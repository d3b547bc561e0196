"""The openstack backend as a project member (cloud vnetbench-aio-demo: no admin role),
on the real all-in-one cloud: placement verified by hostId (Nova hides host names),
pinning unverified with a warning, the guests reached only through an SSH gateway
(ProxyJump) that the test sets up as its own host on the cloud's flat network. On the
two-node cloud the member's pair is cross-host by Shaker's way (no server groups: boot,
then pair VMs of distinct hostIds); a one-node cloud must refuse that fallback."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aio_nodes import kind_of, layout_of
from vnetbench.rally_plugins.context import testbed_yaml as make_testbed

VNETBENCH = str(Path(sys.executable).parent / "vnetbench")
MEMBER, NETWORK, FLAVOR = "vnetbench-aio-demo", "vnetbench-flat", "vnetbench-pinned"
HOST_ID = 56            # Nova's hostId: sha224 hex of project id + host name


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60, **kw)


@pytest.fixture
def member(aio_cloud, tmp_path):
    from vnetbench.testbed.openstack import cloud
    c = cloud.connect(MEMBER, str(aio_cloud))
    yield c
    c.close()


def _stacks(conn) -> set:
    return {s.name for s in conn.orchestration.stacks() if s.status != "DELETE_COMPLETE"}


@pytest.fixture
def gateway(aio_cloud, member, tmp_path):
    """An SSH gateway host: a network namespace with one leg on the cloud's flat network
    (a veth port on the AIO's provider bridge, an address below Neutron's allocation
    pool) and one towards the runner (a /30 of 198.18.255.0/24), running dropbear with
    a host key and authorized key of the test. The runner side is a mount namespace whose
    /etc/ssh/ssh_config is the test's (the gateway's identity and known host key, as a
    user's ssh configuration would say), so root's real ssh files are never read or
    written. Yields (jump spec, the gateway's flat address, argv prefix that runs a
    command as that runner)."""
    tok = secrets.token_hex(3)
    ns, flat_leg, run_leg = f"vnbgw{tok}", f"vgw{tok}f", f"vgw{tok}r"
    subnet = member.network.get_subnet(
        member.network.find_network(NETWORK, ignore_missing=False).subnet_ids[0])
    net = ipaddress.ip_network(subnet.cidr)
    gw_flat = net.network_address + 5            # the pool starts at .10 (tools/aio)
    used = _run(["ip", "-4", "-o", "addr", "show"]).stdout
    quad = next(q for q in range(4 * secrets.randbelow(60) + 4, 252, 4)
                if f" 198.18.255.{q + 1}/" not in used)
    mine, theirs = f"198.18.255.{quad + 1}", f"198.18.255.{quad + 2}"
    ovs = aio_cloud.parent / "ovs"
    vsctl = ["ovs-vsctl", f"--db=unix:{ovs / 'db.sock'}", "--timeout=20"]
    phy = next(b for b in _run([*vsctl, "list-br"]).stdout.split() if b.endswith("-phy"))
    home, gw_home = tmp_path / "runner", tmp_path / "gw-home"
    for h in (home, gw_home):
        (h / ".ssh").mkdir(parents=True)
        h.chmod(0o700)
    made, server = [], None
    try:
        _run(["ip", "netns", "add", ns])
        made.append(["ip", "netns", "del", ns])
        for leg in (flat_leg, run_leg):
            _run(["ip", "link", "add", leg, "type", "veth", "peer", "name", "eth0" if leg == flat_leg
                  else "eth1", "netns", ns])
            made.append(["ip", "link", "del", leg])
        _run([*vsctl, "add-port", phy, flat_leg, "--", "set", "interface", flat_leg,
              f"external_ids:vnetbench-test={tok}"])
        made.append([*vsctl, "--if-exists", "del-port", phy, flat_leg])
        _run(["ip", "link", "set", flat_leg, "up"])
        _run(["ip", "addr", "add", f"{mine}/30", "dev", run_leg])
        _run(["ip", "link", "set", run_leg, "up"])
        for cmd in (["ip", "addr", "add", f"{gw_flat}/{net.prefixlen}", "dev", "eth0"],
                    ["ip", "addr", "add", f"{theirs}/30", "dev", "eth1"],
                    ["ip", "link", "set", "lo", "up"], ["ip", "link", "set", "eth0", "up"],
                    ["ip", "link", "set", "eth1", "up"],
                    ["ethtool", "-K", "eth0", "tx", "off"]):     # userspace datapath: no offload
            _run(["ip", "netns", "exec", ns, *cmd])
        key = home / ".ssh" / "id_ed25519"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
        (gw_home / ".ssh" / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
        _run(["dropbearkey", "-t", "ed25519", "-f", str(tmp_path / "gw-hostkey")])
        host_pub = _run(["dropbearkey", "-y", "-f", str(tmp_path / "gw-hostkey")]).stdout
        line = next(x for x in host_pub.splitlines() if x.startswith("ssh-ed25519 "))
        (home / ".ssh" / "known_hosts").write_text(f"{theirs} {' '.join(line.split()[:2])}\n")
        (home / "ssh_config").write_text(
            f"Host {theirs}\n  IdentityFile {key}\n  UserKnownHostsFile {home / '.ssh' / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n")
        log = open(tmp_path / "gateway.log", "w")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "-m", "sh", "-c",
             f"mount --make-rprivate / && mount --bind {gw_home} /root && exec dropbear -F -E -s "
             f"-r {tmp_path / 'gw-hostkey'} -p {theirs}:22 -P {tmp_path / 'gw-dropbear.pid'}"], stdout=log, stderr=subprocess.STDOUT)
        as_runner = ["unshare", "-m", "sh", "-c",
                     f'mount --make-rprivate / && mount --bind {home / "ssh_config"} /etc/ssh/ssh_config && '
                     'exec "$@"', "runner"]
        deadline = time.monotonic() + 20
        while subprocess.run([*as_runner, "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3",
                              f"root@{theirs}", "true"], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, (tmp_path / "gateway.log").read_text()
            time.sleep(0.5)
        yield f"root@{theirs}", str(gw_flat), as_runner
    finally:
        if server:
            server.kill()               # our own process, by its pid
            server.wait()
        for undo in reversed(made):
            subprocess.run(undo, capture_output=True, timeout=60)


def _up(as_runner, env, tmp_path, placement: str, *extra, kind: str = "ovs") -> subprocess.CompletedProcess:
    tb = tmp_path / f"{placement}.yaml"
    tb.write_text(make_testbed(kind, "flat", None, [placement]))
    return subprocess.run([*as_runner, VNETBENCH, "testbed", "up", str(tb), "--backend", "openstack",
                           "--cloud", MEMBER, "--existing-network", NETWORK, "--flavor", FLAVOR,
                           "--json", *extra], env=env, capture_output=True, text=True, timeout=1200)


def test_member_pair_by_host_id_through_an_ssh_gateway(aio_cloud, member, gateway, tmp_path):
    """Two nodes: cross-host without server groups (the hostId fallback: Nova's scheduler
    put them apart, each node has one dedicated CPU); one node: same-host in a group."""
    jump, gw_flat, as_runner = gateway
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(aio_cloud),
           "VNETBENCH_STATE_DIR": str(tmp_path / "state")}
    cross = layout_of(aio_cloud).computes >= 2
    pre = "cross" if cross else "same"
    t0 = time.monotonic()
    done = _up(as_runner, env, tmp_path, f"{pre}-host", "--gateway", jump,
               *(["--no-server-groups"] if cross else []), kind=kind_of(aio_cloud))
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"member pair through the gateway up in {time.monotonic() - t0:.0f} s:", done.stderr)
    st = json.loads(done.stdout)
    rid = st["run_id"]

    def vnetbench(*args, timeout=120):
        return subprocess.run([*as_runner, VNETBENCH, *args], env=env, capture_output=True,
                              text=True, timeout=timeout)
    try:
        assert f"vnb-{rid}" in _stacks(member)
        # no admin: the pair's placement from hostId, pinning shown unverified
        assert st["placement"]["placement_by"] == "hostId"
        ids = st["placement"]["hosts"]
        assert len(ids[f"{pre}-a"]) == HOST_ID and (ids[f"{pre}-a"] == ids[f"{pre}-b"]) != cross, ids
        assert st["pinning"] == {}
        # the shared network is the admin's: Neutron's MACs and port security stay
        assert any(w.startswith(f"network {NETWORK} is not the project's") for w in st["warnings"])
        ports = {p.mac_address: p for p in member.network.ports(tags=f"run-{rid}")}
        assert {vm["nics"][0]["mac"] for vm in st["vms"]} == set(ports)
        assert all(p.is_port_security_enabled for p in ports.values())
        assert sorted(w.split(":")[0] for w in st["warnings"] if "CPU pinning unverified" in w) \
            == [f"{pre}-a", f"{pre}-b"], st["warnings"]
        # the guests see their SSH client at the gateway's address, not at the runner's
        seen = vnetbench("testbed", "exec", "--run", rid, f"{pre}-a", "--", "sh", "-c",
                         "echo $SSH_CONNECTION")
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.split()[0] == gw_flat, seen.stdout
        b_ip = st["vms"][1]["nics"][0]["ip"]
        ping = vnetbench("testbed", "exec", "--run", rid, f"{pre}-a", "--", "ping", "-c", "3",
                         "-W", "5", b_ip)
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
    finally:
        t0 = time.monotonic()
        down = vnetbench("testbed", "down", "--run", rid, timeout=900)
        print(f"down in {time.monotonic() - t0:.0f} s")
    assert down.returncode == 0, down.stderr
    assert f"vnb-{rid}" not in _stacks(member)


def test_member_cross_host_fallback_refused_on_one_node(aio_cloud, member, tmp_path):
    """Shaker's way (no server groups: boot, then pair VMs of distinct hostIds) with the
    real hostIds of a one-node cloud: the bring-up fails with the reason and deletes the
    stack it made. (On two nodes the fallback's other branch runs: the pair above.)"""
    if layout_of(aio_cloud).computes >= 2:
        pytest.skip("needs a one-node cloud (VNETBENCH_AIO_COMPUTES=1): on this one the "
                    "scheduler puts the two pinned guests on two nodes, and the member's pair "
                    "test takes that fallback")
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(aio_cloud),
           "VNETBENCH_STATE_DIR": str(tmp_path / "state")}
    before = _stacks(member)
    done = _up([], env, tmp_path, "cross-host", "--no-server-groups", kind=kind_of(aio_cloud))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "only 0 of 1 cross-host pairs landed on distinct hosts" in done.stderr, done.stderr
    assert _stacks(member) == before
    state = tmp_path / "state"
    assert not [d for d in state.iterdir() if d.is_dir()] if state.exists() else True
