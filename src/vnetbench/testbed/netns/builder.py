"""Realise a Testbed as namespaces: fabric, hosts (each with its vSwitch), VMs.

The builder invents nothing: every name comes from ``Names``, every address from
the Testbed. Each namespace and daemon is journaled before it is created; if
bring-up fails or is interrupted, what was built is unwound before returning.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from vnetbench import signals
from vnetbench.linux import links, nlbatch, nsops, proc
from vnetbench.state import Run, new_run_id, state_root
from vnetbench.testbed import capabilities
from vnetbench.testbed.codec import to_dict
from vnetbench.testbed.model import NetType, Testbed
from vnetbench.testbed.netns import l3, mgmt
from vnetbench.testbed.netns.context import Context
from vnetbench.testbed.netns.deployment import Deployment
from vnetbench.testbed.unwind import unwind

#: threads making VM namespaces while the builder compiles the next VM's requests
VM_CREATORS = 3


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
        self.driver.start(self)       # a controller's imports overlap the rest of the bring-up
        self._underlay()
        if mgmt.needed(tb):
            mgmt.build(self)
        self._vms()
        if tb.external is not None:
            l3.external_links(self)
        l3.trunk_links(self)
        progress(f"namespaces and links ready ({time.monotonic() - t0:.2f} s)")
        self.driver.wire(self)
        progress(f"vSwitches ready ({time.monotonic() - t0:.2f} s)")
        if tb.routers:
            self.driver.routers(self)
            l3.default_routes(self)
            progress(f"routers ready ({time.monotonic() - t0:.2f} s)")
        self.run.write_meta(status="up", up_seconds=time.monotonic() - t0,
                            ovs_datapath=self.datapath, ovs_ports=self.ports,
                            pinning={vm.name: list(vm.cpus) for vm in tb.vms},
                            namespaces=self.all_namespaces())

    def _namespaces(self) -> None:
        """Every namespace but the VMs' (``_vms`` makes each VM's with its NICs), lo up."""
        vms = {self.names.vm_ns(v.name) for v in self.testbed.attached}
        for name in self.all_namespaces():
            if name not in vms:
                self.run.record("netns", name=name)
                nsops.create(name, then=nlbatch.Batch(name).set("lo up", index=1, up=True).send_here)

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
        """Per VM, one thread makes its namespace and, in one netlink write from inside
        it, brings lo up and makes each NIC (a veth whose other end is born in the host's
        namespace; ifindex ``VM_NIC_INDEX`` + k, its MAC, MTU and address). Per host, one
        write brings the VM ports up (``nlbatch``: no lookups, no round trip per request).
        This thread compiles the requests while VM_CREATORS threads make namespaces (the
        kernel's share: unshare, mount, the veth) in parallel."""
        tb, n = self.testbed, self.names
        fds = {}
        try:
            for h in tb.hosts:
                fds[h.name] = os.open(nsops.path(n.host_ns(h.name)), os.O_RDONLY | os.O_CLOEXEC)
            ports = {h.name: nlbatch.Batch(n.host_ns(h.name)) for h in tb.hosts}
            pool = ThreadPoolExecutor(max_workers=VM_CREATORS)
            try:
                made = []
                for vm_i, vm in enumerate(tb.attached):      # routers' namespaces too
                    vns = n.vm_ns(vm.name)
                    inside = self._vm_batch(vm_i, vm, fds[vm.host], ports[vm.host])
                    self.run.record("netns", name=vns)      # journaled before it exists
                    made.append(pool.submit(nsops.create, vns, inside.send_here))
                for fut in made:
                    fut.result()
            finally:    # nothing is still being made when an error or interrupt propagates
                proc.wait_through_interrupts(lambda: pool.shutdown(wait=True, cancel_futures=True))
            for batch in ports.values():
                batch.send()
        finally:
            for fd in fds.values():
                os.close(fd)

    def _vm_batch(self, vm_i, vm, host_fd: int, ports: nlbatch.Batch) -> nlbatch.Batch:
        """The requests made inside VM's namespace; its ports' go to PORTS (the host's)."""
        tb, n = self.testbed, self.names
        mtu = tb.network.tenant_mtu
        inside = nlbatch.Batch(n.vm_ns(vm.name)).set("lo up", index=1, up=True)
        for k, nic in enumerate(vm.nics):
            port, idx, dev = n.vm_port(vm_i, k), nlbatch.VM_NIC_INDEX + k, n.vm_nic(k)
            inside.veth(f"veth {dev} (host end {port})", idx, dev, mtu, nic.mac, port, host_fd)
            inside.set(f"alias of {dev}", index=idx, alias=n.alias(f"vm={vm.name} vnet={nic.vnet}"))
            inside.address(f"address {nic.ip} on {dev}", idx, nic.ip, tb.vnet(nic.vnet).cidr.prefixlen)
            ports.set(f"{port} up", ifname=port, up=True, alias=n.alias(f"vm={vm.name} nic={k}"))
        return inside
