"""What a kind's netns wiring knows about a build (``NetnsDriver.wire`` gets it): the
run, the testbed, its names and indices. The builder extends it with the build steps;
a running testbed gets one from ``context(dep)`` for changes after bring-up."""

from __future__ import annotations

from vnetbench import kinds
from vnetbench.state import Run
from vnetbench.testbed.model import Testbed
from vnetbench.testbed.netns import mgmt
from vnetbench.testbed.netns.names import Names


def context(dep) -> "Context":
    """The build context of a running testbed, for changes after bring-up."""
    return Context(dep.run, dep.testbed, caps=None)


class Context:
    """What a kind's wiring needs to know about a build: names, indices, ports, peers."""

    def __init__(self, run: Run, testbed: Testbed, caps):
        self.run, self.testbed, self.caps = run, testbed, caps
        self.kind = kinds.of(testbed)
        self.driver = kinds.netns_driver(testbed)
        self.names = Names(run.run_id)
        self._vnet_i = {v.name: i for i, v in enumerate(testbed.vnets)}
        self._host_i = {h.name: i for i, h in enumerate(testbed.hosts)}
        self._vm_i = {m.name: i for i, m in enumerate(testbed.attached)}

    def vnet_index(self, name): return self._vnet_i[name]
    def vm_index(self, name): return self._vm_i[name]
    def host_index(self, name): return self._host_i[name]

    def vm_ports(self, host: str, vnet: str) -> list[str]:
        """Host-side veth names of the VM NICs (and router ports) on ``vnet`` at ``host``."""
        return [self.names.vm_port(self._vm_i[vm.name], n)
                for vm in self.testbed.attached_on(host)
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

    @property
    def datapath(self) -> str | None:
        """The OVS datapath the kind runs on; None for a kind without OVS."""
        return self.kind.datapath(self.testbed.vswitch.datapath, self.caps)

    @property
    def ports(self) -> str | None:
        """How OVS's userspace datapath reads its veth ports; None without it."""
        return self.kind.ports(self.testbed, self.caps)

    def all_namespaces(self) -> list[str]:
        n = self.names
        return ([n.fabric_ns] + ([n.ctl_ns] if mgmt.needed(self.testbed) else [])
                + [n.host_ns(h.name) for h in self.testbed.hosts]
                + [n.vm_ns(v.name) for v in self.testbed.attached]
                + [n.external_ns(h.name) for h in self.testbed.external_hosts])
