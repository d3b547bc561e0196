"""OVN (Debian's ovn-central / ovn-host 23.03), the real thing, on the embedded testbed.

In the controller namespace: the NB and SB ``ovsdb-server``s and ``ovn-northd``,
their files in ``<run>/controller/``. On every emulated host: its own OVS
(``ovs.OvsHost``) plus ``ovn-controller``, which reaches the SB database over the
management network (``mgmt``) and programs the host's integration bridge.
One logical switch per vnet (CIDRs may overlap: they are separate datapaths),
one logical switch port per VM NIC with ``addresses`` and ``port_security``
"MAC IP" and the vnet's native DHCP (``DHCP_Options``, as neutron sets it); the OVS
interface carries ``external_ids:iface-id`` = the port's name.
Userspace tunnels (geneve, vxlan) leave through the OVS bridge that holds the
underlay address (native tunnelling), as for the ``ovs`` kind; flat and VLAN
vnets leave through a localnet port and a provider bridge (``ovn-bridge-mappings``).

Faults (``stop``/``start``, called by ``vnetbench.faults``): ovn-northd and the
NB/SB database servers can be stopped and started again on their own files. With
``ovn: {northd: N}`` N ovn-northd instances run on the same databases: the one that
holds the SB lock works (active), the others wait for it (standby).
"""

from __future__ import annotations

import time
from pathlib import Path

from vnetbench.errors import BuildError
from vnetbench.linux import proc
from vnetbench.testbed.model import NetType
from vnetbench.testbed.netns import mgmt
from vnetbench.testbed.deployment import CONTROLLER_DIR
from vnetbench.kinds.ovs.netns import (  # noqa: F401  (tunnel_neighbours: the kind uses it here)
    OvsHost, _bridge, _port, address_underlays, rundir_env, start_host, tunnel_neighbours,
)

SB_PORT = 6642
SCHEMAS = Path("/usr/share/ovn")
ENCAP = {NetType.GENEVE: "geneve", NetType.VXLAN: "vxlan"}
VXLAN_MAX_KEY = 4095                 # OVN in VXLAN mode has 12 bits of datapath key
NB, SB, NORTHD = "ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd"


def northds(testbed) -> list[str]:
    """The ovn-northd instances' names: ``ovn-northd``, then ``ovn-northd-2`` ..."""
    n = testbed.vswitch.options.northd if testbed.vswitch.options else 1
    return [NORTHD, *(f"{NORTHD}-{i}" for i in range(2, n + 1))]


def components(testbed) -> list[str]:
    """Start order: the databases before the daemons that need them."""
    return [NB, SB, *northds(testbed)]


def port_name(vm: str, nic: int) -> str:
    """Logical switch port of a VM NIC (the NB database belongs to the run alone)."""
    return f"{vm}-eth{nic}"


class Central:
    """NB/SB databases and northd of one run. Built from anything with ``run``,
    ``testbed`` and ``names`` (the builder's context or a Deployment)."""

    def __init__(self, owner):
        self.run, self.testbed, self.names = owner.run, owner.testbed, owner.names
        self.rundir = self.run.dir / CONTROLLER_DIR
        self.nb = f"unix:{self.rundir / 'nb.sock'}"

    @property
    def env(self):
        return rundir_env(self.rundir)

    @property
    def sb_remote(self) -> str:
        return f"tcp:{mgmt.controller_ip(self.testbed)}:{SB_PORT}"

    @property
    def cpus(self):
        """The controller shares the hosts' CPUs (a 2-core machine has no spare one)."""
        return sorted({c for h in self.testbed.hosts for c in h.cpus})

    def argv(self, component: str) -> tuple[str, list]:
        d = self.rundir
        if component == NB:
            return "ovsdb-server", [str(d / "nb.db"), f"--remote=punix:{d / 'nb.sock'}"]
        if component == SB:
            return "ovsdb-server", [str(d / "sb.db"), f"--remote=punix:{d / 'sb.sock'}",
                                    f"--remote=ptcp:{SB_PORT}:{mgmt.controller_ip(self.testbed)}"]
        if component not in northds(self.testbed):
            raise BuildError(f"OVN component {component!r} is not one of run {self.run.run_id}'s")
        return "ovn-northd", [f"--ovnnb-db={self.nb}", f"--ovnsb-db=unix:{d / 'sb.sock'}"]

    def start(self) -> None:
        self.rundir.mkdir(mode=0o700)
        for db, schema in (("nb.db", "ovn-nb.ovsschema"), ("sb.db", "ovn-sb.ovsschema")):
            proc.run(["ovsdb-tool", "create", str(self.rundir / db), str(SCHEMAS / schema)],
                     env=self.env, what=f"ovsdb-tool create {db}")
        for component in components(self.testbed):
            self.start_component(component)

    def start_component(self, component: str) -> None:
        prog, args = self.argv(component)
        proc.daemon(self.run, self.rundir, prog, args, netns=self.names.ctl_ns, cpus=self.cpus,
                    env=self.env, owner="controller", name=component)

    def _mark(self, component: str) -> str:
        return f"--pidfile={self.rundir / (component + '.pid')}"

    def _ours(self, component: str):
        return lambda pid: self._mark(component) in proc.cmdline(pid).split()

    def pid(self, component: str) -> int | None:
        """The running daemon of this run (pidfile, guarded by its run-unique argument)."""
        try:
            pid = int((self.rundir / f"{component}.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if self._ours(component)(pid) else None

    def stop_component(self, component: str, graceful: bool = True) -> None:
        pid = self.pid(component)
        if pid and not proc.stop(pid, self._ours(component), grace=1.0, hard=not graceful):
            raise BuildError(f"{component} (pid {pid}) of run {self.run.run_id} did not exit")

    def nbctl(self, *args, timeout=15) -> str:
        return self._ctl("ovn-nbctl", self.nb, args, timeout)

    def sbctl(self, *args, timeout=15) -> str:
        return self._ctl("ovn-sbctl", f"unix:{self.rundir / 'sb.sock'}", args, timeout)

    def _ctl(self, prog: str, db: str, args, timeout) -> str:
        return proc.run([prog, f"--db={db}", f"--timeout={max(1, round(timeout))}", *args],
                        env=self.env, timeout=timeout + 5, what=prog)

    def configure(self) -> None:
        """Every logical switch and port in one NB transaction; then, with security
        groups, their port groups and ACLs as Neutron's OVN driver writes them."""
        self.nbctl(*nb_transaction(self.testbed, self.run.run_id))
        if self.testbed.port_security:
            from vnetbench.kinds.ovn import acls
            self.nbctl(*acls.transaction(self.testbed, self.run.run_id, port_name))

    def wait_ready(self, timeout: float = 30) -> None:
        """Until every logical port is up (bound, its flows installed) and every chassis
        has caught up with the NB database (so tunnels to its peers exist)."""
        tx = []
        for vm in self.testbed.vms:
            for k in range(len(vm.nics)):
                tx += ["--", "wait-until", "Logical_Switch_Port", port_name(vm.name, k), "up=true"]
        self.nbctl(*tx[1:], timeout=timeout)
        self.nbctl("--wait=hv", "sync", timeout=timeout)


def nb_transaction(testbed, run_id: str) -> list[str]:
    own = f"external_ids:vnetbench-run={run_id}"
    tx = []
    for vnet in testbed.vnets:
        tx += ["--", "ls-add", vnet.name, "--", "set", "Logical_Switch", vnet.name, own]
        key = vnet.segmentation_id
        if key and (testbed.network.type is not NetType.VXLAN or key <= VXLAN_MAX_KEY):
            tx += ["--", "set", "Logical_Switch", vnet.name, f"other_config:requested-tnl-key={key}"]
    if not testbed.network.type.is_tunnel:
        tx += _localnet_ports(testbed, own)
    servers, vnet_i = dhcp_servers(testbed), {v.name: i for i, v in enumerate(testbed.vnets)}
    tx += _dhcp_options(testbed, servers, own)
    for vm in testbed.vms:
        for k, nic in enumerate(vm.nics):
            lsp, addr = port_name(vm.name, k), f"{nic.mac} {nic.ip}"
            # port security off (a testbed with security groups says so per port): Neutron
            # leaves the port's port_security empty; else only its MAC and IP may leave it
            spoof = testbed.port_security and not nic.port_security
            tx += ["--", "lsp-add", nic.vnet, lsp,
                   "--", "lsp-set-addresses", lsp, addr,
                   *([] if spoof else ["--", "lsp-set-port-security", lsp, addr]),
                   "--", "set", "Logical_Switch_Port", lsp, own]
            if nic.vnet in servers:
                tx.append(f"dhcpv4_options={_dhcp_ref(vnet_i[nic.vnet])}")
            if nic.qos:     # OVN's logical port QoS: a meter on what the port gets or sends
                way, field = ("from-lport", "inport") if nic.qos.egress else ("to-lport", "outport")
                tx += ["--", "qos-add", nic.vnet, way, "1000", f'{field} == "{lsp}"',
                       f"rate={nic.qos.max_kbps}", f"burst={nic.qos.max_burst_kbits}"]
    return tx[1:]


DHCP_LEASE_S = 43200     # neutron's [ovn] dhcp_default_lease_time


def dhcp_servers(testbed) -> dict[str, tuple[str, str]]:
    """vnet -> (server_id, server_mac) of its OVN DHCP server; a vnet with no address left
    for it has none. Neutron takes the subnet's gateway; our vnets have none, so the
    highest host address no VM holds (as a DHCP port's). The MAC is in Neutron's
    base_mac fa:16:3e (no VM's: theirs are 02:76:6e)."""
    used = {v.name: set() for v in testbed.vnets}
    for vm in testbed.vms:
        for nic in vm.nics:
            used[nic.vnet].add(nic.ip)
    for router in testbed.routers:          # a router's interface holds its address too
        for p in router.ports:
            used[p.vnet].add(p.ip)
    out = {}
    for vi, vnet in enumerate(testbed.vnets):
        top, taken = vnet.cidr.broadcast_address, used[vnet.name]
        ip = next((top - k for k in range(1, len(taken) + 2)
                   if top - k > vnet.cidr.network_address and top - k not in taken), None)
        if ip:
            out[vnet.name] = (str(ip), "fa:16:3e:ff:{:02x}:{:02x}".format(vi >> 8 & 0xff, vi & 0xff))
    return out


def _dhcp_ref(vnet_i: int) -> str:
    return f"@dhcp{vnet_i}"


def _dhcp_options(testbed, servers, own) -> list[str]:
    """OVN native DHCP as neutron's OVN driver sets it (ovn_client._get_ovn_dhcpv4_opts):
    one DHCP_Options row per subnet with server_id, server_mac, lease_time and mtu, and
    every VM port's dhcpv4_options pointing at it (``_dhcp_ref``); ovn-controller then
    answers a VM's DHCPDISCOVER/REQUEST itself (put_dhcp_opts). No ``router``: our vnets
    have no gateway."""
    tx = []
    for vi, vnet in enumerate(testbed.vnets):
        if vnet.name not in servers:
            continue
        server_id, server_mac = servers[vnet.name]
        opts = (f'{{server_id="{server_id}",server_mac="{server_mac}",'
                f'lease_time="{DHCP_LEASE_S}",mtu="{testbed.network.tenant_mtu}"}}')
        tx += ["--", f"--id={_dhcp_ref(vi)}", "create", "DHCP_Options", f'cidr="{vnet.cidr}"',
               f"options={opts}", own]
    return tx


def physnet(testbed, vnet_i: int) -> str:
    """Provider network name of a vnet: flat vnets each have their own physical
    network; VLAN vnets share one, told apart by their tag."""
    return f"physnet{vnet_i}" if testbed.network.type is NetType.FLAT else "physnet"


def _localnet_ports(testbed, own) -> list[str]:
    """Flat/VLAN: each logical switch reaches the provider network through a
    localnet port (tagged with the segmentation id on VLAN)."""
    tx = []
    for vi, vnet in enumerate(testbed.vnets):
        ln = f"ln-{vnet.name}"
        tx += ["--", "lsp-add", vnet.name, ln, "--", "lsp-set-type", ln, "localnet",
               "--", "lsp-set-addresses", ln, "unknown",
               "--", "lsp-set-options", ln, f"network_name={physnet(testbed, vi)}",
               "--", "set", "Logical_Switch_Port", ln, own]
        if vnet.segmentation_id is not None:
            tx += ["--", "set", "Logical_Switch_Port", ln, f"tag={vnet.segmentation_id}"]
    return tx


class OvnHost(OvsHost):
    """A hypervisor: ovsdb-server + ovs-vswitchd (as OvsHost) and ovn-controller."""

    def __init__(self, ctx, host, central: Central):
        super().__init__(ctx, host)
        self.central = central

    def configure(self, datapath: str) -> None:
        """The OVS side in one transaction (limits are OVN's logical port QoS, not the
        ``ovs`` kind's meters), then ovn-controller."""
        self.apply(datapath)
        # ovn-controller 23.03 takes no --unixctl: its socket goes to $OVN_RUNDIR
        self._daemon("ovn-controller", [self.db], netns=self.ctx.names.host_ns(self.host.name),
                     unixctl=False)

    def _transaction(self, datapath: str) -> list[str]:
        ctx, host = self.ctx, self.host
        tb, names, rid = ctx.testbed, ctx.names, ctx.run.run_id
        own = f"external_ids:vnetbench-run={rid}"
        uplinks, mappings = self._provider(datapath, own)
        if host.name in tb.gateway_hosts():     # the external network's provider bridge
            from vnetbench.kinds.ovn.routers import EXT_PHYSNET
            uplinks += _bridge(names.ext_bridge, datapath, own) + _port(names.ext_bridge, names.ext_uplink, own)
            mappings = ",".join(m for m in (mappings, f"{EXT_PHYSNET}:{names.ext_bridge}") if m)
        # a chassis always has an encapsulation; flat/VLAN switches never use it
        tx = self._open_vswitch(("ovn-remote", self.central.sb_remote),
                                ("ovn-encap-type", ENCAP.get(tb.network.type, "geneve")),
                                ("ovn-encap-ip", host.underlay_ip), ("ovn-bridge", names.ovs_int),
                                ("ovn-bridge-datapath-type", datapath),
                                *([("ovn-bridge-mappings", f'"{mappings}"')] if mappings else []))
        tx += _bridge(names.ovs_int, datapath, own)
        tx += ["--", "set", "Bridge", names.ovs_int, "fail_mode=secure",
               "other_config:disable-in-band=true"]
        vm_i = {vm.name: i for i, vm in enumerate(tb.vms)}
        for vm in tb.vms_on(host.name):
            for k in range(len(vm.nics)):
                port = names.vm_port(vm_i[vm.name], k)
                tx += _port(names.ovs_int, port, own)
                tx += ["--", "set", "Interface", port,
                       f"external_ids:iface-id={port_name(vm.name, k)}", own]
        return tx + uplinks

    def _provider(self, datapath: str, own) -> tuple[list[str], str]:
        """The host's way out: tunnels leave through the bridge holding the underlay
        address; flat vnets each through a provider bridge on their physnet veth;
        VLAN through one provider bridge on the uplink. Returns (transaction part,
        ovn-bridge-mappings)."""
        tb, names, ntype = self.ctx.testbed, self.ctx.names, self.ctx.testbed.network.type
        if ntype.is_tunnel:
            return (_bridge(names.ovs_phy, datapath, own)
                    + ["--", "set", "Interface", names.ovs_phy, f"mtu_request={tb.network.underlay_mtu}"]
                    + _port(names.ovs_phy, names.uplink, own)), ""
        tx, maps = [], []
        if ntype is NetType.VLAN:
            br = names.provider_bridge()
            tx += _bridge(br, datapath, own) + _port(br, names.uplink, own)
            maps.append(f"{physnet(tb, 0)}:{br}")
        else:
            for vnet in tb.vnets_on(self.host.name):
                vi = self.ctx.vnet_index(vnet.name)
                br = names.provider_bridge(vi)
                tx += _bridge(br, datapath, own) + _port(br, names.physnet(vi), own)
                maps.append(f"{physnet(tb, vi)}:{br}")
        return tx, ",".join(maps)


def wire(ctx) -> None:
    """Central daemons and every host's OVS + ovn-controller in parallel (subprocesses
    only), then the underlay addresses (netlink, this thread), then wait for every host
    to register as a chassis (``ovn_chassis_seconds`` from the daemons' start) and for
    the ports (``ovn_ready_seconds``)."""
    from vnetbench.kinds.ovn import chassis
    central = Central(ctx)
    hosts = [OvnHost(ctx, h, central) for h in ctx.testbed.hosts]

    def central_up():
        central.start()
        central.configure()
    started = time.monotonic()
    proc.parallel([central_up] + [lambda o=o: start_host(ctx, o) for o in hosts])
    address_underlays(ctx, hosts)
    # every chassis first: --wait=hv waits only for the chassis the SB already has
    chassis.wait_registered(central, ctx.testbed.hosts, timeout=30 + len(hosts))
    t0 = time.monotonic()
    central.wait_ready(timeout=30 + len(hosts))
    ctx.run.write_meta(ovn_chassis_seconds=t0 - started, ovn_ready_seconds=time.monotonic() - t0)


# -- faults (called by the functional suite and the fault API) --------------

def fault_targets(testbed) -> dict[str, str]:
    """Fault API name -> component, in stop order: ``northd`` (``northd-2`` ...), ``sb``, ``nb``."""
    return {**{c.replace("ovn-", "", 1): c for c in northds(testbed)}, "sb": SB, "nb": NB}


def _target(dep, which: str) -> str:
    if dep.testbed.vswitch.kind.value != "ovn":
        raise BuildError(f"run {dep.run_id} is {dep.testbed.vswitch.kind}, not ovn: "
                         f"it has no OVN {which}")
    targets = fault_targets(dep.testbed)
    if which not in targets:
        raise BuildError(f"OVN component {which!r} unknown; use one of: {', '.join(targets)}")
    return targets[which]


def northd_status(dep, which: str) -> str:
    """``active`` (it holds the SB lock and works), ``standby``, or ``paused``: what the
    instance says of itself (``ovn-appctl status``)."""
    component = _target(dep, which)
    ctl = Central(dep).rundir / f"{component}.ctl"
    out = proc.run(["ovn-appctl", "-t", str(ctl), "status"], timeout=10,
                   what=f"ovn-appctl status of {component}")
    return out.split("Status:", 1)[-1].strip().split()[0] if "Status:" in out else out.strip()


def active(dep) -> str:
    """The ovn-northd instance that holds the SB lock (fault API name)."""
    found = [w for w in fault_targets(dep.testbed) if w.startswith("northd")
             and running(dep, w) and northd_status(dep, w) == "active"]
    if len(found) != 1:
        raise BuildError(f"run {dep.run_id}: {len(found)} active ovn-northd instances, not one")
    return found[0]


def sync(dep, timeout: float) -> float:
    """Seconds until ovn-northd has carried a new NB change into the SB database
    (``ovn-nbctl --wait=sb sync``): what needs a working northd. A time-out is an error."""
    t0 = time.monotonic()
    try:
        Central(dep).nbctl("--wait=sb", "sync", timeout=timeout)
    except BuildError as exc:
        raise BuildError(f"no ovn-northd carried an NB change into the SB database within "
                         f"{timeout:g} s ({exc})") from None
    return time.monotonic() - t0


def stop(dep, which: str, graceful: bool = True) -> None:
    """Stop the run's ovn-northd (``northd``) or SB/NB database server (``sb``/``nb``):
    SIGTERM, or SIGKILL when not ``graceful``. Its database file stays."""
    component = _target(dep, which)
    Central(dep).stop_component(component, graceful=graceful)


def start(dep, which: str) -> None:
    """Start it again on its own files (journaled again: teardown stops it); a
    component that is running is left alone. Once all three run, return when every
    chassis has caught up (``--wait=hv sync``), as the other kinds' controller starts
    return once their switches or agents are programmed again: ovn-controller
    reconnects to the SB with a back-off of up to 8 s."""
    component = _target(dep, which)
    central = Central(dep)
    if central.pid(component) is None:
        central.start_component(component)
    if all(central.pid(c) for c in components(dep.testbed)):
        central.nbctl("--wait=hv", "sync", timeout=30)


def flow_count(dep, host: str) -> int:
    """OpenFlow flows on the host's integration bridge (what ovn-controller installed)."""
    mgmt_sock = dep.run.dir / dep.testbed.host(host).name / f"{dep.names.ovs_int}.mgmt"
    out = proc.run(["ovs-ofctl", "dump-aggregate", f"unix:{mgmt_sock}"], what=f"ovs-ofctl on {host}")
    return int(out.split("flow_count=")[1].split()[0])


def wait_programmed(dep, host: str, flows: int, timeout: float = 30) -> None:
    """After a vSwitch restart: until ovn-controller has reconnected (it retries after
    a second) and installed at least ``flows`` flows again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if flow_count(dep, host) >= flows:
                return
        except BuildError:              # the bridge is not back yet
            pass
        if time.monotonic() > deadline:
            raise BuildError(f"ovn-controller of {host} did not re-program its bridge "
                             f"({flows} flows) within {timeout:.0f} s")
        time.sleep(0.1)


def running(dep, which: str) -> bool:
    component = _target(dep, which)
    return Central(dep).pid(component) is not None
