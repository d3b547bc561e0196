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
from vnetbench.testbed.model import NetType, Testbed
from vnetbench.testbed.netns import links, mgmt, nsops
from vnetbench.testbed.netns.context import Context
from vnetbench.testbed.netns.deployment import Deployment
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
                _Build(run, testbed, caps).build(progress)
                signals.checkpoint()        # a signal during the last step still unwinds
            except BaseException as exc:
                unwind(run, exc, testbed.source)
    finally:
        run.unlock()
    return Deployment(run, testbed)


class _Build(Context):
    """The build steps, in order (``build``); the kind wires its vSwitches."""

    def build(self, progress) -> None:
        tb = self.testbed
        t0 = time.monotonic()
        progress(f"run {self.run.run_id}: {len(tb.hosts)} hosts, {len(tb.vms)} VMs, "
                 f"{tb.vswitch.kind} over {tb.network.type}")
        self._namespaces()
        self.kind.netns_start(self)       # a controller's imports overlap the rest of the bring-up
        self._underlay()
        if mgmt.needed(tb):
            mgmt.build(self)
        self._vms()
        progress(f"namespaces and links ready ({time.monotonic() - t0:.2f} s)")
        self.kind.netns_wire(self)
        progress(f"vSwitches ready ({time.monotonic() - t0:.2f} s)")
        self.run.write_meta(status="up", up_seconds=time.monotonic() - t0,
                            ovs_datapath=self.datapath, ovs_ports=self.ports,
                            pinning={vm.name: list(vm.cpus) for vm in tb.vms},
                            namespaces=self.all_namespaces())

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
