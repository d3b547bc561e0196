"""Deprovisioning a vnet from a running testbed, the way each kind's cloud does it.

linuxbridge: the vnet's bridge and segment device go on every host; ovs: every port of
the vnet leaves each host's integration bridge; ovs-openflow: the controller deletes the
network (VNF forgets its MACs, the flows to and from them go), then the ports leave as on
ovs; ovn: the logical switch is deleted in
the NB database (``ls-del``) and ovn-controller takes its flows away; vrouter: the VM
ports leave each host's bridge, whose agent deletes their entries and withdraws their
routes through the control node (the GRE ports are shared by every vnet and stay). The VMs stay,
their NICs unplugged. Nothing is created, so there is nothing to undo.
"""

from __future__ import annotations

from vnetbench.errors import UnsupportedError
from vnetbench.testbed.model import VSwitchKind


def _linuxbridge(dep, ctx, vnet):
    from vnetbench.testbed.netns import linuxbridge
    for host in _hosts_of(dep, vnet):
        linuxbridge.unwire_vnet(ctx, host, vnet)


def _ovs(dep, ctx, vnet):
    from vnetbench.testbed.netns.ovs import OvsHost
    for host in _hosts_of(dep, vnet):
        OvsHost(ctx, host).unwire_vnet(vnet)


def _openflow(dep, ctx, vnet):
    """The controller deletes the network (its flows go), then the ports leave as on ovs."""
    from vnetbench.testbed.netns import openflow
    openflow.remove_vnet(dep, vnet.name)
    _ovs(dep, ctx, vnet)


def _ovn(dep, ctx, vnet):
    from vnetbench.testbed.netns.ovn import Central
    Central(dep).nbctl("ls-del", vnet.name)


REMOVERS = {VSwitchKind.LINUXBRIDGE: _linuxbridge, VSwitchKind.OVS: _ovs,
            VSwitchKind.OVS_OPENFLOW: _openflow, VSwitchKind.OVN: _ovn, VSwitchKind.VROUTER: _ovs}


def _hosts_of(dep, vnet):
    return [h for h in dep.testbed.hosts if vnet in dep.testbed.vnets_on(h.name)]


def check(dep) -> None:
    kind = dep.testbed.vswitch.kind
    if kind not in REMOVERS:
        raise UnsupportedError(f"run {dep.run_id}: deprovisioning a vnet is not implemented "
                               f"for vswitch {kind} yet")


def remove(dep, vnet) -> None:
    from vnetbench.testbed.netns import builder
    REMOVERS[dep.testbed.vswitch.kind](dep, builder.context(dep), vnet)
