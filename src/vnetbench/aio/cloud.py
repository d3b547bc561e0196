"""Bring the all-in-one cloud up and down: MariaDB, RabbitMQ and an Open vSwitch instance of
its own, then Keystone, Glance, Placement, Nova, Neutron (ML2/OVS, netdev datapath) and
Heat from Debian's packages, one worker each, every daemon started here (no systemd) with
configuration written into the state dir — nothing under /etc is changed."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from vnetbench.aio import conf
from vnetbench.aio.conf import Layout, Node
from vnetbench.aio.procs import (MARKER, Daemons, Journal, _tail, alive, log_lines, port_free,
                                  stop, wait_port)
from vnetbench.errors import PrerequisiteError, VnetbenchError
from vnetbench.linux import libvirtd
from vnetbench.state import new_run_id

CLOUD, DEMO = "vnetbench-aio", "vnetbench-aio-demo"
DEMO_PROJECT = DEMO_USER = "vnetbench-demo"
FLAVOR = "vnetbench-pinned"
FLAVOR_SHARED = "vnetbench-shared"     # unpinned: boots where cpu_shared_set is (aio up --shared-cpus)
SERVICE_USERS = ("glance", "placement", "nova", "neutron", "heat")
ENDPOINTS = (("glance", "image", "glance", ""), ("placement", "placement", "placement", ""),
             ("nova", "compute", "nova", "/v2.1"), ("neutron", "network", "neutron", ""),
             ("heat", "orchestration", "heat", "/v1/%(tenant_id)s"))
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVS_DAEMONS = ("ovsdb-server", "ovs-vswitchd")
# nova-compute's start lists every libvirt domain of the host, then reads each one's XML:
# a domain of another run (the libvirt backend's tests) that goes in between kills it
# (Zed, driver._get_all_assigned_mediated_devices: libvirtError "Domain not found")
RACE = "Domain not found"


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


def _run(argv, what: str, timeout_s: float = 600, env=None, input=None) -> str:
    try:
        done = subprocess.run(list(map(str, argv)), capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, **(env or {})}, input=input)
    except FileNotFoundError:
        raise PrerequisiteError(f"aio: {argv[0]} not found; run 'make install'") from None
    except subprocess.TimeoutExpired:
        raise VnetbenchError(f"aio: {what} did not finish within {timeout_s:g} s") from None
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise VnetbenchError(f"aio: {what} failed (exit {done.returncode}): {tail[:300]}")
    return done.stdout


class Aio:
    """One all-in-one cloud, owned through its state dir."""

    def __init__(self, state: Path, port_base: int = 19000, cidr: str = "198.19.250.0/24",
                 cpus: str = "0-1", shared_cpus: str = "", ovs_kpps: int | None = None,
                 computes: int = 1):
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
                          computes=int(meta.get("computes", computes)))
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
            self.state.chmod(0o755)     # QEMU (libvirt's user) reaches the instances' disks
            (self.state / "meta.json").write_text(json.dumps(
                {"run_id": self.lay.run_id, "port_base": self.lay.port_base,
                 "cidr": self.lay.cidr, "host": self.lay.host, "cpus": self.lay.cpus,
                 "shared_cpus": self.lay.shared_cpus, "ovs_kpps": self.lay.ovs_kpps,
                 "computes": self.lay.computes,
                 **({"registration": str(registration)} if registration else {})}))
            self.journal.record("aio", run_id=self.lay.run_id, domains=self.lay.instance_prefix)
            for path, text in conf.files(self.lay).items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            for name in conf.SERVICES:
                (self.lay.data(name) / "lock").mkdir(parents=True, exist_ok=True)
            for node in self.lay.nodes:
                (node.nova_data / "instances").mkdir(parents=True, exist_ok=True)
                (node.nova_data / "lock").mkdir(parents=True, exist_ok=True)
            steps = (("mariadb", self._mariadb), ("databases", self._db_sync_start),
                     ("nodes", self._nodes), ("rabbitmq", self._rabbitmq), ("ovs", self._ovs),
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
        addrs = _run(["ip", "-o", "addr", "show"], "ip addr")
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
        entry = self.daemons.start(name, argv, env=env)
        if port:
            wait_port(port, name, timeout_s, entry, self.lay.logs)
        return entry

    def _mariadb(self) -> None:
        data = self.lay.data("mysql")
        sock = self.state / "mysql.sock"
        _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
              "--auth-root-authentication-method=normal", "--skip-test-db"], "mariadb-install-db")
        self._start("mariadb", ["mariadbd", "--no-defaults", f"--datadir={data}", "--user=root",
                                f"--socket={sock}", f"--port={self.lay.port('mysql')}",
                                "--bind-address=127.0.0.1", "--skip-log-bin",
                                "--innodb-buffer-pool-size=64M", "--max-connections=400",
                                "--innodb-flush-log-at-trx-commit=0", "--skip-name-resolve",
                                f"--pid-file={self.state / 'mariadb.pid'}"],
                    port=self.lay.port("mysql"))
        pw = self.lay.password
        sql = ["CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'",
               f"ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '{pw}'",
               "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"]
        sql += [f"CREATE DATABASE {db} CHARACTER SET utf8" for db in conf.DATABASES]
        _run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "-e", "; ".join(sql)],
             "creating the databases")

    def _rabbitmq(self) -> None:
        base = self.lay.data("rabbitmq")
        base.mkdir(parents=True, exist_ok=True)
        (base / "enabled_plugins").write_text("[].\n")
        env = self._rabbit_env()
        self._start("epmd", ["epmd", "-port", str(self.lay.port("epmd")), "-address", "127.0.0.1"],
                    env=env, port=self.lay.port("epmd"))
        self._start("rabbitmq", ["/usr/lib/rabbitmq/bin/rabbitmq-server"], env=env,
                    port=self.lay.port("rabbit"), timeout_s=180)

    def _rabbit_env(self) -> dict:
        base = self.lay.data("rabbitmq")
        return {"HOME": str(base), "ERL_EPMD_PORT": str(self.lay.port("epmd")),
                "RABBITMQ_NODENAME": f"vnbaio{self.lay.run_id}@localhost",
                "RABBITMQ_DIST_PORT": str(self.lay.port("rabbit_dist")),
                "RABBITMQ_MNESIA_BASE": str(base / "mnesia"), "RABBITMQ_LOG_BASE": str(base / "log"),
                "RABBITMQ_LOGS": "-", "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
                "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),     # conf.rabbitmq
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
                "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
                "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid")}

    def ovs_env(self, node: Node | None = None) -> dict:
        run = (node or self.lay.nodes[0]).ovs_run
        return {"OVS_RUNDIR": str(run), "OVS_LOGDIR": str(run), "OVS_DBDIR": str(run)}

    def vsctl(self, *args, what="ovs-vsctl", node: Node | None = None) -> str:
        node = node or self.lay.nodes[0]
        return _run(["ovs-vsctl", f"--db={node.ovsdb}", "--timeout=20", *args], what,
                    env=self.ovs_env(node))

    def _in(self, node: Node, net: bool = True) -> list[str]:
        """argv prefix: run in NODE's network (unless not NET), mount and UTS namespaces
        (those of its holder process); nothing for node 1, this machine."""
        if node.primary:
            return []
        holder = next(e for e in reversed(self.processes()) if e["name"] == f"{node.name}-node")
        return ["nsenter", f"--target={holder['pid']}", "--mount", "--uts", *(["--net"] if net else []), "--"]

    def _node_start(self, node: Node, name: str, argv, env=None, port=None, net: bool = True):
        """A daemon of NODE, in its namespaces, journaled as '<node>-NAME' (node 1: NAME)."""
        full = name if node.primary else f"{node.name}-{name}"
        return self._start(full, [*self._in(node, net), *argv], env=env, port=port)

    def _node_shell(self) -> Path:
        """The nova-computes' remote shell (RSYNC_RSH): 'HOST COMMAND...' runs COMMAND in
        the mount namespace of that node (ssh between compute nodes, which Nova uses to copy
        a config drive before a block migration, by the node's host name, and a cold
        migration's disk, by its my_ip); node 1's is that of its ovsdb-server."""
        first = next(e for e in reversed(self.processes()) if e["name"] == "ovsdb-server")
        node1 = self.lay.nodes[0]
        cases = [f'  {node1.host}|{node1.my_ip}) exec nsenter --target={first["pid"]} --mount -- "$@" ;;']
        for node in self.lay.nodes[1:]:
            cases.append(f'  {node.host}|{node.my_ip}) exec {" ".join(self._in(node, net=False))} "$@" ;;')
        path = self.lay.state / "nodes" / "rsh"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n# nova-compute's RSYNC_RSH between the AIO's nodes (aio/cloud.py)\n"
                        'host="$1"; shift\ncase "$host" in\n' + "\n".join(cases) +
                        '\n  *) echo "rsh: no AIO node $host" >&2; exit 255 ;;\nesac\n')
        path.chmod(0o755)
        return path

    # --- compute nodes 2..N -------------------------------------------------------------
    def _nodes(self) -> None:
        """Each emulated node's namespaces and links, before RabbitMQ (it listens on this
        machine's end of their management links)."""
        if len(self.lay.nodes) > 1:
            libvirtd.connect().close()           # the machine's libvirtd (node 1's): its /run/libvirt
        for node in self.lay.nodes[1:]:
            self._node_namespaces(node)

    def _node_namespaces(self, node: Node) -> None:
        """A network namespace with three veths to this machine (management: RabbitMQ;
        underlay: tenant tunnels; provider: the physnet's flat and VLAN networks) and a
        mount + UTS namespace held by a process of its own: the node's hostname, and its
        own /run/libvirt, /var/lib/libvirt, /var/log/libvirt and /etc/libvirt/qemu."""
        ns = node.netns
        self.journal.record("netns", name=ns, node=node.name)
        _run(["ip", "netns", "add", ns], f"netns {ns}")
        inside = ["ip", "netns", "exec", ns]
        for kind, inner in Node.INNER.items():
            link = node.link(kind)
            self.journal.record("link", name=link)
            _run(["ip", "link", "add", link, "type", "veth", "peer", "name", inner, "netns", ns],
                 f"veth {link}")
            _run(["ip", "link", "set", link, "up"], f"{link} up")
            if kind != "m":     # in OVS netdev bridges: no checksum left to offload
                _run(["ethtool", "-K", link, "tx", "off"], f"ethtool on {link}")
                _run([*inside, "ethtool", "-K", inner, "tx", "off"], f"ethtool on {inner} in {ns}")
        ours, theirs = node.mgmt
        _run(["ip", "addr", "add", f"{ours}/30", "dev", node.link("m")], f"address on {node.link('m')}")
        _run([*inside, "ip", "addr", "add", f"{theirs}/30", "dev", Node.INNER["m"]], f"address in {ns}")
        for dev in ("lo", *Node.INNER.values()):
            _run([*inside, "ip", "link", "set", dev, "up"], f"{dev} up in {ns}")
        # node 1's migration address (its end of node 2's link) from every node
        _run([*inside, "ip", "route", "add", "default", "via", ours], f"default route in {ns}")
        binds = []
        first = self.lay.nodes[0]
        if first.migration_addr:    # the machine's libvirtd for a peer-to-peer migration to node 1
            binds += ["/run/libvirt", str(first.libvirt_sock_dir)]
            first.libvirt_sock_dir.mkdir(parents=True, exist_ok=True)
        for point, src in node.hidden():
            src.mkdir(parents=True, exist_ok=True)
            binds += [str(src), point]
        node.libvirt_sock_dir.mkdir(parents=True, exist_ok=True)
        ready = node.dir / "ready"
        ready.unlink(missing_ok=True)
        script = ('hostname "$1" && shift && while [ "$#" -gt 1 ]; do mkdir -p "$2" && mount --bind "$1" "$2" '
                  '&& shift 2 || exit 1; done && touch "$1" && exec sleep infinity')
        entry = self._start(f"{node.name}-node", [
            *inside, "unshare", "--mount", "--uts", "--propagation", "private", "--",
            "sh", "-c", script, "node", node.host, *binds, str(ready)])
        for _ in range(100):
            if ready.exists():
                return
            self.daemons.check(f"{node.name}-node", entry)
            time.sleep(0.05)
        raise VnetbenchError(f"aio: node {node.name}'s namespaces not ready after 5 s")

    def _node_ovs(self, node: Node) -> None:
        """The node's own OVS (in its namespaces): provider bridge with its provider link,
        underlay bridge with its underlay link and tunnel endpoint address."""
        run = node.ovs_run
        run.mkdir(parents=True, exist_ok=True)
        _run(["ovsdb-tool", "create", run / "conf.db", OVS_SCHEMA], "ovsdb-tool create")
        self._start_ovs(node)
        self.vsctl("--no-wait", "set", "open_vswitch", ".",
                   f"external_ids:vnetbench-aio={self.lay.run_id}", node=node)
        own = f"external_ids:vnetbench-aio={self.lay.run_id}"
        self.vsctl("add-br", node.br_phys, "--", "set", "bridge", node.br_phys, "datapath_type=netdev", own,
                   "--", "add-port", node.br_phys, Node.INNER["p"],
                   "--", "add-br", node.br_underlay, "--", "set", "bridge", node.br_underlay,
                   "datapath_type=netdev", own, "--", "add-port", node.br_underlay, Node.INNER["u"],
                   what=f"bridges of node {node.name}", node=node)
        inside = ["ip", "netns", "exec", node.netns]
        self._underlay_address(node, inside)
        _run([*inside, "ip", "link", "set", node.br_phys, "up"], f"{node.br_phys} up")

    def _underlay_address(self, node: Node, inside: list[str]) -> None:
        br = node.br_underlay
        plen = ipaddress.ip_network(self.lay.underlay_cidr).prefixlen
        _run([*inside, "ip", "addr", "add", f"{node.underlay_ip}/{plen}", "dev", br], f"address on {br}")
        _run([*inside, "ip", "link", "set", br, "up"], f"{br} up")
        _run([*inside, "ethtool", "-K", br, "tx", "off"], f"ethtool on {br}")

    def _node_underlay_hub(self) -> None:
        """Node 1's underlay bridge (its tunnel endpoint) and the other nodes' underlay and
        provider links' ends in node 1's bridges: node 1 is their switch."""
        first = self.lay.nodes[0]
        own = f"external_ids:vnetbench-aio={self.lay.run_id}"
        self.journal.record("bridge", name=first.br_underlay)
        tx = ["add-br", first.br_underlay, "--", "set", "bridge", first.br_underlay,
              "datapath_type=netdev", own]
        for node in self.lay.nodes[1:]:
            tx += ["--", "add-port", first.br_underlay, node.link("u"),
                   "--", "add-port", first.br_phys, node.link("p")]
        self.vsctl(*tx, what="underlay bridge")
        self._underlay_address(first, [])

    def _tunnel_neighbours(self) -> None:
        """Each node's OVS told its peers' tunnel endpoint MACs: userspace tunnels resolve
        the outer MAC in their own cache (filled only from ARP replies they see) and drop
        the packet that misses (kinds/ovs/netns.tunnel_neighbours)."""
        nodes = self.lay.nodes
        if len(nodes) < 2:
            return
        macs = {}
        for node in nodes:
            inside = [] if node.primary else ["ip", "netns", "exec", node.netns]
            macs[node.index] = _run([*inside, "cat", f"/sys/class/net/{node.br_underlay}/address"],
                                    f"MAC of {node.br_underlay}").strip()
        for node in nodes:
            ctl = ["ovs-appctl", "-t", str(node.ovs_run / "ovs-vswitchd.ctl")]
            for peer in nodes:
                if peer is not node:
                    _run([*ctl, "tnl/neigh/set", node.br_underlay, peer.underlay_ip, macs[peer.index]],
                         f"tnl/neigh/set on node {node.name}")

    def _node_libvirt(self, node: Node) -> None:
        """virtlogd and libvirtd of the node, in its namespaces (its hostname: libvirt's,
        so Placement's resource provider's), their sockets by path."""
        self._node_start(node, "virtlogd", ["virtlogd", "-p", str(node.dir / "virtlogd.pid")])
        entry = self._node_start(node, "libvirtd", ["libvirtd", "-f", str(node.etc / "libvirtd.conf"),
                                                    "-p", str(node.dir / "libvirtd.pid")])
        sock = node.libvirt_sock_dir / "libvirt-sock"
        for _ in range(300):
            if sock.exists():
                break
            self.daemons.check(f"{node.name}-libvirtd", entry)
            time.sleep(0.1)
        name = _run(["virsh", "-c", node.libvirt_uri, "hostname"], f"virsh hostname of {node.name}",
                    timeout_s=60).strip()
        if name != node.host:
            raise VnetbenchError(f"aio: node {node.name}'s libvirtd says its hostname is {name!r}, "
                                 f"not {node.host!r}: Placement would name its provider wrong")

    def _ovs(self) -> None:
        run = self.lay.ovs_run
        run.mkdir(parents=True, exist_ok=True)
        db = run / "conf.db"
        _run(["ovsdb-tool", "create", db, OVS_SCHEMA], "ovsdb-tool create")
        self._start_ovs()
        for node in self.lay.nodes[1:]:
            self._node_ovs(node)
        self.vsctl("--no-wait", "set", "open_vswitch", ".",
                   f"external_ids:vnetbench-aio={self.lay.run_id}")
        br = self.lay.br_phys
        self.journal.record("bridge", name=br)
        self.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
                   f"external_ids:vnetbench-aio={self.lay.run_id}", what=f"creating bridge {br}")
        _run(["ip", "addr", "add", self.lay.host_cidr, "dev", br], f"address on {br}")
        _run(["ip", "link", "set", br, "up"], f"{br} up")
        # the userspace datapath does not fill in checksums the kernel left to offload
        _run(["ethtool", "-K", br, "tx", "off"], f"ethtool on {br}")
        self._outside()
        if len(self.lay.nodes) > 1:
            self._node_underlay_hub()
        # the VM taps stay up (a tap's IFF_UP can be lost as ovs-vswitchd opens it)
        for node in self.lay.nodes:
            self._node_start(node, "tapkeeper", [sys.executable, "-m", "vnetbench.aio.tapkeeper", "--db",
                                                 node.ovsdb, "--bridge", node.br_int], env=self.ovs_env(node))

    def _outside(self) -> None:
        """A machine outside the cloud, on its external network (the provider network the
        routers' gateways and floating IPs are on): a namespace with a veth into the
        provider bridge, at the subnet's second address. North-south traffic runs between
        it and the guests' floating IPs, never through the runner's own namespace."""
        lay = self.lay
        ns, link = lay.outside_netns, lay.outside_link
        self.journal.record("netns", name=ns)
        _run(["ip", "netns", "add", ns], f"netns {ns}")
        _run(["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns],
             f"veth {link}")
        inside = ["ip", "netns", "exec", ns]
        _run([*inside, "ip", "addr", "add", lay.outside_cidr, "dev", "eth0"], f"address in {ns}")
        for dev in ("lo", "eth0"):
            _run([*inside, "ip", "link", "set", dev, "up"], f"{dev} up in {ns}")
        # its own TCP segments leave with full checksums (the userspace datapath fills none in)
        _run([*inside, "ethtool", "-K", "eth0", "tx", "off"], f"ethtool in {ns}")
        _run(["ip", "link", "set", link, "up"], f"{link} up")
        # an access port of the external network's VLAN on the provider bridge
        self.vsctl("add-port", lay.br_phys, link, "--", "set", "port", link,
                   f"tag={conf.EXTERNAL_VLAN}", what=f"port {link} on {lay.br_phys}")

    def _start_ovs(self, node: Node | None = None) -> None:
        node = node or self.lay.nodes[0]
        run = node.ovs_run
        env = self.ovs_env(node)
        pre = "" if node.primary else f"{node.name}-"
        entry = self._node_start(node, "ovsdb-server", [
            "ovsdb-server", str(run / "conf.db"), f"--remote=punix:{run / 'db.sock'}",
            f"--unixctl={run / 'ovsdb-server.ctl'}", f"--pidfile={run / 'ovsdb-server.pid'}"], env=env)
        for _ in range(100):
            if (run / "db.sock").exists():
                break
            self.daemons.check(f"{pre}ovsdb-server", entry)
            time.sleep(0.1)
        self.vsctl("--no-wait", "init", node=node)
        entry = self._node_start(node, "ovs-vswitchd", [
            "ovs-vswitchd", node.ovsdb, f"--unixctl={run / 'ovs-vswitchd.ctl'}",
            f"--pidfile={run / 'ovs-vswitchd.pid'}"], env=env)
        # answers once vswitchd reads the db
        self.vsctl("--if-exists", "del-br", "vnb-aio-probe", node=node)
        self.daemons.check(f"{pre}ovs-vswitchd", entry)

    def _ovs_clear(self, ovs: list[dict]) -> list[str]:
        """Delete every bridge of this AIO's own OVS instance (the netdev datapath keeps
        their taps, and its ovs-netdev, in the root namespace after vswitchd exits), then
        stop it. After a crash that killed OVS, it is restarted from its database for this."""
        run = self.lay.ovs_run
        if not (run / "conf.db").exists():
            return stop(ovs, marker=None)
        problems = []
        try:
            if not all(alive(e) for e in ovs) or len(ovs) < 2:
                problems += stop(ovs, marker=None)
                (run / "db.sock").unlink(missing_ok=True)
                self._start_ovs()
                ovs = [e for e in self.processes() if e["name"] in OVS_DAEMONS]
            for br in self.vsctl("list-br").split():
                self.vsctl("--if-exists", "del-br", br, what=f"deleting bridge {br}")
            # with no bridge left the netdev datapath is usually gone already, and then
            # dump-dps answers with an error: nothing to delete
            ctl = ["ovs-appctl", "-t", str(run / "ovs-vswitchd.ctl")]
            dps = subprocess.run([*ctl, "dpctl/dump-dps"], capture_output=True, text=True, timeout=30)
            for dp in dps.stdout.split() if dps.returncode == 0 else []:
                _run([*ctl, "dpctl/del-dp", dp], f"deleting datapath {dp}", timeout_s=30)
        except VnetbenchError as exc:
            problems.append(str(exc))
        return problems + stop(ovs, marker=None)

    def _keystone(self) -> None:
        cfg = self.lay.conf_path("keystone")
        manage = ["keystone-manage", "--config-file", cfg]
        _run([*manage, "db_sync"], "keystone-manage db_sync")
        for what in ("fernet_setup", "credential_setup"):
            _run([*manage, what, "--keystone-user", "root", "--keystone-group", "root"],
                 f"keystone-manage {what}")
        url = self.lay.url("keystone", "/v3/")
        _run([*manage, "bootstrap", "--bootstrap-password", self.lay.password,
              "--bootstrap-admin-url", url, "--bootstrap-internal-url", url,
              "--bootstrap-public-url", url, "--bootstrap-region-id", conf.REGION],
             "keystone-manage bootstrap")
        self._uwsgi("keystone", "/usr/bin/keystone-wsgi-public",
                    {"OS_KEYSTONE_CONFIG_FILES": str(cfg)})

    def _uwsgi(self, name: str, app: str, env: dict) -> dict:
        # no apparmor plugin (Debian's ini loads one; this kernel has no AppArmor)
        return self._start(name, [
            "uwsgi", "--plugin", "python3", "--http-socket", f"127.0.0.1:{self.lay.port(name)}",
            "--wsgi-file", app, "--master", "--processes", "1", "--threads", "4",
            "--die-on-term", "--need-app", "--buffer-size", "65535", "--lazy-apps",
            # no keep-alive on a bare http-socket: clients must not reuse the connection
            "--add-header", "Connection: close",
            "--hook-master-start", "unix_signal:15 gracefully_kill_them_all"],
            env=env, port=self.lay.port(name))

    def _db_sync(self) -> None:
        lay = self.lay
        nova = ["nova-manage", "--config-file", lay.conf_path("nova")]
        jobs = [
            ["glance-manage", "--config-file", lay.conf_path("glance", "glance-api.conf"), "db_sync"],
            ["placement-manage", "--config-file", lay.conf_path("placement"), "db", "sync"],
            ["neutron-db-manage", "--config-file", lay.conf_path("neutron"), "--config-file",
             lay.conf_path("neutron", "ml2_conf.ini"), "upgrade", "heads"],
            ["heat-manage", "--config-file", lay.conf_path("heat"), "db_sync"],
            ["sh", "-ec", " && ".join([
                " ".join(map(str, [*nova, "api_db", "sync"])),
                " ".join(map(str, [*nova, "cell_v2", "map_cell0", "--database_connection",
                                   f"'{lay.db_url('nova_cell0')}'"])),
                " ".join(map(str, [*nova, "cell_v2", "create_cell", "--name", "cell1",
                                   "--database_connection", f"'{lay.db_url('nova')}'",
                                   "--transport-url", lay.transport_url])),
                " ".join(map(str, [*nova, "db", "sync"]))])]]
        # two at a time: this machine has two CPUs and each sync is one busy Python process
        running: list[tuple[subprocess.Popen, list]] = []
        lay.logs.mkdir(parents=True, exist_ok=True)
        for job in jobs + [None, None]:
            while len(running) >= (2 if job else 1) or (job is None and running):
                p, argv = running.pop(0)
                try:
                    out, _ = p.communicate(timeout=600)
                except subprocess.TimeoutExpired:
                    p.kill()
                    raise VnetbenchError(f"aio: {argv[0]} did not finish within 600 s") from None
                if p.returncode != 0:
                    tail = (out.strip() or "no output").splitlines()[-1]
                    raise VnetbenchError(f"aio: {' '.join(map(str, argv[:4]))[:80]} failed: {tail[:300]}")
                if job is None:
                    break
            if job:
                running.append((subprocess.Popen(
                    list(map(str, job)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, env={**os.environ, MARKER: str(self.state)}), job))

    def _db_sync_start(self) -> None:
        """The schema migrations run beside the next steps (they need only MariaDB)."""
        self._sync_error: list[Exception] = []

        def run():
            try:
                self._db_sync()
            except Exception as exc:          # re-raised by _db_sync_wait
                self._sync_error.append(exc)
        self._sync = threading.Thread(target=run, daemon=True)
        self._sync.start()

    def _db_sync_wait(self) -> None:
        self._sync.join()
        if self._sync_error:
            raise self._sync_error[0]

    def _services(self) -> None:
        lay = self.lay
        libvirtd.connect().close()               # libvirtd: a system service, started if needed
        self._uwsgi("placement", "/usr/bin/placement-api",
                    {"OS_PLACEMENT_CONFIG_DIR": str(lay.conf_path("placement").parent)})
        nova = ["--config-file", str(lay.conf_path("nova"))]
        neutron = ["--config-file", str(lay.conf_path("neutron"))]
        ml2 = [*neutron, "--config-file", str(lay.conf_path("neutron", "ml2_conf.ini"))]
        agent = [*neutron, "--config-file", str(lay.conf_path("neutron", "openvswitch_agent.ini"))]
        heat = ["--config-file", str(lay.conf_path("heat"))]
        glance = ["--config-file", str(lay.conf_path("glance", "glance-api.conf"))]
        apis = {"glance": ["glance-api", *glance], "neutron": ["neutron-server", *ml2],
                "nova": ["nova-api", *nova], "heat": ["heat-api", *heat]}
        entries = {name: self.daemons.start(f"{name}-api", argv) for name, argv in apis.items()}
        self.daemons.start("nova-conductor", ["nova-conductor", *nova])
        self.daemons.start("nova-scheduler", ["nova-scheduler", *nova])
        self.daemons.start("heat-engine", ["heat-engine", *heat])
        self.daemons.start("neutron-openvswitch-agent", ["neutron-openvswitch-agent", *agent],
                           env=self.ovs_env())
        rsh = {"RSYNC_RSH": str(self._node_shell())} if len(self.lay.nodes) > 1 else {}
        self._computes = {"nova-compute": (["nova-compute", *nova], {**self.ovs_env(), **rsh})}
        for node in self.lay.nodes[1:]:
            self._node_libvirt(node)
            self._node_start(node, "neutron-openvswitch-agent", [
                "neutron-openvswitch-agent", *neutron, "--config-file", str(node.conf_path("neutron"))],
                env=self.ovs_env(node))
            # the node's mount and UTS namespaces (its instances dir, its hostname), this
            # machine's network namespace (the APIs on loopback); libvirtd and OVS by socket
            self._computes[f"{node.name}-nova-compute"] = (
                [*self._in(node, net=False), "nova-compute", "--config-file", str(node.conf_path("nova"))],
                {**self.ovs_env(node), **rsh})
        for name, (argv, env) in self._computes.items():
            self.daemons.start(name, argv, env=env)
        for name, entry in entries.items():
            wait_port(lay.port(name), f"{name}-api", 240, entry, lay.logs)
        # after neutron-server: the agent's first call (get_host_ha_router_count) sent before
        # the server consumes its L3 topic is lost, and waited for (rpc_response_timeout)
        self._l3_agent([*neutron, "--config-file", str(lay.conf_path("neutron", "l3_agent.ini"))])

    def _l3_agent(self, args: list[str]) -> None:
        """neutron-l3-agent in a mount namespace of its own whose /run/netns is the AIO's
        netns dir: the router namespaces it makes (qrouter-<uuid>, named by Neutron) are the
        AIO's by place, invisible to other programs' namespace lists, and freed when the
        agent's mount namespace goes with it -- nothing is ever removed by its name."""
        self.lay.netns_dir.mkdir(parents=True, exist_ok=True)
        Path("/run/netns").mkdir(parents=True, exist_ok=True)
        self.daemons.start("neutron-l3-agent", [
            "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /run/netns && exec "$@"', str(self.lay.netns_dir),
            "neutron-l3-agent", *args], env=self.ovs_env())

    # --- cloud resources (openstacksdk) ---------------------------------------------------
    def _auth(self, user="admin", project="admin") -> dict:
        return {"auth_url": self.lay.url("keystone", "/v3"), "username": user,
                "password": self.lay.password, "project_name": project,
                "user_domain_name": "Default", "project_domain_name": "Default"}

    def connect(self, user="admin", project="admin"):
        import openstack
        return openstack.connect(auth=self._auth(user, project), region_name=conf.REGION,
                                 identity_api_version="3", interface="public")

    def _identity(self) -> None:
        """Service users, the catalog, Heat's domain and roles, the demo project."""
        c = self.connect()
        idm = c.identity
        admin_role = idm.find_role("admin")
        member = idm.find_role("member")
        default = idm.find_domain("default")
        service = idm.create_project(name="service", domain_id=default.id)
        # the 'service' role: services check it on the service token another service sends
        service_role = idm.find_role("service") or idm.create_role(name="service")
        for user in SERVICE_USERS:
            u = idm.create_user(name=user, password=self.lay.password, domain_id=default.id,
                                default_project_id=service.id)
            for role in (admin_role, service_role):
                idm.assign_project_role_to_user(service, u, role)
        for svc, kind, name, path in ENDPOINTS:
            s = idm.create_service(name=name, type=kind)
            for iface in ("public", "internal", "admin"):
                idm.create_endpoint(service_id=s.id, interface=iface, region_id=conf.REGION,
                                    url=self.lay.url(svc, path))
        # Heat: its stack-user domain and roles
        heat_domain = idm.create_domain(name="heat", description="Heat stack users")
        dadmin = idm.create_user(name="heat_domain_admin", password=self.lay.password,
                                 domain_id=heat_domain.id)
        idm.assign_domain_role_to_user(heat_domain, dadmin, admin_role)
        owner = idm.create_role(name="heat_stack_owner")
        idm.create_role(name="heat_stack_user")
        demo = idm.create_project(name=DEMO_PROJECT, domain_id=default.id)
        du = idm.create_user(name=DEMO_USER, password=self.lay.password, domain_id=default.id,
                             default_project_id=demo.id)
        for role in (member, owner):
            idm.assign_project_role_to_user(demo, du, role)

    def _resources(self, image: Path) -> None:
        """The guest image, the flat provider network and the pinned flavor."""
        c = self.connect()
        self._upload_image(c, image)
        net = c.network.create_network(name=conf.NETWORK_NAME, shared=True,
                                       provider_network_type="flat",
                                       provider_physical_network=conf.PHYSNET)
        start, end = self.lay.pool
        c.network.create_subnet(network_id=net.id, name=conf.NETWORK_NAME, ip_version=4,
                                cidr=self.lay.cidr, enable_dhcp=False,
                                gateway_ip=self.lay.host_cidr.split("/")[0],
                                allocation_pools=[{"start": start, "end": end}])
        ext = c.network.create_network(name=conf.EXTERNAL_NAME, is_router_external=True,
                                       provider_network_type="vlan",
                                       provider_physical_network=conf.PHYSNET,
                                       provider_segmentation_id=conf.EXTERNAL_VLAN)
        net = ipaddress.ip_network(self.lay.external_cidr)
        c.network.create_subnet(network_id=ext.id, name=conf.EXTERNAL_NAME, ip_version=4,
                                cidr=str(net), enable_dhcp=False,
                                gateway_ip=self.lay.outside_cidr.split("/")[0],
                                allocation_pools=[{"start": str(net.network_address + 10),
                                                   "end": str(net.broadcast_address - 1)}])
        flavor = c.compute.create_flavor(name=FLAVOR, ram=256, vcpus=1, disk=1, is_public=True)
        c.compute.create_flavor_extra_specs(flavor, {"hw:cpu_policy": "dedicated"})
        c.compute.create_flavor(name=FLAVOR_SHARED, ram=256, vcpus=1, disk=1, is_public=True)

    def _upload_image(self, c, image: Path) -> None:
        fmt = "qcow2" if image.suffix == ".qcow2" else "raw"
        img = c.image.create_image(name=conf.IMAGE_NAME, filename=str(image), disk_format=fmt,
                                   container_format="bare", visibility="public",
                                   img_config_drive="mandatory", wait=True, timeout=120)
        t0 = time.monotonic()
        while img.status != "active" and time.monotonic() - t0 < 120:
            if img.status in ("killed", "deleted"):
                break
            time.sleep(1)
            img = c.image.get_image(img.id)
        if img.status != "active":
            raise VnetbenchError(f"aio: image {conf.IMAGE_NAME} is {img.status}, not active "
                                 f"(log: {self.lay.logs}/glance-api.log)")

    def _wait_compute(self, timeout_s: float = 300) -> None:
        """Until Nova's scheduler can place on this host: the compute service is up, mapped
        to the cell and its resource provider has the CPU inventory its layout asks for
        (PCPU for pinned guests, VCPU for unpinned ones); and the OVS agent is alive."""
        c = self.connect()
        want = {rc for rc, cpus in (("PCPU", self.lay.cpus), ("VCPU", self.lay.shared_cpus)) if cpus}
        n, hosts = self.lay.computes, [node.host for node in self.lay.nodes]
        t0, last, restarts, next_discover = time.monotonic(), "nothing yet", 0, 0.0
        while time.monotonic() - t0 < timeout_s:
            for entry in self.current():
                if alive(entry):
                    continue
                log = self.lay.logs / f"{entry['name']}.log"
                if (entry["name"] == "nova-compute" and restarts < 3
                        and any(RACE in ln for ln in log_lines(log, 60) or [])):
                    restarts += 1
                    argv, env = self._computes["nova-compute"]
                    self.daemons.start("nova-compute", argv, env=env)
                    continue
                raise VnetbenchError(f"aio: {entry['name']} exited: {_tail(log)} (log: {log})")
            hyps = [h for h in c.compute.hypervisors(details=True)]
            if (len(hyps) < n and time.monotonic() >= next_discover
                    and self._computes_up(c) > len(hyps)):
                # map the new compute hosts into their cell now (devstack's discover_hosts):
                # the scheduler's periodic discovery took 20-25 s to run here
                self._discover_hosts()
                next_discover = time.monotonic() + 5
                hyps = [h for h in c.compute.hypervisors(details=True)]
            agents = list(c.network.agents())
            ovs = {a.host for a in agents if a.agent_type == "Open vSwitch agent" and a.is_alive}
            silent = [f"the OVS agent of {h}" for h in hosts if h not in ovs]
            if not any(a.agent_type == "L3 agent" and a.is_alive for a in agents):
                silent.append("the L3 agent")
            if len(hyps) < n:
                last = f"{len(hyps)} of {n} hypervisors in the cell yet"
            elif silent:
                last = f"{' and '.join(silent)} has not reported"
            else:
                rps = list(c.placement.resource_providers())
                lacking = [rp.name for rp in rps
                           if not want <= {i.resource_class for i in c.placement.resource_provider_inventories(rp)}
                           and rp.name in {h.name for h in hyps}]
                if not lacking:
                    return
                last = f"no {'/'.join(sorted(want))} inventory in placement yet for {', '.join(lacking)}"
            time.sleep(2)
        raise VnetbenchError(f"aio: compute not ready after {timeout_s:g} s: {last}")

    @staticmethod
    def _computes_up(c) -> int:
        return sum(s.binary == "nova-compute" and s.state == "up" for s in c.compute.services())

    def _discover_hosts(self) -> None:
        _run(["nova-manage", "--config-file", self.lay.conf_path("nova"), "cell_v2",
              "discover_hosts"], "nova-manage cell_v2 discover_hosts", timeout_s=120)

    def _write_clouds_yaml(self) -> None:
        clouds = {}
        for name, user, project in ((CLOUD, "admin", "admin"), (DEMO, DEMO_USER, DEMO_PROJECT)):
            clouds[name] = {"auth": self._auth(user, project), "region_name": conf.REGION,
                            "identity_api_version": 3, "interface": "public"}
        self.clouds_yaml.write_text(yaml.safe_dump({"clouds": clouds}, sort_keys=False))
        self.clouds_yaml.chmod(0o644)

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
                        _run(["ip", "netns", "delete", e["name"]], f"deleting netns {e['name']}")
                    except VnetbenchError as exc:
                        problems.append(str(exc))
            for e in entries:   # a veth whose peer never reached its namespace
                if e["kind"] == "link" and Path("/sys/class/net", e["name"]).exists():
                    try:
                        _run(["ip", "link", "del", e["name"]], f"deleting link {e['name']}")
                    except VnetbenchError as exc:
                        # a namespace is destroyed after 'ip netns delete' returns, its veths'
                        # peers with it: one can vanish between the look and the delete
                        if Path("/sys/class/net", e["name"]).exists():
                            problems.append(str(exc))
            for sub in ("data", "etc", "ovs", "netns", "nodes", "sockets"):
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
