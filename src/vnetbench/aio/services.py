"""The all-in-one cloud's services: MariaDB, RabbitMQ, Keystone, the databases' schema
migrations (beside the next steps), then Glance, Placement, Nova, Neutron (ML2/OVS and its
agents, the L3 agent in a mount namespace of its own) and Heat, one worker each, every
daemon started and journaled here (no systemd).

A part of ``cloud.Aio`` (which composes it with ``nodes`` and ``resources``): it uses the
Aio's layout (``lay``), state dir, daemons and ``_start``."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from vnetbench.aio import conf
from vnetbench.aio.procs import MARKER, command, wait_port
from vnetbench.errors import VnetbenchError
from vnetbench.linux import libvirtd


class Services:
    def _mariadb(self) -> None:
        data = self.lay.data("mysql")
        sock = self.state / "mysql.sock"
        command(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
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
        command(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "-e", "; ".join(sql)],
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

    def _keystone(self) -> None:
        cfg = self.lay.conf_path("keystone")
        manage = ["keystone-manage", "--config-file", cfg]
        command(self.rx([*manage, "db_sync"]), "keystone-manage db_sync")
        for what in ("fernet_setup", "credential_setup"):
            command(self.rx([*manage, what, "--keystone-user", "root", "--keystone-group", "root"]),
                 f"keystone-manage {what}")
        url = self.lay.url("keystone", "/v3/")
        command(self.rx([*manage, "bootstrap", "--bootstrap-password", self.lay.password,
              "--bootstrap-admin-url", url, "--bootstrap-internal-url", url,
              "--bootstrap-public-url", url, "--bootstrap-region-id", conf.REGION]),
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
            ["/bin/sh", "-ec", " && ".join([
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
                    self.rx(job), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, env={**os.environ, MARKER: str(self.state)}), job))

    def _db_sync_start(self) -> None:
        """The schema migrations run beside the next steps (they need only MariaDB)."""
        self._sync_error: list[Exception] = []

        def sync():
            try:
                self._db_sync()
            except Exception as exc:          # re-raised by _db_sync_wait
                self._sync_error.append(exc)
        self._sync = threading.Thread(target=sync, daemon=True)
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
        entries = {name: self._start(f"{name}-api", argv) for name, argv in apis.items()}
        self._start("nova-conductor", ["nova-conductor", *nova])
        self._start("nova-scheduler", ["nova-scheduler", *nova])
        self._start("heat-engine", ["heat-engine", *heat])
        if lay.ml2 == "ovs":
            self._start("neutron-openvswitch-agent", ["neutron-openvswitch-agent", *agent],
                        env=self.ovs_env())
        rsh = {"RSYNC_RSH": str(self._node_shell())} if len(self.lay.nodes) > 1 else {}
        self._computes = {"nova-compute": (self.rx(["nova-compute", *nova]), {**self.ovs_env(), **rsh})}
        for node in self.lay.nodes[1:]:
            self._node_libvirt(node)
            if lay.ml2 == "ovs":
                self._node_start(node, "neutron-openvswitch-agent", [
                    "neutron-openvswitch-agent", *neutron, "--config-file", str(node.conf_path("neutron"))],
                    env=self.ovs_env(node))
            # the node's mount and UTS namespaces (its instances dir, its hostname), this
            # machine's network namespace (the APIs on loopback); libvirtd and OVS by socket
            self._computes[f"{node.name}-nova-compute"] = (
                [*self._in(node, net=False), *self.rx(["nova-compute", "--config-file", node.conf_path("nova")])],
                {**self.ovs_env(node), **rsh})
        if lay.ml2 == "ovn":
            for node in lay.nodes:
                self._metadata_agent(node, neutron)
        for name, (argv, env) in self._computes.items():
            self.daemons.start(name, argv, env=env)
        for name, entry in entries.items():
            wait_port(lay.port(name), f"{name}-api", 240, entry, lay.logs)
        if lay.ml2 == "ovs":
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
            *self.rx(["neutron-l3-agent", *args])], env=self.ovs_env())
