"""The libvirt backend on the embedded testbed: real QEMU guests (TCG here) booted from
the project's image, plugged into the emulated hosts' OVS and Linux bridge, reached over
SSH; the shipped Rally tasks run in them with only task arguments changed; teardown and
SIGKILL-then-cleanup leave no domain, tap, namespace or process, and spare a decoy domain
whose name looks like ours."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaks import leftovers
from vnetbench import cli
from vnetbench.rally_plugins.context import testbed_yaml as make_testbed
from vnetbench.testbed import deployment
from vnetbench.testbed.libvirt import domain as dom
from vnetbench.linux.libvirtd import connect
from vnetbench.testbed.loader import loads
from vnetbench.testbed.model import NetType, VSwitchKind
from vnetbench.traffic import ping

REPO = Path(__file__).resolve().parents[2]
VNETBENCH = str(Path(sys.executable).parent / "vnetbench")


def domains_of(run_id: str) -> list[str]:
    conn = connect()
    try:
        return [d.name() for d in conn.listAllDomains() if d.name().startswith(f"vnb-{run_id}-")]
    finally:
        conn.close()


def taps_of(run_id: str) -> list[str]:
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if run_id in line.split()[0]]


def nothing_left(run_id: str, state_dir: Path) -> dict:
    left = leftovers(run_id, state_dir / run_id)
    left.update({k: v for k, v in (("domains", domains_of(run_id)), ("taps", taps_of(run_id))) if v})
    return left


@pytest.fixture(scope="module")
def guests(rally, image, caps):
    """One ovs/vxlan testbed of four guests (a same-host and a cross-host pair) shared by
    the tests that only measure (TCG boots are slow): made in Rally's state dir so task
    files can borrow it (context arg run); torn down at the end, nothing left."""
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    mp = pytest.MonkeyPatch()
    mp.setenv("VNETBENCH_STATE_DIR", str(rally.state))
    tb = loads(make_testbed("ovs", "vxlan", None, ["same-host", "cross-host"]), source="<test>",
               online_cpus=sorted(os.sched_getaffinity(0)))
    t0 = time.monotonic()
    dep = deployment.build("libvirt", tb, image_dir=image)
    print(f"ovs/vxlan: {len(tb.vms)} guests up in {time.monotonic() - t0:.1f} s")
    try:
        yield dep
    finally:
        errors = dep.down()
        mp.undo()
    assert not errors
    assert nothing_left(dep.run_id, rally.state) == {}


def check_pairs(dep) -> None:
    """Pinning as the live domains report it; the guests' own stacks ping across the
    vSwitch both ways; a real guest kernel; TX checksum offload off."""
    tb = deployment.attach(dep.run_id).testbed
    assert len(domains_of(dep.run_id)) == len(tb.vms)
    conn = connect()
    try:
        for vm in tb.vms:
            d = conn.lookupByName(dom.Names(dep.run_id).domain(vm.name))
            assert [{c for c, on in enumerate(m) if on} for m in d.vcpuPinInfo(0)] == \
                [{c} for c in vm.cpus]
    finally:
        conn.close()
    for pair in tb.pairs:
        a, b = pair.vms
        for src, dst in ((a, b), (b, a)):
            dep.exec(src, ping.command(ping.PingParams(dep.ip(dst), count=1, reply_timeout_s=10)))
            out = dep.exec(src, ping.command(ping.PingParams(dep.ip(dst), count=5, interval_s=0.2,
                                                             reply_timeout_s=10)))
            res = ping.parse(out.stdout)
            # TCG guests starved by a loaded 2-CPU machine answer late (seconds) and may
            # drop an echo; a broken path answers none
            assert res["received"] >= 3, (pair.placement, src, dst, out.stdout, out.stderr)
        assert "cloud-amd64" in dep.exec(a, ["cat", "/proc/sys/kernel/osrelease"]).stdout
    assert "tx-checksumming: off" in dep.exec(tb.vms[0].name, ["ethtool", "-k", "eth0"]).stdout


def test_guest_pairs_on_ovs(guests):
    again = deployment.attach(guests.run_id)
    assert again.backend == "libvirt"
    check_pairs(again)


@pytest.fixture
def ssh_hypervisor(tmp_path):
    """qemu+ssh://root@127.0.0.1:PORT/system: this machine's libvirtd behind an SSH server
    the test owns (dropbear, key-only, on a free loopback port, with a key made for the
    test). It runs in a mount namespace of its own where /root is a directory of the test,
    so root's real authorized_keys and known_hosts are never read or written."""
    import socket
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    home.chmod(0o700)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (home / ".ssh" / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
    subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(tmp_path / "hostkey")], check=True,
                   capture_output=True)
    wrapper = tmp_path / "ssh"          # libvirt's ssh transport runs this as its ssh
    wrapper.write_text("#!/bin/sh\nexec ssh -o UserKnownHostsFile=/dev/null "
                       "-o StrictHostKeyChecking=no -o BatchMode=yes \"$@\"\n")
    wrapper.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", f"mount --make-rprivate / && mount --bind {home} /root && "
         f"exec dropbear -F -E -s -r {tmp_path / 'hostkey'} -p 127.0.0.1:{port} "
         f"-P {tmp_path / 'dropbear.pid'}"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield f"qemu+ssh://root@127.0.0.1:{port}/system?keyfile={key}&command={wrapper}&no_tty=1"
    server.kill()                       # our own process, by its pid
    server.wait()


def test_guest_pair_on_linux_bridge_one_host_over_qemu_ssh(state_dir, image, caps, ssh_hypervisor):
    """h1's guest through the local qemu:///system, h2's through qemu+ssh: the per-host
    URI is kept in the journal, so status and teardown reach each domain where it is."""
    if caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.FLAT):
        pytest.skip(caps.why_not(VSwitchKind.LINUXBRIDGE, NetType.FLAT))
    tb = loads(make_testbed("linuxbridge", "flat", None, ["cross-host"]), source="<test>",
               online_cpus=sorted(os.sched_getaffinity(0)))
    dep = deployment.build("libvirt", tb, image_dir=image, uris={"h2": ssh_hypervisor})
    try:
        check_pairs(dep)
        uris = {e["name"]: e["uri"] for e in dep.run.entries() if e["kind"] == "domain"}
        by_host = {vm.host: uris[dom.Names(dep.run_id).domain(vm.name)] for vm in tb.vms}
        assert by_host == {"h1": "qemu:///system", "h2": ssh_hypervisor}
        st = deployment.attach(dep.run_id).status()
        assert all(vm["present"] for vm in st["vms"])
        assert {vm["host"]: vm["uri"] for vm in st["vms"]} == by_host
    finally:
        errors = dep.down()
    assert not errors
    assert nothing_left(dep.run_id, state_dir) == {}


# shipped task files in guests, tiny: (task file, test, metric whose samples must all be
# in range). icmp-rtt borrows the shared testbed (task arg run); tcp-mss builds its own
# guests (task args backend + image): the two ways a Rally context gets guests. Every
# family runs in guests through test_compare_on_guests's comparison task, and every task
# file on namespaces in test_rally.py (five more families here cost 2.5 min of the test
# command and checked the same plumbing again). A TCP connection rides out a path still
# cold after boot (broadcast's ARP did not: 0 received cross-host once, under load 20)
OWN_GUESTS = "tcp-mss"
FAMILIES = [("icmp-rtt", "icmp_rtt", "loss_pct", (0, 34)),   # a starved guest may miss an echo
            (OWN_GUESTS, "tcp_stream", "mss_on_wire", (88, 1410))]
TINY = {"vswitch": "ovs", "network": "vxlan", "repetitions": 1, "deferred_count": 3,
        "flood_count": 30, "flood_interval_s": 0.01, "sweep_count": 5, "payloads": [64, 1400],
        "seconds": 2, "rate_pps": 200, "rates": [10, 100], "frame_sizes": [128], "trial_s": 1,
        "max_trials": 4, "measures": ["throughput"], "settings": [[4000000, 8000000]],
        "bottleneck_bps": 10000000,
        "min_gbps": 0.0001}  # TCG guests on a loaded 2-CPU machine: below 1 Mbit/s seen; flowing is the point


def test_rally_tasks_run_in_guests(rally, guests, image, tmp_path):
    """Shipped task files, unchanged, in real guests: only task arguments differ from a
    netns run (a borrowed testbed, then the context's own guests)."""
    for task, test, metric, (lo, hi) in FAMILIES:
        records = tmp_path / f"{task}.jsonl"
        # the context's own guests: the cross-host pair only (two TCG guests to boot, not
        # four); the borrowed testbed: both placements
        where = {"backend": "libvirt", "image": str(image), "placements": ["cross-host"]} \
            if task == OWN_GUESTS else {"run": guests.run_id}
        t0 = time.monotonic()
        out = rally("task", "start", "--env", "vnetbench", str(REPO / "rally-tasks" / f"{task}.yaml"),
                    "--task-args", json.dumps({**TINY, **where, "results": str(records)}))
        uuid = out.stdout.split("rally task report ")[1].split()[0]
        sla = json.loads(rally("task", "sla-check", uuid, "--json", check=False).stdout)
        assert sla and all(c["status"] == "PASS" for c in sla), (task, sla)
        recs = [json.loads(line) for line in records.read_text().splitlines()]
        print(f"{task}: {len(recs)} records in {time.monotonic() - t0:.0f} s")
        assert {r["labels"]["placement"] for r in recs} == \
            ({"cross-host"} if task == OWN_GUESTS else {"same-host", "cross-host"}), task
        assert not [r for r in recs if r["extra"].get("not_applicable")], task
        mine = [r for r in recs if r["test"] == test]
        assert mine, (task, {r["test"] for r in recs})
        for r in mine:
            values = r["samples"][metric]
            assert values and all(v is not None and lo <= v <= hi for v in values), \
                (task, r["labels"], metric, values)
    assert deployment.attach(guests.run_id)                 # borrowed, so still up
    assert [j.parent.name for j in rally.state.glob("*/journal.jsonl")] == [guests.run_id]


def test_scale_progression_in_guests(guests):
    """The scale family (issue 24) on TCG guests, through the Deployment only: steps 1 and
    2 of the guests' two pairs (same host, across hosts) released together; every step has
    every pair's result, the aggregate is their sum, the start spread is measured with the
    guests' clocks mapped onto the runner's, and each host's data-plane CPU is there. TCG
    guests are slow: the figures are what they are (flowing is the point), never
    compared with netns."""
    from vnetbench.scale import run as scale_run
    pairs = list(guests.testbed.pairs)
    t0 = time.monotonic()
    records = scale_run.run(guests, pairs, progression=[1, 2], tests=("tcp",), seconds=2)
    assert [r.labels["pairs"] for r in records] == [1, 2]
    for r in records:
        (rep,) = r.extra["repetitions"]
        assert not rep["failed"], rep["failed"]
        assert [p["pair"] for p in rep["pairs"]] == [p.name for p in pairs[:r.labels["pairs"]]]
        assert all(p["ok"] and p["gbps"] > 0 for p in rep["pairs"]), rep["pairs"]
        assert r.samples["aggregate_gbps"][0] == pytest.approx(sum(p["gbps"] for p in rep["pairs"]))
        assert r.samples["pairs_failed"] == [0]
        assert r.samples["start_spread_ms"][0] is not None and r.samples["start_spread_ms"][0] >= 0
        assert set(rep["hosts"]) == {"h1", "h2"}
        assert all(v["dataplane_pct"] is not None for v in rep["hosts"].values()), rep["hosts"]
    print(f"scale steps 1, 2 on guests: {time.monotonic() - t0:.0f} s; "
          + "; ".join(f"{r.labels['pairs']} pairs {r.samples['aggregate_gbps'][0] * 1000:.1f} Mbit/s, "
                      f"start spread {r.samples['start_spread_ms'][0]:.1f} ms" for r in records))


def test_compare_on_guests(guests, rally, tmp_path):
    """``vnetbench compare`` over the running guests (smoke profile): every family of the
    battery through the comparison task but the two test_rally_tasks_run_in_guests runs in
    these guests (ICMP RTT, TCP), the table, the reports; the testbed stays up. The
    same-host pair only: ``--placement`` holds on a borrowed testbed (it measured both
    pairs before); cross-host guests are measured through Rally by
    test_rally_tasks_run_in_guests."""
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(rally.state)}
    t0 = time.monotonic()
    # port_ready adds ports without a VM, which a libvirt testbed refuses (its ports are its
    # guests' NICs): the family is measured on the netns backend (test_port_ready)
    families = [f for f in cli.COMPARE_FAMILIES if f not in ("icmp_rtt", "tcp_stream", "port_ready")]
    done = subprocess.run([VNETBENCH, "compare", "--profile", "smoke", "--run", guests.run_id,
                           *(a for f in families for a in ("--test", f)),
                           "--no-monitor", "--placement", "same-host", "--results", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    print(f"compare --profile smoke on 4 guests: {time.monotonic() - t0:.0f} s")
    out = next(tmp_path.glob("comparison-smoke-*"))
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["test"] for r in recs} >= {"udp_stream", "broadcast", "flow_setup", "rfc2544_throughput",
                                         "udp_fairness"}
    assert not [r for r in recs if r["extra"].get("not_applicable")]
    assert all(r["labels"]["vswitch"] == "ovs" and r["labels"]["network"] == "vxlan" for r in recs)
    assert {r["labels"]["placement"] for r in recs} == {"same-host"}
    assert (out / "report.html").exists() and "ovs/vxlan" in (out / "table.txt").read_text()
    assert deployment.attach(guests.run_id).status()["vms"][0]["present"]


def test_collector_counts_qemu_threads_under_load(guests):
    """The host's collector (the argv monitor watch runs, in-process) exports its guests'
    QEMU threads by pidfile: under iperf3 between two guests of the host the vCPU
    counter moves several times faster than when idle, the emulator thread (the user-space
    virtio-net backend: no vhost-net here) faster too, and no QEMU time is data plane."""
    from vnetbench.battery.session import iperf3_server
    from vnetbench.monitor import watch
    from vnetbench.traffic import iperf3
    from vnetbench_collector.__main__ import build_registry, parser

    dep = deployment.attach(guests.run_id)
    pair = next(p for p in dep.testbed.pairs if p.placement == "same-host")
    host = dep.testbed.host(dep.testbed.vm(pair.vms[0]).host)
    argv = watch.collector_argv(dep, host, dep.run.dir / "test-collector.port")
    registry = build_registry(parser().parse_args(argv[3:]))

    def qemu():
        out = {}
        for fam in registry.collect():
            for s in fam.samples:
                if s.name == "vnetbench_vswitch_cpu_seconds_total" and s.labels["component"] == "qemu":
                    out[s.labels["thread_class"]] = s.value
                if s.name.startswith("vnetbench_dataplane"):
                    assert s.labels.get("component") != "qemu", s
        return out, time.monotonic()

    def rates(a, b):
        return {k: (b[0][k] - a[0].get(k, 0)) / (b[1] - a[1]) for k in b[0]}
    a = qemu()
    time.sleep(4)
    idle = rates(a, qemu())
    src, dst = pair.vms
    with iperf3_server(dep, dst):
        a = qemu()
        out = dep.exec(src, iperf3.client_command(iperf3.ClientParams(dest=dep.ip(dst), seconds=4)),
                       timeout=60)
        load = rates(a, qemu())
    mbps = iperf3.parse(out.stdout)["bits_per_second"] / 1e6
    print(f"QEMU CPU s/s idle {idle}, under {mbps:.0f} Mbit/s {load}")
    assert {"vcpu", "emulator"} <= set(load)
    assert load["vcpu"] > 0.2 and load["vcpu"] > 3 * idle["vcpu"], (idle, load)
    assert load["emulator"] > 1.5 * idle["emulator"], (idle, load)


def test_sigkill_during_bring_up_then_cleanup(state_dir, image, tmp_path, caps):
    if caps.why_not(VSwitchKind.OVS, NetType.VXLAN):
        pytest.skip(caps.why_not(VSwitchKind.OVS, NetType.VXLAN))
    decoy = "vnb-ffffff-same-a"          # our naming, not our run: must survive cleanup
    conn = connect()
    try:
        xml = (f"<domain type='qemu'><name>{decoy}</name><memory unit='MiB'>64</memory>"
               "<os><type arch='x86_64'>hvm</type></os></domain>")
        conn.defineXML(xml)
        f = tmp_path / "tb.yaml"
        f.write_text(make_testbed("ovs", "vxlan", None, ["cross-host"]))
        env = {**os.environ, "VNETBENCH_STATE_DIR": str(state_dir)}
        p = subprocess.Popen([VNETBENCH, "testbed", "up", str(f), "--backend", "libvirt",
                              "--image", str(image), "-q"], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0 = time.monotonic()        # wait until guests exist, then a little longer at random
        while time.monotonic() - t0 < 120 and p.poll() is None:
            journals = list(state_dir.glob("*/journal.jsonl"))
            if journals and '"domain"' in journals[0].read_text():
                break
            time.sleep(0.1)
        time.sleep(random.uniform(0, 3))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        runs = [d.name for d in state_dir.iterdir() if d.is_dir()]
        assert runs, "the bring-up left no run to clean"
        done = subprocess.run([VNETBENCH, "cleanup"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        for rid in runs:
            assert nothing_left(rid, state_dir) == {}
        assert decoy in [d.name() for d in conn.listAllDomains()]
    finally:
        try:
            conn.lookupByName(decoy).undefine()
        finally:
            conn.close()
