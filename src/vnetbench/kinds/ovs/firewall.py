"""Security groups on an ``ovs`` host, as Neutron's OVS agent enforces them with
``firewall_driver = openvswitch``: Neutron's own ``OVSFirewallDriver`` (Debian's
python3-neutron, run by ``vnetbench.kinds.neutron.sg_agent`` in the host's namespace)
writes its conntrack flows (tables 60, 71-94, a conntrack zone per network: the local
VLAN) into the host's integration bridge through ovs-ofctl; the userspace datapath runs
``ct()`` itself.

The driver finds a port as the agent leaves it in OVSDB: the Interface's
``external_ids:iface-id`` (the Neutron port id, which is the driver's device),
``attached-mac`` and ``iface-status``, and the Port's ``other_config`` ``tag`` (local
VLAN), ``net_uuid``, ``network_type``, ``segmentation_id``, ``physical_network``
(``port_columns``). Tunnel networks get the agent's two-bridge layout (``pipeline``).

Left out, said here: an ovs-vswitchd restart loses the firewall's flows (Neutron's agent
re-initialises the driver on ``OVS_RESTARTED``; the kind's agent replays only its own);
a port plugged again after bring-up is not filtered.
"""

from __future__ import annotations

from vnetbench.kinds.neutron import sg as neutron_sg, sg_control as neutron_sg_control
from vnetbench.kinds.ovs import pipeline
from vnetbench.testbed.model import NetType

PHYSNET = "physnet1"                      # the one provider network name of flat/VLAN testbeds

AGENT = neutron_sg_control.Agent(
    driver="openvswitch",
    binary="neutron-openvswitch-agent",
    device=lambda ctx: lambda vm, n: neutron_sg.port_id(ctx.run.run_id, vm, n),
    args=lambda ctx, host: ["--bridge", ctx.names.ovs_int,
                            "--ovs-rundir", str(ctx.run.dir / host.name)],
    trusted=True)


def two_bridges(tb) -> bool:
    """Whether the host has Neutron's tunnel bridge: port security on a tunnel network."""
    return tb.port_security and tb.network.type.is_tunnel


def port_columns(ctx, port: str, vm, n: int, nic, tag: int) -> list[str]:
    """ovs-vsctl arguments (after the add-port of PORT, VM's NIC N) that make a VM port
    the agent's: what the driver reads to find and classify it."""
    tb = ctx.testbed
    ntype = tb.network.type
    other = {"tag": tag, "net_uuid": neutron_sg.network_id(ctx.run.run_id, nic.vnet),
             "network_type": ntype.value}
    if ntype is not NetType.FLAT:
        other["segmentation_id"] = tb.vnet(nic.vnet).segmentation_id
    if not ntype.is_tunnel:
        other["physical_network"] = PHYSNET
    ids = {"iface-id": neutron_sg.port_id(ctx.run.run_id, vm.name, n), "attached-mac": nic.mac,
           "iface-status": "active", "vm-id": vm.name}
    return ([f"other_config:{k}={v}" for k, v in other.items()]
            + ["--", "set", "Interface", port, *(f'external_ids:"{k}"="{v}"' for k, v in ids.items())])


def tunnel_bridge(ctx, host, datapath: str, own: str) -> list[str]:
    """ovs-vsctl arguments: the tunnel bridge, the patch ports, one tunnel port per peer
    host whose key the flows set (``key=flow``), as the agent's ``setup_tunnel_port``."""
    names, tb = ctx.names, ctx.testbed
    tx = ["--", "--may-exist", "add-br", names.ovs_tun, "--", "set", "Bridge", names.ovs_tun,
          f"datapath_type={datapath}", "fail_mode=secure", own,
          "--", "--may-exist", "add-port", names.ovs_int, names.patch_tun, own,
          "--", "set", "Interface", names.patch_tun, "type=patch", f"options:peer={names.patch_int}",
          "--", "--may-exist", "add-port", names.ovs_tun, names.patch_int, own,
          "--", "set", "Interface", names.patch_int, "type=patch", f"options:peer={names.patch_tun}"]
    for peer in _peers(ctx, host):
        port = names.flow_tunnel(ctx.host_index(peer.name))
        tx += ["--", "--may-exist", "add-port", names.ovs_tun, port, own,
               "--", "set", "Interface", port, f"type={tb.network.type.value}",
               f"options:remote_ip={peer.underlay_ip}", f"options:local_ip={host.underlay_ip}",
               "options:key=flow", own]
    return tx


def flows(ctx, host, lvid) -> dict[str, list[str]]:
    """The agent's flows by bridge name: the integration bridge's defaults and, on a
    tunnel network, the tunnel bridge's. ``lvid(vnet)``: the vnet's local VLAN."""
    names, tb = ctx.names, ctx.testbed
    out = {names.ovs_int: pipeline.integration_defaults()}
    if two_bridges(tb):
        nets = [pipeline.TunnelNet(lvid(v), v.segmentation_id,
                                   tuple(names.flow_tunnel(ctx.host_index(p.name))
                                         for p in ctx.peers(host.name, v.name)))
                for v in tb.vnets_on(host.name)]
        ports = [names.flow_tunnel(ctx.host_index(p.name)) for p in _peers(ctx, host)]
        out[names.ovs_tun] = pipeline.tunnel_bridge(tb.network.type.value, names.patch_int, ports, nets)
    return out


def _peers(ctx, host):
    """Every other host that shares a vnet with HOST (one tunnel port each)."""
    mine = {v.name for v in ctx.testbed.vnets_on(host.name)}
    return [h for h in ctx.testbed.hosts if h.name != host.name
            and mine & {v.name for v in ctx.testbed.vnets_on(h.name)}]


def start(ctx) -> None:
    neutron_sg_control.start(AGENT, ctx)


def rules_updated(ctx, groups) -> None:
    neutron_sg_control.rules_updated(AGENT, ctx, groups)


def ovs_restarted(ctx, host) -> None:
    """HOST's ovs-vswitchd restarted, its pipeline back: the firewall driver reinitialised
    and every port filtered again (Neutron's OVS agent on OVS_RESTARTED)."""
    neutron_sg_control.ovs_restarted(AGENT, ctx, host)


def _moved_context(dep, vm, host):
    """The build's view with VM on HOST: a migration re-plugs before the run's testbed
    says where the VM is."""
    import dataclasses
    from types import SimpleNamespace
    tb = dep.testbed
    moved = dataclasses.replace(vm, host=host.name)
    tb = dataclasses.replace(tb, vms=tuple(moved if v.name == vm.name else v for v in tb.vms))
    return SimpleNamespace(testbed=tb, run=dep.run, names=dep.names)


def plugged_columns(dep, host, port: str, vm, k: int, nic, tag: int) -> list[str]:
    """The OVSDB columns of a port plugged on HOST (a migration) with local VLAN TAG, as
    at bring-up."""
    return port_columns(_moved_context(dep, vm, host), port, vm, k, nic, tag)


def port_added(dep, host, vm, k: int) -> None:
    """HOST's agent filters the port of VM's NIC K, now on HOST (Neutron's OVS agent on a
    new port: ``setup_port_filters``)."""
    ctx = _moved_context(dep, vm, host)
    neutron_sg_control.prepare(AGENT, ctx, host, [neutron_sg.port_id(dep.run_id, vm.name, k)])


def port_removed(dep, host, port: str) -> None:
    """HOST's agent drops the filter of a port that left its bridge (``remove_devices_filter``)."""
    tb, names = dep.testbed, dep.names
    ids = [neutron_sg.port_id(dep.run_id, vm.name, k) for i, vm in enumerate(tb.vms)
           for k in range(len(vm.nics)) if names.vm_port(i, k) == port]
    if ids:
        neutron_sg_control.remove(dep, host, ids)        # a deployment has the run
