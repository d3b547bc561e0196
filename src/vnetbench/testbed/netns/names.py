"""Names of everything the netns backend creates; each carries the run id.

Interfaces live only inside the run's own namespaces, so names need to be
unique per namespace, but they still carry the run id (and an ifalias/altname)
so that anyone looking at one can tell which run owns it.
"""

from dataclasses import dataclass

IFNAMSIZ = 15


def _ifname(name: str) -> str:
    if len(name) > IFNAMSIZ:
        raise ValueError(f"interface name {name!r} exceeds {IFNAMSIZ} characters")
    return name


@dataclass(frozen=True)
class Names:
    rid: str

    # namespaces
    def host_ns(self, host: str) -> str:
        return f"vnb-{self.rid}-h-{host}"

    def vm_ns(self, vm: str) -> str:
        return f"vnb-{self.rid}-v-{vm}"

    def external_ns(self, host: str) -> str:
        """A machine on the external network, outside the cloud."""
        return f"vnb-{self.rid}-x-{host}"

    @property
    def fabric_ns(self) -> str:
        return f"vnb-{self.rid}-fabric"

    @property
    def ctl_ns(self) -> str:
        """The controller namespace: SDN controllers and their databases."""
        return f"vnb-{self.rid}-ctl"

    # interfaces (index arguments are positions in the testbed's tuples)
    def vm_port(self, vm_i: int, nic: int) -> str:
        return _ifname(f"tp{self.rid}-{vm_i}-{nic}")

    @staticmethod
    def ifb(port: str) -> str:
        """The IFB device that shapes what a VM port receives (an egress limit)."""
        return _ifname("ib" + port[2:])

    @staticmethod
    def vm_nic(nic: int) -> str:
        return f"eth{nic}"

    @property
    def uplink(self) -> str:
        return _ifname(f"up{self.rid}")

    def fabric_uplink(self, host_i: int) -> str:
        return _ifname(f"up{self.rid}-{host_i}")

    def physnet(self, vnet_i: int) -> str:
        return _ifname(f"ph{self.rid}-{vnet_i}")

    def fabric_physnet(self, host_i: int, vnet_i: int) -> str:
        return _ifname(f"ph{self.rid}-{host_i}-{vnet_i}")

    @property
    def fabric_bridge(self) -> str:
        return _ifname(f"fb{self.rid}")

    def fabric_physnet_bridge(self, vnet_i: int) -> str:
        return _ifname(f"fb{self.rid}-{vnet_i}")

    def lb_bridge(self, vnet_i: int) -> str:
        return _ifname(f"br{self.rid}-{vnet_i}")

    def vlan_dev(self, vnet_i: int) -> str:
        return _ifname(f"vl{self.rid}-{vnet_i}")

    def vxlan_dev(self, vnet_i: int) -> str:
        return _ifname(f"vx{self.rid}-{vnet_i}")

    @property
    def ovs_int(self) -> str:
        return _ifname(f"bi{self.rid}")

    @property
    def ovs_phy(self) -> str:
        return _ifname(f"bp{self.rid}")

    @property
    def ovs_tun(self) -> str:
        """ovs with security groups on a tunnel network: Neutron's tunnel bridge (br-tun)."""
        return _ifname(f"bt{self.rid}")

    @property
    def patch_tun(self) -> str:
        """The integration bridge's patch port to the tunnel bridge (Neutron's patch-tun)."""
        return _ifname(f"pt{self.rid}")

    @property
    def patch_int(self) -> str:
        """The tunnel bridge's patch port to the integration bridge (Neutron's patch-int)."""
        return _ifname(f"pi{self.rid}")

    def flow_tunnel(self, host_i: int) -> str:
        """A tunnel port of the tunnel bridge towards host ``host_i``, its key set by
        flows (Neutron's vxlan-<hex ip>, one per peer for every network)."""
        return _ifname(f"tf{self.rid}-{host_i}")

    def provider_bridge(self, vnet_i: int | None = None) -> str:
        """OVN provider bridge: one per flat vnet, or one for all VLANs (no index)."""
        return _ifname(f"bx{self.rid}" + ("" if vnet_i is None else f"-{vnet_i}"))

    def tunnel_port(self, vnet_i: int, host_i: int) -> str:
        return _ifname(f"tn{self.rid}-{vnet_i}-{host_i}")

    def gre_port(self, host_i: int) -> str:
        """vrouter: the L3 GRE port (MPLS over GRE) towards host ``host_i``."""
        return _ifname(f"gr{self.rid}-{host_i}")

    # the external network (routers' gateways, external hosts): a bridge in the fabric, a
    # link to each router's host (its physical external port), a bridge there (br-ex)
    @property
    def ext_fabric_bridge(self) -> str:
        return _ifname(f"xb{self.rid}")

    def ext_fabric_port(self, host_i: int) -> str:
        """The fabric's end of host ``host_i``'s external link."""
        return _ifname(f"xu{self.rid}-{host_i}")

    @property
    def ext_uplink(self) -> str:
        """A router host's external link (the physical port of Neutron's br-ex)."""
        return _ifname(f"xu{self.rid}")

    @property
    def ext_bridge(self) -> str:
        """A router host's external bridge (Neutron's br-ex)."""
        return _ifname(f"be{self.rid}")

    def ext_host_port(self, ext_i: int) -> str:
        """The fabric's end of external host ``ext_i``'s link."""
        return _ifname(f"xh{self.rid}-{ext_i}")

    def router_gw_port(self, router_i: int) -> str:
        """The host's end of router ``router_i``'s gateway link (Neutron's qg- port)."""
        return _ifname(f"rg{self.rid}-{router_i}")

    def si_port(self, router_i: int, side: str) -> str:
        """vrouter: the host's end of router ``router_i``'s SNAT service instance's left
        (``side`` "l") or right ("r") interface, a port of the host's vRouter."""
        return _ifname(f"si{self.rid}-{router_i}{side}")

    # seed 000's inter-VLAN testbeds (``Router.routing``): an L3 switch's interfaces, a
    # router on a stick's trunk and what takes its subinterfaces apart
    def svi(self, router_i: int, port_k: int) -> str:
        """The vSwitch host's interface on router ``router_i``'s ``port_k``-th vnet (an SVI)."""
        return _ifname(f"sv{self.rid}-{router_i}-{port_k}")

    def trunk(self, router_i: int) -> str:
        """The switch's end of router ``router_i``'s trunk link (a trunk port of the vSwitch)."""
        return _ifname(f"tk{self.rid}-{router_i}")

    def trunk_nic(self, router_i: int) -> str:
        """The router's end of its trunk link: its one NIC, carrying every VLAN tagged."""
        return _ifname(f"kn{self.rid}-{router_i}")

    def stick_bridge(self, router_i: int) -> str:
        """What splits router ``router_i``'s trunk NIC into one subinterface per VLAN where
        the kernel has no 802.1q devices: an OVS bridge with an access port per tag."""
        return _ifname(f"bk{self.rid}-{router_i}")

    # management network (controller <-> hosts), apart from the tenant underlay
    @property
    def mgmt_bridge(self) -> str:
        return _ifname(f"mb{self.rid}")

    @property
    def mgmt(self) -> str:
        """The management interface inside a host namespace."""
        return _ifname(f"mg{self.rid}")

    def ctl_mgmt(self, host_i: int) -> str:
        """The controller-side end of host ``host_i``'s management link."""
        return _ifname(f"mg{self.rid}-{host_i}")

    def alias(self, what: str) -> str:
        """ifalias stamped on every interface: who owns it and what it is."""
        return f"vnetbench run={self.rid} {what}"
