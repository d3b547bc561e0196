"""An OpenStack testbed: a Heat stack of Nova servers reached over SSH (the image's
command channel), directly on their network's addresses or through a gateway.
Implements vnetbench.testbed.deployment.Deployment; what a cloud does not let a tenant
do (host-side commands, vSwitch internals, faults) is an UnsupportedError with why."""

from __future__ import annotations

from pathlib import Path

from vnetbench.errors import UnsupportedError
from vnetbench.image.channel import Ssh
from vnetbench.linux import proc
from vnetbench.testbed.base import RunDeployment
from vnetbench.testbed.openstack import facts, ports
from vnetbench.testbed.sshguests import SshGuests

NOT_OURS = "the cloud's compute nodes are not vnetbench's"


def mux_dir(run_id: str) -> Path:
    return Path(f"/tmp/vnbmux-{run_id}")


class OpenstackDeployment(SshGuests, RunDeployment):
    backend = "openstack"

    # -- the command channel -------------------------------------------------------

    def ssh(self, vm: str) -> Ssh:
        """On the VM's management NIC when it has one (--mgmt-network), else its address."""
        meta = self.run.meta()
        address = (meta.get("mgmt") or {}).get(vm) or self.ip(vm)
        return Ssh(address, self.run.dir / "guest-key", mux_dir(self.run_id),
                   jump=meta.get("options", {}).get("gateway") or None)

    # -- the outside host: a namespace of this machine on the external network --------

    def _outside(self, name: str) -> str | None:
        """The namespace of the external host NAME (--outside netns:NS), None for a VM."""
        if self.testbed.external_host(name) is None:
            return None
        return (self.run.meta().get("options") or {}).get("outside", "").removeprefix("netns:")

    def vm_argv(self, vm: str, argv) -> list[str]:
        ns = self._outside(vm)
        return proc.in_netns(ns, argv) if ns else SshGuests.vm_argv(self, vm, argv)

    def popen(self, vm: str, argv, **kwargs):
        ns = self._outside(vm)
        if not ns:
            return SshGuests.popen(self, vm, argv, **kwargs)
        return self._spawn(proc.in_netns(ns, argv), argv, kwargs, vm=vm)

    # -- the host side: the cloud's, not ours -----------------------------------------

    def host_argv(self, host: str, argv) -> list[str]:
        raise UnsupportedError(f"openstack: no host-side commands ({NOT_OURS})")

    def host_popen(self, host: str, argv, **kwargs):
        raise UnsupportedError(f"openstack: no host-side commands ({NOT_OURS})")

    def vm_port(self, vm: str, nic: int = 0) -> tuple[str, str]:
        raise UnsupportedError(f"openstack: no host-side port of {vm} ({NOT_OURS})")

    def host_file(self, host: str, name: str) -> Path:
        return self.run.dir / host / name

    def vswitch_pids(self, host: str) -> dict:
        return {}

    def vm_pidfiles(self, host: str) -> list[Path]:
        return []       # a compute node's QEMUs are its own collector's (found there by name)

    def controller_pids(self) -> dict:
        return {}

    def ovs_appctl(self, host: str, *args, timeout: float = 10) -> str:
        raise UnsupportedError(f"openstack: no ovs-appctl on {host} ({NOT_OURS})")

    def expire_flows(self, layers=None) -> None:
        """Nothing: the flow caches are the compute nodes'. 'deferred' echoes then take
        the slow path only when spaced beyond the flow idle timeout (gap_s); the run's
        meta says so (flow_flush)."""

    def cpu_probe(self, wait: bool = True) -> Path | None:
        return None

    def update_security_groups(self, groups) -> float:
        """New rules for the testbed's groups through Neutron's API (rules added before the
        old ones go); returns when Neutron answered, as a tenant's call does: the agents
        apply them after (the latency rows measure that). The run's testbed follows."""
        import time

        from vnetbench.testbed.codec import to_dict
        from vnetbench.testbed.openstack import secgroups
        from vnetbench.testbed.secgroups import replaced
        testbed, changed = replaced(self.testbed, groups, self.run_id)
        if getattr(self, "_sg_conn", None) is None:      # one session for every change
            self._sg_conn = self._connect()
        t0 = time.monotonic()
        secgroups.update(self._sg_conn, self.run_id, testbed, changed)
        took = time.monotonic() - t0
        self.testbed = testbed
        self.run.write_meta(testbed=to_dict(testbed))
        return took

    def remove_vnet(self, vnet: str) -> None:
        """Deprovision ``vnet`` as a tenant does: delete its VMs' ports (Neutron tells Nova,
        which unplugs them from the guests), then its subnets and network. The VMs stay,
        reached on their management NIC. Journaled first; the stack's own delete later
        passes over what is gone."""
        from vnetbench.testbed.openstack import cloud
        v = self.testbed.vnet(vnet)
        meta = self.run.meta()
        ports = {vm.name: (meta.get("ports") or {}).get(vm.name)
                 for vm in self.testbed.vms if vm.nics[0].vnet == v.name}
        if not ports or not all(ports.values()):
            raise UnsupportedError(f"openstack: run {self.run_id} recorded no ports of vnet "
                                   f"{v.name} (a run built before ports were recorded)")
        self.run.record("deprovision", vnet=v.name)
        conn = self._connect()
        try:
            network = _delete_ports(conn, ports)
            try:
                for subnet in list(conn.network.subnets(network_id=network)):
                    conn.network.delete_subnet(subnet, ignore_missing=True)
                conn.network.delete_network(network, ignore_missing=True)
            except Exception as exc:
                raise cloud.error(exc, f"deleting network {network} of vnet {v.name}") from None
        finally:
            conn.close()
        self.run.write_meta(removed_vnets=sorted({*meta.get("removed_vnets", []), v.name}))

    def remove_router_interface(self, router: str, vnet: str) -> None:
        """Remove the router's interface on VNET as a tenant does (Neutron's
        remove_router_interface by subnet); returns when Neutron answered, the L3 agent
        unplugs after (the functional row measures when traffic stops). The stack's own
        delete later passes over the interface that is gone."""
        from vnetbench.testbed.openstack import cloud
        self.testbed.router(router).port(vnet)          # a KeyError names what is not there
        meta = self.run.meta()
        vm = next(v.name for v in self.testbed.vms if v.nics[0].vnet == vnet)
        conn = self._connect()
        try:
            port = conn.network.get_port((meta.get("ports") or {})[vm])
            conn.network.remove_interface_from_router(meta["router"],
                                                      subnet=port.fixed_ips[0]["subnet_id"])
        except Exception as exc:
            raise cloud.error(exc, f"removing router {router}'s interface on {vnet}") from None
        finally:
            conn.close()

    # -- VM migration through Nova (admin; nova_migration.py) ---------------------------

    no_ports = ("a port without a VM is plugged on its compute node as os-vif would: the cloud's "
                "clouds.yaml must name its nodes (the all-in-one cloud's does)")

    def add_port(self, host: str, vnet: str) -> dict:
        return ports.add(self, host, vnet)

    def remove_port(self, name: str) -> None:
        ports.remove(self, name)

    def ports_ready(self, host: str, names) -> dict:
        return ports.ready(self, host, names)

    def added_ports(self) -> dict:
        return self.run.meta().get("added_ports", {})

    def port_popen(self, name: str, argv, **kwargs):
        return ports.popen(self, name, argv, **kwargs)

    def cloud_facts(self) -> dict:
        """The cloud's series, mechanism driver and the nodes' OVS/OVN versions (facts.py),
        asked once per run and kept in its meta: every record of the run names the same."""
        meta = self.run.meta()
        if isinstance(meta.get("cloud_facts"), dict):
            return meta["cloud_facts"]
        conn = self._connect()
        try:
            found = facts.collect(conn)
        finally:
            conn.close()
        self.run.write_meta(cloud_facts=found)
        return found

    def _connect(self):
        from vnetbench.testbed.openstack import cloud
        meta = self.run.meta()
        return cloud.connect(meta["cloud"], (meta.get("options") or {}).get("clouds_yaml"))

    def migration_target(self, vm: str, to_host: str) -> str:
        """The compute node of TO_HOST's servers, where VM's server would go."""
        from vnetbench.testbed.openstack import nova_migration as migrate
        meta = self.run.meta()
        migrate.refuse_member(meta, vm)                 # before any connection
        conn = self._connect()
        try:
            return migrate.plan(conn, self.testbed, meta, vm, to_host).target
        finally:
            conn.close()

    def migrate_vm(self, vm: str, to_host: str, live: bool) -> dict:
        """Nova moves VM's server to the compute node of TO_HOST's servers, its affinity
        group released first (nova_migration.py); the run's testbed and placement then
        say where it runs. Cold: the guest boots there, and this returns once its command
        channel answers again (a new master connection, owned by the run): ``outage_s`` is
        from Nova's first report of it powered off (polled every second) to that answer."""
        import time

        from vnetbench.testbed.openstack import nova_migration as migrate
        meta = self.run.meta()
        migrate.refuse_member(meta, vm)
        conn = self._connect()
        try:
            move = migrate.plan(conn, self.testbed, meta, vm, to_host)
            released = migrate.release(conn, move, self.run_id)
            if released:                    # said at once: the move may still fail
                self.run.write_meta(released_groups=sorted({*meta.get("released_groups", []),
                                                            *released}))
            if not live:
                self.ssh(vm).close()        # the guest powers off: its master would hang on
            t0 = time.monotonic()
            off = migrate.live(conn, move) if live else migrate.cold(conn, move)
            moved = time.monotonic()
            self._moved(move, to_host)
            out = {"move_s": moved - t0, "from_node": move.source, "to_node": move.target,
                   "released_groups": released}
            if not live:
                self._reconnect(vm, conn, move.server)
                out["outage_s"] = time.monotonic() - (off or t0)
            return out
        finally:
            conn.close()

    def _moved(self, move, to_host: str) -> None:
        """The testbed says VM's new testbed host; the placement facts its compute node."""
        meta = self.run.meta()
        place = dict(meta.get("placement") or {})
        hosts = {**(place.get("hosts") or {}), move.vm: move.target}
        place["hosts"] = hosts
        if "testbed_hosts" in place:         # testbed host -> the compute nodes of its VMs
            where = {v.name: to_host if v.name == move.vm else v.host for v in self.testbed.vms}
            place["testbed_hosts"] = {h: sorted({hosts[v] for v, at in where.items()
                                                 if at == h and hosts.get(v)})
                                      for h in place["testbed_hosts"]}
        self.vm_moved(move.vm, to_host, placement=place)

    def _reconnect(self, vm: str, conn, server: str) -> None:
        """Once the guest's sshd answers again: a new master connection, journaled."""
        import time

        from vnetbench.linux import proc
        from vnetbench.testbed.openstack import builder
        timeout = float((self.run.meta().get("options") or {}).get("ready_timeout_s") or 600)
        master = builder._open(self.ssh(vm), time.monotonic() + timeout, conn,
                               {"server": server, "name": vm})
        self.run.record("process", pid=master.pid, starttime=proc.starttime(master.pid),
                        vm=vm, argv=["ssh", "master"])

    @property
    def cpu_source(self) -> dict:
        """Where host-side CPU comes from: the collectors on the compute nodes through
        Prometheus (meta: prometheus URL and the VMs' compute hosts)."""
        meta = self.run.meta()
        return {"prometheus": meta.get("options", {}).get("prometheus") or "",
                "hosts": sorted({h for h in (meta.get("placement", {}).get("hosts") or {}).values()
                                 if h}) if meta.get("placement", {}).get("placement_by", "")
                .startswith("OS-EXT") else []}

    def status(self) -> dict:
        meta = self.run.meta()
        tb = self.testbed
        hosts = (meta.get("placement") or {}).get("hosts") or {}
        return {
            "run_id": self.run_id, "name": tb.name, "status": meta.get("status"),
            "backend": self.backend, "cloud": meta.get("cloud"), "stack": meta.get("stack"),
            "vswitch": tb.vswitch.kind.value, "network": tb.network.type.value,
            "ovs_datapath": None, "underlay_mtu": tb.network.underlay_mtu,
            "tenant_mtu": tb.network.tenant_mtu, "up_seconds": meta.get("up_seconds"),
            "hosts": [], "placement": meta.get("placement"), "pinning": meta.get("pinning"),
            "warnings": meta.get("warnings", []),
            "vms": [{"name": v.name, "host": hosts.get(v.name) or "?", "cpus": [],
                     "server": (meta.get("servers") or {}).get(v.name),
                     "nics": [{"vnet": n.vnet, "ip": str(n.ip), "mac": n.mac} for n in v.nics]}
                    for v in tb.vms],
            "removed_vnets": meta.get("removed_vnets", []), "controller": None, "errors": meta.get("errors", []),
        }


def _delete_ports(conn, ports: dict[str, str]) -> str:
    """Delete each VM's port; the network they were on."""
    from vnetbench.testbed.openstack import cloud
    network = None
    for vm, port_id in ports.items():
        try:
            port = conn.network.get_port(port_id)
            network = network or port.network_id
            conn.network.delete_port(port, ignore_missing=True)
        except Exception as exc:
            raise cloud.error(exc, f"deleting port {port_id} of {vm}") from None
    return network
