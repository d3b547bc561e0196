"""The registry of vSwitch kinds: a kind's name -> its package. Adding a kind is its
package and one line here. Plain data, importing nothing, so the model can take its
vocabulary from it (``vnetbench.kinds`` loads the packages)."""

#: kind name (the testbed's ``vswitch.kind``) -> the package that holds it
REGISTRY = {
    "linuxbridge": "vnetbench.kinds.linuxbridge",
    "ovs": "vnetbench.kinds.ovs",
    "ovs-openflow": "vnetbench.kinds.ovs_openflow",
    "ovn": "vnetbench.kinds.ovn",
    "vrouter": "vnetbench.kinds.vrouter",
    "faucet": "vnetbench.kinds.faucet",
}
#: the kind a Rally context or a label means when none is given
DEFAULT = "ovs"
#: how each kind routes between vnets and to the external network (``Kind.routers``):
#: "l3-agent" (Neutron's legacy L3 agent: a router namespace on the network node, its
#: ports plugged as VM ports, NAT by iptables there), "external" (the vSwitch has no L3: a
#: router outside it, on a port, the same namespace), "ovn" (logical routers), "vrouter"
#: (routes leaked between the router's VRFs, every host routes); "": none (the kind's
#: ``no_routers`` says why). Here, not on the kind, because the model must know which
#: routers are ports on the vSwitch (``Testbed.attached``) and imports no kind.
ROUTERS = {
    "linuxbridge": "l3-agent",
    "ovs": "l3-agent",
    "ovs-openflow": "external",     # Floodlight v0.90's Forwarding has no L3: a router on a stick
    "ovn": "ovn",                   # logical routers (kinds/ovn/routers.py)
    "vrouter": "vrouter",           # inter-VN routing in every host's vRouter (route leaking)
    "faucet": "",                   # inter-VLAN routing only as an L3 switch (routing: svi)
}
