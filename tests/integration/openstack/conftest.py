"""The all-in-one OpenStack (tools/aio) for the tests of this directory: brought up once
per session in a private state dir, torn down at the end (tools/aio/README.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import aio_alone
from aio_capacity import handed_off_kpps
from aio_nodes import computes_wanted, layout_of, leftovers

REPO = Path(__file__).resolve().parents[3]
AIO = [sys.executable, "-m", "vnetbench.aio"]
BUSY = re.compile(r"is in use; another AIO|inside the AIO subnet")


def pytest_collection_modifyitems(config, items):
    # a test with an AIO of its own before the session's (one AIO per machine)
    aio_alone.own_aio_first(items)


@pytest.fixture(scope="session")
def aio_image(tmp_path_factory) -> Path:
    """The guest image, built here from Debian packages (vnetbench image build)."""
    from vnetbench.image import build
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vnetbench" / "image"
    out = tmp_path_factory.mktemp("aio-image")
    return build.build(out, cache, formats=("kernel", "qcow2"), flowgen=build.default_flowgen()).qcow2


@pytest.fixture(scope="session")
def aio_cloud(aio_image, tmp_path_factory, request):
    """Path of the clouds.yaml of a running all-in-one cloud (clouds vnetbench-aio, admin,
    and vnetbench-aio-demo, a project member). Its state dir is outside pytest's private
    temp tree: QEMU, running as libvirt's user, must reach the instances' disks.
    Ports and subnet: the first of 19000+100k / 198.19.(250-k).0/24 that nothing holds; one
    AIO per machine, so it first waits up to VNETBENCH_AIO_WAIT_S (300) s for another to go.
    VNETBENCH_AIO_CLOUDS=PATH uses a running AIO's clouds.yaml instead (left running).
    VNETBENCH_AIO_COMPUTES=N: its compute nodes (aio up --computes, default 2);
    VNETBENCH_AIO_RELEASE and VNETBENCH_AIO_ML2: its release and mechanism driver (aio up
    --release, --ml2; default epoxy and ovn, upstream's default driver). After
    `down`, nothing of it may be left (namespaces, links, processes, domains, its
    registration).
    It registers (vnetbench.aio.registry) in a state root of its own in the session's
    temp tree: no `vnetbench cleanup` or run listing of the tests, which use the lane's
    state root or private ones, sees it; the lane's module guard, which looks for runs in
    the temp tree (lanes.owned_run_ids), counts its objects as the session's."""
    if os.environ.get("VNETBENCH_AIO_CLOUDS"):      # a running AIO of the developer's
        request.config.stash[aio_alone.SESSION_AIO] = Path(os.environ["VNETBENCH_AIO_CLOUDS"]).parent
        yield Path(os.environ["VNETBENCH_AIO_CLOUDS"])
        return
    aio_alone.wait_for_other_aio(float(os.environ.get("VNETBENCH_AIO_WAIT_S", "300")))
    release = os.environ.get("VNETBENCH_AIO_RELEASE", "epoxy")
    ml2 = os.environ.get("VNETBENCH_AIO_ML2", "ovn")
    state = Path(tempfile.mkdtemp(prefix="vnbaio-", dir="/var/tmp"))
    registered = tmp_path_factory.mktemp("aio-registration")
    env = {**os.environ, "VNETBENCH_STATE_DIR": str(registered)}
    request.config.stash[aio_alone.SESSION_AIO] = state
    ok, lay = False, None
    try:                        # down in any case, also after up's time-out
        for slot in range(8):   # another session's AIO may hold the first ports and subnet
            argv = [*AIO, "up", "--state", str(state), "--image", str(aio_image),
                    "--port-base", str(19000 + 100 * slot), "--cidr", f"198.19.{250 - slot}.0/24",
                    "--computes", computes_wanted(), "--release", release, "--ml2", ml2,
                    # the OVS agent's packet-rate inventory: ML2/OVN has none
                    *(["--ovs-kpps", str(handed_off_kpps())] if ml2 == "ovs" else [])]
            up = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=REPO, env=env)
            if up.returncode != 2 or not BUSY.search(up.stderr):
                break
        assert up.returncode == 0, f"aio up failed (logs kept in {state}/logs):\n{up.stderr[-4000:]}"
        print(up.stderr.strip().splitlines()[-1])
        clouds = Path(up.stdout.strip().splitlines()[-1])
        lay = layout_of(clouds)
        yield clouds
        ok = True
    finally:
        down = subprocess.run([*AIO, "down", "--state", str(state)], capture_output=True,
                              text=True, timeout=300, cwd=REPO, env=env)
        del request.config.stash[aio_alone.SESSION_AIO]
        assert down.returncode == 0, f"aio down failed:\n{down.stderr[-2000:]}"
        left = leftovers(lay) if lay else []
        left += [f"registration {p}" for p in registered.iterdir()]
        assert not left, f"aio down left: {', '.join(left)}"
        if ok:          # else keep DIR/logs (all that down leaves) for the failure's story
            shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def conn(aio_cloud):
    """An openstacksdk connection to the AIO as admin (cloud vnetbench-aio)."""
    from vnetbench.testbed.openstack import cloud
    c = cloud.connect("vnetbench-aio", str(aio_cloud))
    yield c
    c.close()


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float = 30) -> None:
    import urllib.request
    deadline, last = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise AssertionError(f"{url} not ready after {timeout_s:g} s ({last})")


@pytest.fixture(scope="session")
def aio_prometheus(aio_cloud, tmp_path_factory):
    """URL of a Prometheus (1 s scrapes) of one vnetbench-collector per compute node,
    labelled with that node's host name as Nova reports it, exporting the node's own
    ovs-vswitchd and ovsdb-server (by their pidfiles: no other OVS of this machine) and its
    datapath: the compute nodes' side of a cloud, as a real deployment runs it. The nodes
    share this machine's kernel, so a CPU's softirq time is charged to the node whose
    CPUs (cpu_dedicated_set, cpu_shared_set) hold it (``--cpus``): summed over the nodes,
    nothing is counted twice. Every process is the fixture's, stopped by its pid."""
    lay = layout_of(aio_cloud)
    d = tmp_path_factory.mktemp("aio-prometheus")
    pport, targets, argvs = free_port(), [], []
    for node in lay.nodes:
        cport = free_port()
        targets.append(f"127.0.0.1:{cport}")
        cpus = ",".join(c for c in (node.cpus, node.shared_cpus) if c)
        argvs.append(([str(Path(sys.executable).parent / "vnetbench-collector"), "--host", node.host,
                       "--listen", targets[-1], "--no-qemu", "--cpus", cpus,
                       "--ovs-target", str(node.ovs_run / "ovs-vswitchd.ctl"),
                       *(a for f in ("ovs-vswitchd.pid", "ovsdb-server.pid")
                         for a in ("--pidfile", str(node.ovs_run / f)))], f"collector-{node.name}.log"))
    (d / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: vnetbench\n    static_configs: [{{targets: {targets!r}}}]\n")
    argvs.append((["prometheus", f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'tsdb'}",
                   f"--web.listen-address=127.0.0.1:{pport}"], "prometheus.log"))
    procs = []
    try:
        for argv, log in argvs:
            with open(d / log, "wb") as out:
                procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
        for t in targets:
            wait_http(f"http://{t}/metrics")
        wait_http(f"http://127.0.0.1:{pport}/-/ready")
        yield f"http://127.0.0.1:{pport}"
    finally:
        for p in procs:                 # our own processes, by their pids
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="session")
def aio_outside(aio_cloud) -> str:
    """The AIO's outside host (--outside): a namespace on its external network
    (vnetbench-public), beyond the routers' gateways."""
    import json
    from vnetbench.aio.conf import Layout
    meta = json.loads((aio_cloud.parent / "meta.json").read_text())
    return "netns:" + Layout(aio_cloud.parent, meta["run_id"]).outside_netns

