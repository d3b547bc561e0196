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
