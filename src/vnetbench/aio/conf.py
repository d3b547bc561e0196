"""The all-in-one cloud's layout and its services' configuration: pure data, no system
access. Every file, port, database and bridge of one AIO derives from its state dir and
its run id, so two AIOs (or an AIO and the embedded testbed) never share one."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from vnetbench.testbed.model import NetType

SERVICES = ("keystone", "glance", "placement", "nova", "neutron", "heat")
DATABASES = ("keystone", "glance", "placement", "nova_api", "nova", "nova_cell0", "neutron", "heat")
PORT_NAMES = ("keystone", "glance", "placement", "nova", "neutron", "heat", "mysql", "rabbit",
              "epmd", "rabbit_dist", "openflow", "metadata")
# the mechanism drivers an AIO runs (--ml2), and the releases each runs on: ML2/OVN on the
# netdev datapath needs the binding's datapath_type (Launchpad #2045889, fixed in 2024.1),
# so not on Zed
ML2_DRIVERS = {"ovs": ("zed", "epoxy"), "ovn": ("epoxy",)}
RELEASES = ("zed", "epoxy")
SERIES = {"zed": "2022.2 Zed", "epoxy": "2025.1 Epoxy"}
MECHANISM_DRIVER = {"ovs": "openvswitch", "ovn": "ovn"}


def check_release(release: str, ml2: str) -> str:
    """'' if RELEASE and ML2 make an AIO, else the one line saying what to pass."""
    if release not in RELEASES:
        return f"--release {release[:40]!r}: unknown; use one of: {', '.join(RELEASES)}"
    if ml2 not in ML2_DRIVERS:
        return f"--ml2 {ml2[:40]!r}: unknown; use one of: {', '.join(ML2_DRIVERS)}"
    if release not in ML2_DRIVERS[ml2]:
        return (f"--ml2 {ml2} runs on --release {' or '.join(ML2_DRIVERS[ml2])}, not {release}: "
                "Zed's OVN driver binds ports without the netdev datapath (Launchpad #2045889)")
    return ""
PHYSNET = "physnet1"
# every tenant network type (heat-templates/ offers the same; one node: a tunnel type has
# no peer to tunnel to, but Neutron and the agent hold networks of it all the same)
NETWORK_TYPES = tuple(t.value for t in NetType)
TUNNEL_TYPES = tuple(t.value for t in NetType if t.is_tunnel)
IMAGE_NAME = "vnetbench-guest"
NETWORK_NAME = "vnetbench-flat"
# the external network (router:external) of routers' gateways and floating IPs: a VLAN of
# the physnet, apart from the flat network the runner reaches the guests on (a guest's
# management NIC there would otherwise answer the outside host directly, around its router)
EXTERNAL_NAME = "vnetbench-public"
EXTERNAL_VLAN = 4000
REGION = "RegionOne"


@dataclass(frozen=True)
class Layout:
    """Where one AIO keeps everything, and the names it owns."""
    state: Path
    run_id: str
    port_base: int = 19000
    cidr: str = "198.19.250.0/24"
    host: str = "localhost"            # the compute host name nova and neutron agree on
    password: str = "vnetbench"        # every service user's and the databases' password
    cpus: str = "0-1"                  # cpu_dedicated_set: host CPUs pinned guests get
    shared_cpus: str = ""              # cpu_shared_set: host CPUs unpinned guests float on
    # the OVS backend's packet rate in Placement (kpps), handed off from a capacity
    # profile (vnetbench.capacity.openstack); None: no packet-processing inventory
    ovs_kpps: int | None = None
    computes: int = 1                  # compute nodes: this machine's, then emulated ones
    release: str = "zed"               # zed: the machine's packages; epoxy: its root's
    ml2: str = "ovs"                   # the mechanism driver: ovs (agents) or ovn

    def port(self, name: str) -> int:
        return self.port_base + PORT_NAMES.index(name)

    def url(self, service: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port(service)}{path}"

    @property
    def etc(self) -> Path:
        return self.state / "etc"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    def data(self, name: str) -> Path:
        return self.state / "data" / name

    @property
    def ovs_run(self) -> Path:
        return self.state / "ovs"

    @property
    def ovsdb(self) -> str:
        return f"unix:{self.ovs_run / 'db.sock'}"

    @property
    def ovn_run(self) -> Path:
        """OVN's central databases, their sockets and ovn-northd's control socket."""
        return self.state / "ovn"

    def ovn_db(self, which: str) -> str:
        """The NB or SB database's connection string (WHICH: nb, sb)."""
        return f"unix:{self.ovn_run / f'ovn{which}_db.sock'}"

    @property
    def hosts_file(self) -> Path:
        """/etc/hosts inside the root: every node's host name on loopback (sudo, privsep)."""
        return self.etc / "hosts"

    # bridge names carry the run id (the netdev datapath makes each a tap in the root netns)
    @property
    def br_int(self) -> str:
        return f"vnb{self.run_id}-int"

    @property
    def br_tun(self) -> str:
        return f"vnb{self.run_id}-tun"

    @property
    def br_phys(self) -> str:
        return f"vnb{self.run_id}-phy"

    @property
    def instance_prefix(self) -> str:
        """libvirt domain names of this AIO's servers start with it."""
        return f"vnbaio{self.run_id}-"

    @property
    def host_cidr(self) -> str:
        """The host's address on the provider bridge: the subnet's first address."""
        net = ipaddress.ip_network(self.cidr)
        return f"{net.network_address + 1}/{net.prefixlen}"

    @property
    def external_cidr(self) -> str:
        """The external subnet: the flat subnet's twin in the other half of 198.18.0.0/15
        (198.19.250.0/24 -> 198.18.250.0/24)."""
        net = ipaddress.ip_network(self.cidr)
        return str(ipaddress.ip_network((int(net.network_address) ^ 0x10000, net.prefixlen)))

    @property
    def outside_cidr(self) -> str:
        """The outside namespace's address on the external network (its first): a machine
        beyond the routers, their upstream gateway (the external subnet's gateway_ip)."""
        net = ipaddress.ip_network(self.external_cidr)
        return f"{net.network_address + 1}/{net.prefixlen}"

    @property
    def outside_netns(self) -> str:
        return f"vnbaio{self.run_id}-outside"

    @property
    def outside_link(self) -> str:
        """Its veth's end on the provider bridge (the other end is the namespace's eth0)."""
        return f"vnb{self.run_id}-ox"

    @property
    def netns_dir(self) -> Path:
        """The L3 agent's /run/netns (its mount namespace's): its router namespaces are
        the AIO's by place, and go when the agent's mount namespace goes."""
        return self.state / "netns"

    @property
    def pool(self) -> tuple[str, str]:
        net = ipaddress.ip_network(self.cidr)
        return str(net.network_address + 10), str(net.broadcast_address - 1)

    def db_url(self, name: str) -> str:
        return (f"mysql+pymysql://root:{self.password}@127.0.0.1:{self.port('mysql')}/{name}"
                "?charset=utf8")

    @property
    def transport_url(self) -> str:
        return f"rabbit://guest:guest@127.0.0.1:{self.port('rabbit')}/"

    def conf_path(self, service: str, name: str | None = None) -> Path:
        return self.etc / service / (name or f"{service}.conf")

    # --- compute nodes ---------------------------------------------------------------------
    @property
    def nodes(self) -> tuple["Node", ...]:
        """Node 1 is this machine (root namespaces, the system libvirtd); nodes 2..N are
        emulated ones, each a network + mount + UTS namespace of its own."""
        return tuple(Node(self, i) for i in range(1, self.computes + 1))

    @property
    def underlay_cidr(self) -> str:
        """The tenant tunnels' underlay between the nodes (node i holds address .i): the
        flat subnet's third octet minus 100 (198.19.250.0/24 -> 198.19.150.0/24)."""
        net = ipaddress.ip_network(self.cidr)
        return str(ipaddress.ip_network((int(net.network_address) - (100 << 8), net.prefixlen)))

    @property
    def mgmt_cidr(self) -> str:
        """The management links (RabbitMQ from a node's agent): the external subnet's
        third octet minus 100 (198.18.250.0/24 -> 198.18.150.0/24), a /30 per node."""
        net = ipaddress.ip_network(self.external_cidr)
        return str(ipaddress.ip_network((int(net.network_address) - (100 << 8), net.prefixlen)))

    def subnets(self) -> tuple[str, ...]:
        """Every subnet the AIO puts on this machine's interfaces."""
        extra = (self.underlay_cidr, self.mgmt_cidr) if self.computes > 1 else ()
        return (self.cidr, self.external_cidr, *extra)


def split_cpus(spec: str, n: int) -> list[str]:
    """SPEC (a cpuset: '0-1', '0,2-3', '') shared out between N nodes, one CPU or more each,
    in order; '' stays '' everywhere. Fewer CPUs than nodes: a ValueError."""
    if not spec or n == 1:
        return [spec] * n
    cpus: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    if len(cpus) < n:
        raise ValueError(f"cpuset {spec!r} has {len(cpus)} CPU(s) for {n} compute nodes")
    per, extra = divmod(len(cpus), n)
    out, at = [], 0
    for i in range(n):
        take = per + (1 if i < extra else 0)
        out.append(",".join(map(str, cpus[at:at + take])))
        at += take
    return out


# what a node's libvirtd must not share with the machine's (mount point -> its dir's name)
HIDDEN = (("/run/libvirt", "run-libvirt"), ("/var/lib/libvirt", "lib-libvirt"),
          ("/var/log/libvirt", "log-libvirt"), ("/etc/libvirt/qemu", "etc-libvirt-qemu"))


@dataclass(frozen=True)
class Node:
    """One compute node of the AIO: its names, sockets, bridges and addresses."""
    lay: Layout
    index: int                         # 1 = this machine; 2.. = emulated nodes

    @property
    def primary(self) -> bool:
        return self.index == 1

    @property
    def name(self) -> str:
        return f"c{self.index}"

    @property
    def host(self) -> str:
        """Nova's [DEFAULT] host = the OVS agent's host = libvirtd's hostname (Placement's
        resource provider); dotted, so libvirt takes it as it is (no DNS lookup)."""
        return self.lay.host if self.primary else f"{self.name}.vnbaio{self.lay.run_id}.test"

    @property
    def netns(self) -> str | None:
        return None if self.primary else f"vnbaio{self.lay.run_id}-{self.name}"

    @property
    def dir(self) -> Path:
        return self.lay.state / "nodes" / self.name

    @property
    def etc(self) -> Path:
        return self.lay.etc / "nodes" / self.name

    @property
    def ovs_run(self) -> Path:
        return self.lay.ovs_run if self.primary else self.dir / "ovs"

    @property
    def ovsdb(self) -> str:
        return f"unix:{self.ovs_run / 'db.sock'}"

    def _br(self, kind: str) -> str:
        # the same on every node, as br-int is in a cloud: a live migration's destination
        # plugs the port into the bridge the source's binding names (each node's bridges
        # are in its own network namespace and OVS)
        return f"vnb{self.lay.run_id}-{kind}"

    @property
    def br_int(self) -> str:
        return self._br("int")

    @property
    def br_tun(self) -> str:
        return self._br("tun")

    @property
    def br_phys(self) -> str:
        return self._br("phy")

    @property
    def br_underlay(self) -> str:
        """The netdev bridge holding the tunnel endpoint (userspace tunnels leave through
        the bridge whose local port has the route's address) and the underlay link."""
        return self._br("ul")

    @property
    def migration_addr(self) -> str | None:
        """Nova's live_migration_inbound_addr: where a peer's QEMU sends this node the
        migration stream (its end of a management link; node 1: its end of node 2's),
        and the name of its libvirtd's socket dir in DIR/sockets (Nova's
        live_migration_uri takes that address). None with one node."""
        if self.lay.computes == 1:
            return None
        return self.lay.nodes[1].mgmt[0] if self.primary else self.mgmt[1]

    @property
    def libvirt_sock_dir(self) -> Path:
        """Where a peer reaches this node's libvirtd socket (libvirt peer to peer): node
        2..: its libvirtd's unix_sock_dir, outside the hidden /run/libvirt, so nova-compute
        and node 1's libvirtd reach it by path; node 1 (the system libvirtd): the
        machine's /run/libvirt, bound there inside each other node's mount namespace."""
        return self.lay.state / "sockets" / (self.migration_addr or self.host)

    @property
    def libvirt_uri(self) -> str:
        if self.primary:
            return "qemu:///system"
        return f"qemu+unix:///system?socket={self.libvirt_sock_dir / 'libvirt-sock'}"

    def hidden(self) -> tuple[tuple[str, Path], ...]:
        """(mount point, the node's own dir bound over it): libvirt's dirs, and Nova's
        instances dir (one path on every node, as Nova assumes: a disk keeps its path
        across a migration; each node's own disks behind it)."""
        shared = self.lay.nodes[0].nova_data / "instances"
        return (*((point, self.dir / sub) for point, sub in HIDDEN),
                (str(shared), self.nova_data / "instances"))

    @property
    def host_uuid(self) -> str:
        """libvirtd's host UUID (one per node: a migration to 'the same host' is refused)."""
        import uuid
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, self.host))

    @property
    def underlay_ip(self) -> str:
        return str(ipaddress.ip_network(self.lay.underlay_cidr).network_address + self.index)

    @property
    def local_ip(self) -> str:
        """The OVS agent's tunnel endpoint: one node has no peer, and keeps the provider
        bridge's address as before; with more, each node's underlay address."""
        if self.lay.computes == 1:
            return self.lay.host_cidr.split("/")[0]
        return self.underlay_ip

    @property
    def my_ip(self) -> str:
        """Nova's [DEFAULT] my_ip: the address a peer's nova-compute names this node by when
        it copies a disk here (a cold migration's rsync, through the nodes' remote shell)."""
        return "127.0.0.1" if self.primary else self.mgmt[1]

    @property
    def mgmt(self) -> tuple[str, str]:
        """(this machine's end, the node's end) of its management link, a /30 each."""
        base = ipaddress.ip_network(self.lay.mgmt_cidr).network_address + 4 * self.index
        return str(base + 1), str(base + 2)

    def link(self, kind: str) -> str:
        """This machine's end of the node's veth KIND: m (management), u (underlay, in node
        1's underlay bridge), p (provider, in node 1's provider bridge)."""
        return f"vnb{self.lay.run_id}-{kind}{self.index}"

    # inside the node's namespace
    INNER = {"m": "mgmt0", "u": "ul0", "p": "phy0"}

    @property
    def transport_url(self) -> str:
        at = "127.0.0.1" if self.primary else self.mgmt[0]
        return f"rabbit://guest:guest@{at}:{self.lay.port('rabbit')}/"

    @property
    def cpus(self) -> str:
        return split_cpus(self.lay.cpus, self.lay.computes)[self.index - 1]

    @property
    def shared_cpus(self) -> str:
        return split_cpus(self.lay.shared_cpus, self.lay.computes)[self.index - 1]

    @property
    def nova_data(self) -> Path:
        return self.lay.data("nova") if self.primary else self.lay.data(f"nova-{self.name}")

    def conf_path(self, service: str) -> Path:
        """nova.conf, openvswitch_agent.ini of this node."""
        if self.primary:
            return self.lay.conf_path("nova") if service == "nova" else \
                self.lay.conf_path("neutron", "openvswitch_agent.ini")
        return self.etc / ("nova.conf" if service == "nova" else "openvswitch_agent.ini")


def ini(sections: dict[str, dict[str, object]]) -> str:
    out = []
    for section, options in sections.items():
        out.append(f"[{section}]")
        out += [f"{k} = {_value(v)}" for k, v in options.items()]
        out.append("")
    return "\n".join(out)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _auth(lay: Layout, user: str) -> dict[str, object]:
    """A service user's password credentials in the service project."""
    return {"auth_type": "password", "auth_url": lay.url("keystone", "/v3"),
            "project_domain_name": "Default", "user_domain_name": "Default",
            "project_name": "service", "username": user, "password": lay.password,
            "region_name": REGION}


def _common(lay: Layout, service: str, rabbit: bool = True) -> dict[str, dict[str, object]]:
    base = {"DEFAULT": {"debug": False, "use_stderr": True},
            "database": {"connection": lay.db_url(service), "max_pool_size": 5},
            "oslo_concurrency": {"lock_path": lay.data(service) / "lock"},
            "keystone_authtoken": {"www_authenticate_uri": lay.url("keystone"),
                                   "service_token_roles_required": True, **_auth(lay, service)}}
    if rabbit:
        base["DEFAULT"]["transport_url"] = lay.transport_url
    return base


def keystone(lay: Layout) -> str:
    return ini({"DEFAULT": {"use_stderr": True},
                "database": {"connection": lay.db_url("keystone")},
                "token": {"provider": "fernet"},
                "fernet_tokens": {"key_repository": lay.data("keystone") / "fernet-keys"},
                "fernet_receipts": {"key_repository": lay.data("keystone") / "fernet-keys"},
                "credential": {"key_repository": lay.data("keystone") / "credential-keys"}})


def glance(lay: Layout) -> str:
    c = _common(lay, "glance", rabbit=False)
    c["DEFAULT"].update({"bind_host": "127.0.0.1", "bind_port": lay.port("glance"), "workers": 1,
                         "enabled_backends": "file:file"})
    c.update({"paste_deploy": {"flavor": "keystone",
                               "config_file": "/etc/glance/glance-api-paste.ini"},
              "glance_store": {"default_backend": "file"},
              "file": {"filesystem_store_datadir": lay.data("glance") / "images"},
              "os_glance_staging_store": {"filesystem_store_datadir": lay.data("glance") / "staging"},
              "os_glance_tasks_store": {"filesystem_store_datadir": lay.data("glance") / "tasks"}})
    return ini(c)


def placement(lay: Layout) -> str:
    c = _common(lay, "placement", rabbit=False)
    c["placement_database"] = c.pop("database")
    c["api"] = {"auth_strategy": "keystone"}
    return ini(c)


NOVA_FILTERS = ("ComputeFilter", "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
                "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter",
                "AvailabilityZoneFilter", "NUMATopologyFilter")


def nova_filters(lay: Layout) -> tuple[str, ...]:
    """The scheduler's filters: Nova 29 (2024.1) removed AvailabilityZoneFilter, whose work
    Placement does (query_placement_for_availability_zone, on by default)."""
    if lay.release == "zed":
        return NOVA_FILTERS
    return tuple(f for f in NOVA_FILTERS if f != "AvailabilityZoneFilter")


def nova(lay: Layout, node: "Node | None" = None) -> str:
    """nova.conf of NODE's nova-compute (node 1's file serves the API, conductor and
    scheduler too): its host, libvirtd, OVS, CPUs and files."""
    node = node or lay.nodes[0]
    c = _common(lay, "nova")
    c["oslo_concurrency"]["lock_path"] = node.nova_data / "lock"
    c["DEFAULT"].update({
        "host": node.host, "my_ip": node.my_ip,
        "state_path": node.nova_data,
        # one path on every node (a disk keeps its path across a migration); node 2..'s
        # mount namespace binds its own dir there (Node.hidden)
        "instances_path": lay.nodes[0].nova_data / "instances", **_metadata_api(lay),
        "osapi_compute_listen": "127.0.0.1", "osapi_compute_listen_port": lay.port("nova"),
        "osapi_compute_workers": 1, "compute_driver": "libvirt.LibvirtDriver",
        "instance_name_template": f"{lay.instance_prefix}%08x",
        "force_config_drive": True, "config_drive_format": "iso9660",
        "reserved_host_memory_mb": 512, "heal_instance_info_cache_interval": -1,
        # the suite's guest image has no ACPI handler: a stop or cold migration would wait
        # Nova's 60 s for a clean shutdown that never comes, then destroy the guest anyway
        "shutdown_timeout": 5,
        "rootwrap_config": "/etc/nova/rootwrap.conf"})
    c["api_database"] = {"connection": lay.db_url("nova_api"), "max_pool_size": 5}
    c.update({
        "api": {"auth_strategy": "keystone"},
        "wsgi": {"api_paste_config": "/etc/nova/api-paste.ini"},
        "conductor": {"workers": 1},
        "scheduler": {"workers": 1, "discover_hosts_in_cells_interval": 2},
        "filter_scheduler": {"enabled_filters": ",".join(nova_filters(lay))},
        # pinned guests take whole host CPUs (PCPU inventory), unpinned ones share the
        # others (VCPU): a host offers only what is set, and the two sets may not overlap
        "compute": {k: v for k, v in (("cpu_dedicated_set", node.cpus),
                                      ("cpu_shared_set", node.shared_cpus)) if v},
        # no usable KVM here (REFERENCE §4): TCG, and no APIC as devstack sets without KVM
        "libvirt": {"virt_type": "qemu", "cpu_mode": "none", "connection_uri": node.libvirt_uri,
                    **_migration(lay, node)},
        "workarounds": {"libvirt_disable_apic": True},
        "vnc": {"enabled": False},
        "serial_console": {"enabled": False},
        "placement": _auth(lay, "placement"),
        "neutron": {**_auth(lay, "neutron"), **({"service_metadata_proxy": True,
                    "metadata_proxy_shared_secret": lay.password} if lay.ml2 == "ovn" else {})},
        "glance": {"region_name": REGION},
        "service_user": {"send_service_user_token": True, **_auth(lay, "nova")},
        "os_vif_ovs": {"ovsdb_connection": node.ovsdb},
        # os-vif's device work (a tap's MTU, deleting it on unplug) in the node's network
        # namespace, where its libvirtd made the tap: nova-compute runs in this machine's,
        # and a migration's source deleted the destination's new tap of the same name there
        **({} if node.primary else {"vif_plug_ovs_privileged": {"helper_command": (
            f"nsenter --net=/run/netns/{node.netns} -- privsep-helper --config-file "
            f"{node.conf_path('nova')}")}}),
        "oslo_messaging_notifications": {"driver": "noop"},
    })
    return ini(c)


def _metadata_api(lay: Layout) -> dict[str, object]:
    """Nova's APIs: with ML2/OVN also the metadata API its agents proxy the guests to (the
    guests' config drive stays: the suite's image reads it). Emulated nodes' agents reach
    it from their namespaces over the management links, so with more nodes it listens on
    every address of this machine."""
    if lay.ml2 != "ovn":
        return {"enabled_apis": "osapi_compute"}
    return {"enabled_apis": "osapi_compute,metadata", "metadata_workers": 1,
            "metadata_listen": "127.0.0.1" if lay.computes == 1 else "0.0.0.0",
            "metadata_listen_port": lay.port("metadata")}


def _migration(lay: Layout, node: Node) -> dict[str, object]:
    """Live migration between the nodes, libvirt peer to peer: the source's libvirtd
    reaches the destination's by its socket (named by the destination's inbound address,
    which Nova puts into live_migration_uri), and QEMU's stream goes to that address over
    the management link (Nova's migrate URI tcp://<inbound addr>)."""
    if not node.migration_addr:
        return {}
    return {"live_migration_uri": f"qemu+unix:///system?socket={lay.state / 'sockets'}/%s/libvirt-sock",
            "live_migration_inbound_addr": node.migration_addr,
            # block migration copies the ISO config drive first with "rsync HOST:PATH"; its
            # remote shell (RSYNC_RSH, Aio._node_shell) runs it in that node's namespaces
            "remote_filesystem_transport": "rsync"}


# placement: the OVS agent's resource providers (bandwidth, packet rate) in Placement, so
# Nova schedules a port's QoS minimum guarantees (vnetbench.capacity.openstack); ML2/OVN
# reports no packet-rate inventory, and routers are OVN's own (ovn-router)
SERVICE_PLUGINS = {"ovs": "router,qos,placement", "ovn": "ovn-router,qos"}


def neutron(lay: Layout) -> str:
    c = _common(lay, "neutron")
    c["DEFAULT"].update({
        "host": lay.host, "bind_host": "127.0.0.1", "bind_port": lay.port("neutron"),
        "core_plugin": "ml2", "service_plugins": SERVICE_PLUGINS[lay.ml2], "auth_strategy": "keystone",
        "api_workers": 1, "rpc_workers": 1, "rpc_state_report_workers": 1,
        "state_path": lay.data("neutron"), "api_paste_config": "/etc/neutron/api-paste.ini",
        "notify_nova_on_port_status_changes": True, "notify_nova_on_port_data_changes": True})
    c.update({"nova": _auth(lay, "nova"), "placement": _auth(lay, "neutron"),
              "agent": {"root_helper": "env", "root_helper_daemon": ""},
              "oslo_messaging_notifications": {"driver": "noop"}})
    return ini(c)


def ml2(lay: Layout) -> str:
    return ml2_ovn(lay) if lay.ml2 == "ovn" else ini({
        "ml2": {"type_drivers": ",".join(NETWORK_TYPES), "tenant_network_types": "vxlan",
                "mechanism_drivers": "openvswitch", "extension_drivers": "port_security,qos"},
        "ml2_type_flat": {"flat_networks": PHYSNET},
        # the physnet alone: provider VLANs of any id on it, no tenant VLAN pool
        "ml2_type_vlan": {"network_vlan_ranges": PHYSNET},
        "ml2_type_vxlan": {"vni_ranges": "1:1000"},
        "ml2_type_gre": {"tunnel_id_ranges": "1:1000"},
        "ml2_type_geneve": {"vni_ranges": "1:1000"},
        "securitygroup": {"firewall_driver": "openvswitch", "enable_security_group": True}})


# what ML2/OVN offers tenants: Geneve for tunnels (OVN's VXLAN serves only its gateways and
# VTEPs, and GRE not at all), and the physnet's flat and VLAN networks
OVN_NETWORK_TYPES = ("flat", "vlan", "geneve")


def ml2_ovn(lay: Layout) -> str:
    """ML2 with OVN's mechanism driver: Neutron writes the NB database, OVN's DHCP and L3
    replace the agents; security groups become OVN ACLs (port groups)."""
    return ini({
        "ml2": {"type_drivers": ",".join(OVN_NETWORK_TYPES), "tenant_network_types": "geneve",
                "mechanism_drivers": "ovn", "extension_drivers": "port_security,qos",
                "overlay_ip_version": 4},
        "ml2_type_flat": {"flat_networks": PHYSNET},
        "ml2_type_vlan": {"network_vlan_ranges": PHYSNET},
        # Geneve's header with OVN's options (38 bytes): the networks' MTU is 1442
        "ml2_type_geneve": {"vni_ranges": "1:1000", "max_header_size": 38},
        "securitygroup": {"enable_security_group": True},
        "ovn": {"ovn_nb_connection": lay.ovn_db("nb"), "ovn_sb_connection": lay.ovn_db("sb"),
                "ovn_l3_scheduler": "leastloaded", "ovn_metadata_enabled": True,
                "enable_distributed_floating_ip": False, "ovn_emit_need_to_frag": False}})


def ovn_metadata_agent(lay: Layout, node: "Node") -> str:
    """NODE's OVN metadata agent: it plugs each network's metadata port into the node's
    integration bridge (the one its OVS's external_ids:ovn-bridge names, which it reports
    to Neutron in the SB's Chassis_Private, so bindings name that bridge) and proxies the
    guests' requests to Nova's metadata API."""
    at = "127.0.0.1" if node.primary else node.mgmt[0]
    return ini({
        "DEFAULT": {"host": node.host, "nova_metadata_host": at,
                    "nova_metadata_port": lay.port("metadata"),
                    "metadata_proxy_shared_secret": lay.password,
                    "state_path": node.dir / "neutron" if not node.primary else lay.data("neutron"),
                    "metadata_workers": 1},
        "agent": {"root_helper": "env", "root_helper_daemon": ""},
        "ovs": {"ovsdb_connection": node.ovsdb},
        "ovn": {"ovn_sb_connection": lay.ovn_db("sb")},
        "oslo_concurrency": {"lock_path": node.dir / "neutron" / "lock"}})


def ovs_agent(lay: Layout, node: "Node | None" = None) -> str:
    """NODE's OVS agent (read after neutron.conf, whose [DEFAULT] it overrides for a node
    of its own: host, RabbitMQ over the management link, locks)."""
    node = node or lay.nodes[0]
    inventory = ({"resource_provider_packet_processing_without_direction": f"{node.host}:{lay.ovs_kpps}"}
                 if lay.ovs_kpps else {})
    default: dict[str, object] = {"host": node.host}
    extra: dict[str, dict[str, object]] = {}
    if not node.primary:
        default.update({"transport_url": node.transport_url, "state_path": node.dir / "neutron"})
        extra["oslo_concurrency"] = {"lock_path": node.dir / "neutron" / "lock"}
    return ini({
        "DEFAULT": default, **extra,
        "ovs": {"bridge_mappings": f"{PHYSNET}:{node.br_phys}", "integration_bridge": node.br_int,
                "tunnel_bridge": node.br_tun, "datapath_type": "netdev", "local_ip": node.local_ip,
                "ovsdb_connection": node.ovsdb, "of_listen_address": "127.0.0.1",
                "of_listen_port": lay.port("openflow"), **inventory},
        "agent": {"tunnel_types": ",".join(TUNNEL_TYPES), "root_helper": "env",
                  "root_helper_daemon": "", "extensions": "qos"},
        "securitygroup": {"firewall_driver": "openvswitch"}})


def l3_agent(lay: Layout) -> str:
    """Neutron's legacy L3 agent on the one node (no DVR, no HA, no metadata proxy): a
    router namespace per router, its ports on the integration bridge. ovs_use_veth: the
    netdev datapath's internal ports are taps that stop carrying traffic once moved into
    a namespace, so each router port is a veth (the OVS-DPDK deployments' setting)."""
    return ini({
        "DEFAULT": {"host": lay.host, "interface_driver": "openvswitch", "ovs_use_veth": True,
                    "agent_mode": "legacy", "enable_metadata_proxy": False,
                    # a call lost at start (the server not yet consuming) costs this, not 60 s
                    "rpc_response_timeout": 15},
        "agent": {"root_helper": "env", "root_helper_daemon": ""},
        # datapath_type: the driver turns the veth's offloads off for the userspace datapath
        "ovs": {"integration_bridge": lay.br_int, "ovsdb_connection": lay.ovsdb,
                "datapath_type": "netdev"}})


def heat(lay: Layout) -> str:
    c = _common(lay, "heat")
    c["DEFAULT"].update({
        "num_engine_workers": 1, "stack_domain_admin": "heat_domain_admin",
        "stack_domain_admin_password": lay.password, "stack_user_domain_name": "heat",
        "heat_metadata_server_url": lay.url("heat"),
        "heat_waitcondition_server_url": lay.url("heat", "/v1/waitcondition")})
    c.update({"heat_api": {"bind_host": "127.0.0.1", "bind_port": lay.port("heat"), "workers": 1},
              "paste_deploy": {"api_paste_config": "/etc/heat/api-paste.ini"},
              "trustee": {"auth_type": "password", "auth_url": lay.url("keystone"),
                          "username": "heat", "password": lay.password,
                          "user_domain_name": "Default"},
              "clients_keystone": {"auth_uri": lay.url("keystone")},
              "oslo_messaging_notifications": {"driver": "noop"}})
    return ini(c)


def rabbitmq(lay: Layout) -> str:
    """rabbitmq.conf: a listener on loopback and, with more nodes, one on this machine's end
    of each node's management link; guest may log in from there (it is not loopback)."""
    lines = [f"listeners.tcp.local = 127.0.0.1:{lay.port('rabbit')}"]
    for node in lay.nodes[1:]:
        lines.append(f"listeners.tcp.{node.name} = {node.mgmt[0]}:{lay.port('rabbit')}")
    if lay.computes > 1:
        lines.append("loopback_users = none")
    return "\n".join(lines) + "\n"


def libvirtd(node: Node) -> str:
    """libvirtd.conf of an emulated node: its sockets by path, its own host UUID."""
    return "\n".join([f'unix_sock_dir = "{node.libvirt_sock_dir}"', f'host_uuid = "{node.host_uuid}"',
                      'unix_sock_rw_perms = "0770"', 'auth_unix_rw = "none"', ""])


def hosts(lay: Layout) -> str:
    """The root's /etc/hosts: loopback, and every node's host name (sudo and privsep look
    their own up)."""
    return "\n".join(["127.0.0.1 localhost", *(f"127.0.1.1 {n.host}" for n in lay.nodes),
                      "::1 localhost ip6-localhost ip6-loopback", ""])


def files(lay: Layout) -> dict[Path, str]:
    """Every configuration file the AIO writes (all inside its state dir)."""
    nodes: dict[Path, str] = {}
    for node in lay.nodes[1:]:
        nodes.update({node.conf_path("nova"): nova(lay, node),
                      node.etc / "libvirtd.conf": libvirtd(node)})
        if lay.ml2 == "ovs":
            nodes[node.conf_path("neutron")] = ovs_agent(lay, node)
    if lay.ml2 == "ovn":
        nodes.update({node.etc / "ovn_metadata_agent.ini": ovn_metadata_agent(lay, node)
                      for node in lay.nodes})
    else:
        nodes.update({lay.conf_path("neutron", "openvswitch_agent.ini"): ovs_agent(lay),
                      lay.conf_path("neutron", "l3_agent.ini"): l3_agent(lay)})
    if lay.release != "zed":
        nodes[lay.hosts_file] = hosts(lay)
    return {**nodes, lay.conf_path("keystone"): keystone(lay),
            lay.data("rabbitmq") / "rabbitmq.conf": rabbitmq(lay),
            lay.conf_path("glance", "glance-api.conf"): glance(lay),
            lay.conf_path("placement"): placement(lay),
            lay.conf_path("nova"): nova(lay),
            lay.conf_path("neutron"): neutron(lay),
            lay.conf_path("neutron", "ml2_conf.ini"): ml2(lay),
            lay.conf_path("heat"): heat(lay)}
