"""Bring the all-in-one cloud up and down: MariaDB, RabbitMQ and an Open vSwitch instance of
its own, then Keystone, Glance, Placement, Nova, Neutron (ML2/OVS, netdev datapath) and
Heat from Debian's packages, one worker each, every daemon started here (no systemd) with
configuration written into the state dir — nothing under /etc is changed.

``Aio`` is the cloud's life (its state dir, lock, journal; ``up``'s steps in order,
``status``, ``down``); what it brings up is in three parts it composes: ``nodes`` (the
compute nodes and their Open vSwitch instances), ``services`` (the databases, the message
bus and the OpenStack daemons) and ``resources`` (what is made through the APIs)."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import socket
import time
from pathlib import Path

from vnetbench.aio import conf, release, rootbuild, rootcache
from vnetbench.aio.conf import Layout
from vnetbench.aio.nodes import OVS_DAEMONS, Nodes
from vnetbench.aio.ovn import Ovn
from vnetbench.aio.procs import Daemons, Journal, alive, command, port_free, stop, wait_port
from vnetbench.aio.resources import Resources
from vnetbench.aio.rootexec import RootExec
from vnetbench.aio.services import Services
from vnetbench.errors import PrerequisiteError, VnetbenchError
from vnetbench.linux import libvirtd, proc
from vnetbench.state import new_run_id


def default_state() -> Path:
    return Path(os.environ.get("VNETBENCH_STATE_DIR") or "/run/vnetbench") / "aio"


def owned_meta(state: Path) -> dict:
    """The meta.json of the AIO in STATE, or {} when its journal lists nothing: a meta.json
    without a journal describes no AIO (`up` died before its first resource, or `down`
    finished), so neither its run id nor its registration is anyone's any more."""
    if not Journal(state / "journal.jsonl").entries():
        return {}
    try:
        meta = json.loads((state / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


class Aio(Nodes, Ovn, Services, Resources):
    """One all-in-one cloud, owned through its state dir."""

    def __init__(self, state: Path, port_base: int = 19000, cidr: str = "198.19.250.0/24",
                 cpus: str = "0-1", shared_cpus: str = "", ovs_kpps: int | None = None,
                 computes: int = 1, release: str = "zed", ml2: str = "ovs"):
        self.state = state.resolve()
        self.journal = Journal(self.state / "journal.jsonl")
        meta = owned_meta(self.state)
        # a new AIO's run id is one no run of vnetbench's state root has: it registers there
        # under it (vnetbench.aio.registry), and its names carry it
        run_id = meta.get("run_id") or new_run_id()
        self.lay = Layout(self.state, run_id, int(meta.get("port_base", port_base)),
                          meta.get("cidr", cidr), host=meta.get("host", socket.gethostname()),
                          cpus=meta.get("cpus", cpus), shared_cpus=meta.get("shared_cpus", shared_cpus),
                          ovs_kpps=meta.get("ovs_kpps", ovs_kpps),
                          computes=int(meta.get("computes", computes)),
                          # an AIO from before releases were chosen is Zed's, ML2/OVS
                          release=meta.get("release", "zed" if meta else release),
                          ml2=meta.get("ml2", "ovs" if meta else ml2))
        root = meta.get("root")
        self.rx = RootExec(Path(root) if root else None, self.state, self.lay.hosts_file)
        self.daemons = Daemons(self.journal, self.lay.logs, str(self.state))
        self.timings: dict[str, float] = {}

    # --- state ---------------------------------------------------------------------------
    @property
    def registration(self) -> Path | None:
        """The run directory that registers this AIO in a vnetbench state root, if any."""
        path = owned_meta(self.state).get("registration")
        return Path(path) if isinstance(path, str) else None

    @contextlib.contextmanager
    def _locked(self):
        self.state.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise VnetbenchError(f"aio: {self.state} is in use by another aio command") from None
        try:
            yield
        finally:
            os.close(fd)

    def processes(self) -> list[dict]:
        return [e for e in self.journal.entries() if e["kind"] == "process"]

    def current(self) -> list[dict]:
        """The latest process of each name (a restarted daemon's first one is history)."""
        return list({e["name"]: e for e in self.processes()}.values())

    @property
    def clouds_yaml(self) -> Path:
        return self.state / "clouds.yaml"

    # --- up ------------------------------------------------------------------------------
    def up(self, image: Path, progress=print, registration: Path | None = None) -> Path:
        """Bring the AIO up; REGISTRATION (the run directory registering it, made before
        this is called) goes into its meta.json, so `down` removes it last."""
        with self._locked():
            if self.journal.entries():
                if self._healthy():
                    progress(f"already up ({self.state})")
                    return self.clouds_yaml
                raise VnetbenchError(f"aio: {self.state} holds a partly-up or stopped AIO; run "
                                     f"'tools/aio/aio down --state {self.state}' first")
            self._preflight(image)
            root = self._root(progress)
            self.rx = RootExec(root, self.state, self.lay.hosts_file)
            self.state.chmod(0o755)     # QEMU (libvirt's user) reaches the instances' disks
            (self.state / "meta.json").write_text(json.dumps(
                {"run_id": self.lay.run_id, "port_base": self.lay.port_base,
                 "cidr": self.lay.cidr, "host": self.lay.host, "cpus": self.lay.cpus,
                 "shared_cpus": self.lay.shared_cpus, "ovs_kpps": self.lay.ovs_kpps,
                 "computes": self.lay.computes, "release": self.lay.release, "ml2": self.lay.ml2,
                 **({"root": str(root)} if root else {}),
                 **({"registration": str(registration)} if registration else {})}))
            self.journal.record("aio", run_id=self.lay.run_id, domains=self.lay.instance_prefix)
            for path, text in conf.files(self.lay).items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            for name in conf.SERVICES:
                (self.lay.data(name) / "lock").mkdir(parents=True, exist_ok=True)
            for node in self.lay.nodes:
                (node.dir / "neutron" / "lock").mkdir(parents=True, exist_ok=True)
            for node in self.lay.nodes:
                (node.nova_data / "instances").mkdir(parents=True, exist_ok=True)
                (node.nova_data / "lock").mkdir(parents=True, exist_ok=True)
            steps = (("mariadb", self._mariadb), ("databases", self._db_sync_start),
                     ("nodes", self._nodes), ("rabbitmq", self._rabbitmq), ("ovs", self._ovs),
                     *((("ovn", self._ovn),) if self.lay.ml2 == "ovn" else ()),
                     ("keystone", self._keystone), ("identity", self._identity),
                     ("databases-wait", self._db_sync_wait), ("services", self._services), ("resources", lambda: self._resources(image)),
                     ("compute", self._wait_compute), ("tunnels", self._tunnel_neighbours))
            for name, step in steps:
                progress(f"aio: {name}")
                t0 = time.monotonic()
                step()
                self.timings[name] = round(time.monotonic() - t0, 1)
                (self.state / "timings.json").write_text(json.dumps(self.timings))
            self._write_clouds_yaml()
            (self.state / "timings.json").write_text(json.dumps(self.timings))
            return self.clouds_yaml

    def _root(self, progress) -> Path | None:
        """The release's root from the cache, built into it first if missing (Zed: none,
        the machine's packages)."""
        if self.lay.release == "zed":
            return None
        rel = release.load(self.lay.release)
        cache = rootcache.default_cache()
        if rootcache.cached(cache, rel) is None:
            progress(f"aio: building the {rel.name} root into {cache} (cached for the next up)")
            rootbuild.build(rel, cache, progress=progress)
        return rootcache.entry(cache, rel) / "root"

    def _preflight(self, image: Path) -> None:
        if os.geteuid() != 0:
            raise PrerequisiteError("aio: needs root (daemons, OVS bridges, libvirt)")
        if not image.is_file():
            raise PrerequisiteError(f"aio: guest image {image} not found; build it with "
                                    "'vnetbench image build --out DIR' and pass --image DIR/disk.qcow2")
        for name in conf.PORT_NAMES:
            if not port_free(self.lay.port(name)):
                raise VnetbenchError(f"aio: port {self.lay.port(name)} ({name}) is in use; another "
                                     "AIO up? pass --port-base to use other ports")
        if Path("/sys/class/net/ovs-netdev").exists():
            # the netdev datapath's own tap has this fixed name: one per network namespace
            if not proc.running("ovs-vswitchd"):
                raise VnetbenchError("aio: link ovs-netdev is left in the root namespace and no "
                                     "ovs-vswitchd runs (an AIO or OVS that ended without its "
                                     "teardown); 'vnetbench cleanup' removes a registered AIO's "
                                     "leftovers, else delete the link ('ip link delete ovs-netdev')")
            raise VnetbenchError("aio: an OVS userspace datapath already runs in the root namespace "
                                 "(link ovs-netdev: another AIO?); two cannot share it; take that "
                                 "one down first ('aio down --state ITS_DIR')")
        try:
            conf.split_cpus(self.lay.cpus, self.lay.computes)
            conf.split_cpus(self.lay.shared_cpus, self.lay.computes)
        except ValueError as exc:
            raise VnetbenchError(f"aio: --computes {self.lay.computes}: {exc}; each node needs "
                                 "its own CPU (--pinned-cpus / --shared-cpus)") from None
        for node in self.lay.nodes[1:]:
            if Path("/run/netns", node.netns).exists():
                raise VnetbenchError(f"aio: namespace {node.netns} exists (another AIO of run "
                                     f"{self.lay.run_id}?); take it down first")
        nets = [ipaddress.ip_network(c) for c in self.lay.subnets()]
        addrs = command(["ip", "-o", "addr", "show"], "ip addr")
        for line in addrs.splitlines():
            parts = line.split()
            for net in nets:
                if parts[2] == "inet" and ipaddress.ip_interface(parts[3]).ip in net:
                    raise VnetbenchError(f"aio: {parts[3]} on {parts[1]} is inside the AIO subnet "
                                         f"{net}; pass --cidr with a free /24 of 198.19.0.0/16 "
                                         "(its twin in 198.18.0.0/16 is the external network; "
                                         "with --computes, its third octet minus 100 in both "
                                         "halves: underlay and management links)")

    def _start(self, name, argv, env=None, port=None, timeout_s=120):
        entry = self.daemons.start(name, self.rx(argv), env=env)
        if port:
            wait_port(port, name, timeout_s, entry, self.lay.logs)
        return entry

    def _healthy(self) -> bool:
        procs = self.current()
        return bool(procs) and all(alive(e) for e in procs) and self.clouds_yaml.exists()

    # --- status and down -------------------------------------------------------------------
    def status(self) -> list[str]:
        lines = []
        for e in self.current():
            lines.append(f"{e['name']:28} pid {e['pid']:>7}  {'running' if alive(e) else 'GONE'}")
        for e in self.journal.entries():
            if e["kind"] == "netns" and e.get("node"):
                here = Path("/run/netns", e["name"]).exists()
                lines.append(f"node {e['node']} netns:{e['name']}  {'running' if here else 'GONE'}")
            elif e["kind"] == "netns":     # the outside host: --outside netns:NAME
                here = Path("/run/netns", e["name"]).exists()
                lines.append(f"outside netns:{e['name']} ({self.lay.outside_cidr})  "
                             f"{'running' if here else 'GONE'}")
        return lines

    def down(self, progress=print) -> list[str]:
        """Tear down everything this AIO made; returns what could not be removed."""
        with self._locked():
            entries = self.journal.entries()
            if not entries:
                return []
            problems = []
            prefix = next((e["domains"] for e in entries if e["kind"] == "aio"), None)
            procs = [e for e in entries if e["kind"] == "process"]
            # nova-compute first, so it creates nothing new while its domains go
            compute = [e for e in procs if e["name"].endswith("nova-compute")]
            problems += stop(compute, marker=None)
            if prefix:
                problems += _remove_domains(prefix)
                # the emulated nodes' domains, through their own libvirtd (while it runs)
                for node in self.lay.nodes[1:]:
                    if (node.libvirt_sock_dir / "libvirt-sock").exists():
                        problems += _remove_domains(prefix, node.libvirt_uri)
            ovs = [e for e in procs if e["name"] in OVS_DAEMONS]
            # 5 s: heat-engine and the OVS agents outlast SIGTERM (measured > 16 s), then SIGKILL
            problems += stop([e for e in procs if e["name"] not in OVS_DAEMONS], marker=None, timeout_s=5)
            problems += self._ovs_clear(ovs)
            problems += stop(procs, marker=str(self.state))
            for e in entries:
                if e["kind"] == "netns" and Path("/run/netns", e["name"]).exists():
                    try:        # its veths go with it
                        command(["ip", "netns", "delete", e["name"]], f"deleting netns {e['name']}")
                    except VnetbenchError as exc:
                        problems.append(str(exc))
            for e in entries:   # a veth whose peer never reached its namespace
                if e["kind"] == "link" and Path("/sys/class/net", e["name"]).exists():
                    try:
                        command(["ip", "link", "del", e["name"]], f"deleting link {e['name']}")
                    except VnetbenchError as exc:
                        # a namespace is destroyed after 'ip netns delete' returns, its veths'
                        # peers with it: one can vanish between the look and the delete
                        if Path("/sys/class/net", e["name"]).exists():
                            problems.append(str(exc))
            for sub in ("data", "etc", "ovs", "ovn", "netns", "nodes", "sockets"):
                shutil.rmtree(self.state / sub, ignore_errors=True)
            for f in ("clouds.yaml", "mysql.sock", "mariadb.pid", "timings.json"):
                (self.state / f).unlink(missing_ok=True)
            if not problems:    # the journal first: a meta.json left alone describes nothing
                self.journal.path.unlink(missing_ok=True)
                (self.state / "meta.json").unlink(missing_ok=True)
            # else both stay: a retry (aio down, vnetbench cleanup) finds the same layout
            return problems


def _remove_domains(prefix: str, uri: str | None = None) -> list[str]:
    """Destroy and undefine this AIO's Nova domains (their names carry its run id), on the
    system libvirtd or the one at URI (an emulated node's)."""
    try:
        conn = libvirtd.connect(uri) if uri else libvirtd.connect()
    except VnetbenchError as exc:
        return [str(exc)]
    problems = []
    try:
        for dom in conn.listAllDomains():
            if not dom.name().startswith(prefix):
                continue
            try:
                if dom.isActive():
                    dom.destroy()
                dom.undefineFlags(0)
            except Exception as exc:          # libvirt.libvirtError
                problems.append(f"domain {dom.name()}: {exc}")
    finally:
        conn.close()
    return problems
