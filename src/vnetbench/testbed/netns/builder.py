"""Realise a Testbed as namespaces: fabric, hosts (each with its vSwitch), VMs.

The builder invents nothing: every name comes from ``Names``, every address from
the Testbed. Each namespace and daemon is journaled before it is created; if
bring-up fails or is interrupted, what was built is unwound before returning.
"""

from __future__ import annotations

import os
import time


from vnetbench import signals
from vnetbench.state import Run, new_run_id, state_root
from vnetbench.testbed import capabilities
from vnetbench.testbed.codec import to_dict
from vnetbench.testbed.model import NetType, Testbed, VSwitchKind
from vnetbench.testbed.netns import linuxbridge, links, mgmt, nsops, openflow, ovn, proc, vrouter
from vnetbench.testbed.netns.deployment import Deployment
from vnetbench.testbed.netns.names import Names
from vnetbench.testbed.netns.ovs import OvsHost
from vnetbench.testbed.netns.teardown import unwind


def up(testbed: Testbed, caps=None, progress=lambda msg: None) -> Deployment:
    """Build ``testbed``; on any failure unwind it and raise BuildError.

    The run's lock is held from the moment its directory appears until the
    testbed is up or unwound, so a concurrent ``cleanup`` leaves it alone."""
    caps = caps or capabilities.probe()
    caps.require(testbed)
    run = Run(new_run_id(), state_root())
    run.create(status="building", name=testbed.name, backend="netns", created=time.time(),
               builder_pid=os.getpid(), testbed=to_dict(testbed))
    try:
        with signals.deferred():
            try:
                _Context(run, testbed, caps).build(progress)
                signals.checkpoint()        # a signal during the last step still unwinds
            except BaseException as exc:
                unwind(run, exc, testbed.source)
    finally:
        run.unlock()
    return Deployment(run, testbed)


def context(dep: Deployment) -> "_Context":
    """The build context of a running testbed, for changes after bring-up."""
    return _Context(dep.run, dep.testbed, caps=None)


class _Context:
    """What the per-vSwitch wiring modules need to know about this build."""

    def __init__(self, run: Run, testbed: Testbed, caps):
        self.run, self.testbed, self.caps = run, testbed, caps
        self.names = Names(run.run_id)
        self._vnet_i = {v.name: i for i, v in enumerate(testbed.vnets)}
        self._host_i = {h.name: i for i, h in enumerate(testbed.hosts)}
        self._vm_i = {m.name: i for i, m in enumerate(testbed.vms)}

    def vnet_index(self, name): return self._vnet_i[name]
    def host_index(self, name): return self._host_i[name]

    def vm_ports(self, host: str, vnet: str) -> list[str]:
        """Host-side veth names of the VM NICs on ``vnet`` at ``host``."""
        return [self.names.vm_port(self._vm_i[vm.name], n)
                for vm in self.testbed.vms_on(host)
                for n, nic in enumerate(vm.nics) if nic.vnet == vnet]

    def qos_ports(self, host: str) -> list:
        """(host-side port, Qos) of every rate-limited VM NIC at ``host``."""
        return [(self.names.vm_port(self._vm_i[vm.name], n), nic.qos)
                for vm in self.testbed.vms_on(host)
                for n, nic in enumerate(vm.nics) if nic.qos]

    def peers(self, host: str, vnet: str):
        """Other hosts that carry ``vnet``: the tunnel endpoints / flood list."""
        return [h for h in self.testbed.hosts
                if h.name != host and any(v.name == vnet for v in self.testbed.vnets_on(h.name))]

    # -- build steps ---------------------------------------------------------

    def build(self, progress) -> None:
        tb = self.testbed
        t0 = time.monotonic()
        progress(f"run {self.run.run_id}: {len(tb.hosts)} hosts, {len(tb.vms)} VMs, "
                 f"{tb.vswitch.kind} over {tb.network.type}")
        self._namespaces()
        if tb.vswitch.kind is VSwitchKind.OVS_OPENFLOW:
            openflow.start(self)          # its imports overlap the rest of the bring-up
        if tb.vswitch.kind is VSwitchKind.VROUTER:
            vrouter.start(self)
        self._underlay()
        if mgmt.needed(tb):
            mgmt.build(self)
        self._vms()
        progress(f"namespaces and links ready ({time.monotonic() - t0:.2f} s)")
        self._vswitches()
        progress(f"vSwitches ready ({time.monotonic() - t0:.2f} s)")
        self.run.write_meta(status="up", up_seconds=time.monotonic() - t0,
                            ovs_datapath=self.datapath if self.is_ovs else None,
                            pinning={vm.name: list(vm.cpus) for vm in tb.vms},
                            namespaces=self.all_namespaces())

    @property
    def is_ovs(self) -> bool:
        return self.testbed.vswitch.kind in (VSwitchKind.OVS, VSwitchKind.OVS_OPENFLOW, VSwitchKind.OVN,
                                             VSwitchKind.VROUTER)

    @property
    def datapath(self) -> str:
        if self.testbed.vswitch.kind is VSwitchKind.VROUTER:
            return "netdev"           # L3 GRE ports and MPLS: userspace only
        dp = self.testbed.vswitch.datapath
        return self.caps.ovs_datapath if dp == "auto" else dp

    def all_namespaces(self) -> list[str]:
        n = self.names
        return ([n.fabric_ns] + ([n.ctl_ns] if mgmt.needed(self.testbed) else [])
                + [n.host_ns(h.name) for h in self.testbed.hosts]
                + [n.vm_ns(v.name) for v in self.testbed.vms])

    def _namespaces(self) -> None:
        for name in self.all_namespaces():
            self.run.record("netns", name=name)
            nsops.create(name)
            with nsops.rtnl(name) as ns:
                links.up(ns, "lo")

    def _underlay(self) -> None:
        """Fabric namespace: one bridge for the underlay, one per flat physnet."""
        tb, n = self.testbed, self.names
        umtu = tb.network.underlay_mtu
        with nsops.rtnl(n.fabric_ns) as fab:
            links.bridge(fab, n.fabric_bridge, umtu, n.alias("underlay fabric"))
            flat = tb.network.type is NetType.FLAT
            if flat:
                for vi, vnet in enumerate(tb.vnets):
                    links.bridge(fab, n.fabric_physnet_bridge(vi), tb.network.tenant_mtu,
                                 n.alias(f"physnet of vnet={vnet.name}"))
            for hi, host in enumerate(tb.hosts):
                hns = n.host_ns(host.name)
                links.veth(fab, n.fabric_uplink(hi), n.uplink, hns, umtu,
                           n.alias(f"uplink of host={host.name}"))
                links.up(fab, n.fabric_uplink(hi), master=n.fabric_bridge)
                for vnet in (tb.vnets_on(host.name) if flat else ()):
                    vi = self.vnet_index(vnet.name)
                    links.veth(fab, n.fabric_physnet(hi, vi), n.physnet(vi), hns,
                               tb.network.tenant_mtu, n.alias(f"physnet vnet={vnet.name} host={host.name}"))
                    links.up(fab, n.fabric_physnet(hi, vi), master=n.fabric_physnet_bridge(vi))
                # the host's kernel answers ARP only for addresses on the link asked: OVS's
                # userspace tunnels put the endpoint on the bridge's port, and the uplink (an
                # OVS port the kernel also reads) answered it too, with its own MAC; whichever
                # reply OVS snooped last became the peer's tunnel next hop, and a wrong one
                # dropped every tunnelled packet of the testbed (a third of the functional runs)
                nsops.sysctl(hns, f"net/ipv4/conf/{n.uplink}/arp_ignore", "1")
                with nsops.rtnl(hns) as ns:
                    links.stamp(ns, n.uplink, n.alias(f"uplink of host={host.name}"))
                    links.up(ns, n.uplink)
                    for vnet in (tb.vnets_on(host.name) if flat else ()):
                        vi = self.vnet_index(vnet.name)
                        links.stamp(ns, n.physnet(vi), n.alias(f"physnet vnet={vnet.name}"))
                        links.up(ns, n.physnet(vi))

    def _vms(self) -> None:
        tb, n = self.testbed, self.names
        mtu = tb.network.tenant_mtu
        for vm_i, vm in enumerate(tb.vms):
            vns = n.vm_ns(vm.name)
            with nsops.rtnl(n.host_ns(vm.host)) as hns, nsops.rtnl(vns) as ns:
                for k, nic in enumerate(vm.nics):
                    port = n.vm_port(vm_i, k)
                    links.veth(hns, port, n.vm_nic(k), vns, mtu, n.alias(f"vm={vm.name} nic={k}"))
                    links.up(hns, port)
                    idx = links.index(ns, n.vm_nic(k))
                    ns.link("set", index=idx, address=nic.mac,
                            ifalias=n.alias(f"vm={vm.name} vnet={nic.vnet}"))
                    links.address(ns, n.vm_nic(k), nic.ip, tb.vnet(nic.vnet).cidr.prefixlen)
                    links.up(ns, n.vm_nic(k))

    def _vswitches(self) -> None:
        """OVS hosts start their daemons in parallel (subprocesses only); netlink
        work stays on this thread."""
        hosts = self.testbed.hosts
        if self.testbed.vswitch.kind is VSwitchKind.OVN:
            return ovn.wire(self)
        if self.testbed.vswitch.kind is VSwitchKind.OVS_OPENFLOW:
            return openflow.wire(self)
        if self.testbed.vswitch.kind is VSwitchKind.VROUTER:
            return vrouter.wire(self)
        if not self.is_ovs:
            for host in hosts:
                linuxbridge.wire_host(self, host)
            return
        ovs = [OvsHost(self, h) for h in hosts]
        proc.parallel([lambda o=o: self._ovs_host(o) for o in ovs])
        for o in ovs:
            o.address_underlay()

    def _ovs_host(self, ovs: OvsHost) -> None:
        ovs.start()
        if self.datapath == "netdev":
            self._checksum_offload_off(ovs.host)
        ovs.configure(self.datapath)

    def _checksum_offload_off(self, host) -> None:
        """The userspace datapath forwards packets whose checksum the kernel left to
        'hardware': turn TX checksum offload off on every veth end it touches."""
        tb, n = self.testbed, self.names
        per_ns = {n.host_ns(host.name): [n.uplink], n.fabric_ns: []}
        for vm_i, vm in enumerate(tb.vms):
            if vm.host == host.name:
                per_ns.setdefault(n.vm_ns(vm.name), []).extend(n.vm_nic(k) for k in range(len(vm.nics)))
                per_ns[n.host_ns(host.name)].extend(n.vm_port(vm_i, k) for k in range(len(vm.nics)))
        if tb.network.type is NetType.FLAT:
            for vnet in tb.vnets_on(host.name):
                per_ns[n.host_ns(host.name)].append(n.physnet(self.vnet_index(vnet.name)))
        for ns, devs in per_ns.items():
            for dev in devs:
                proc.run(proc.in_netns(ns, ["ethtool", "-K", dev, "tx", "off"]),
                         what=f"ethtool -K {dev} tx off")
