"""Ports without a VM on a running cloud testbed (the ``port_ready`` family, issue 48), the
way ovn-heater and Browbeat's port tests make them: Neutron's port create with
``binding:host_id`` (the compute node of the testbed host), then the plug os-vif does on
that node for a VM's NIC, without the VM: a veth whose node end (``tap<port id[:11]>``) is
added to the node's integration bridge with ``external_ids`` ``iface-id`` (the Neutron
port), ``attached-mac`` and ``iface-status=active``, its other end ``eth0`` in a
namespace of the run (``vnb-<run>-p-<i>``) with the port's MAC and address. The
mechanism driver does the rest as it does for a VM: ML2/OVN's ovn-controller claims the
logical port, ML2/OVS's agent tags and flows it, and Neutron turns the port ``ACTIVE``:
the cloud's readiness signal (``ready``: one Neutron query per poll for a host's ports).

Only where the runner reaches the nodes' OVSDB and namespaces: a cloud whose clouds.yaml
names them (``facts.nodes_of``; the all-in-one cloud's does). Elsewhere refused, saying so.

Each namespace is journaled before it exists (the netns backend's undo removes it, and the
veth with it), and each Neutron port before the create call by its name, which carries the
run id (``undo_cloud_port``: the OVS port off the node's bridge, the Neutron port deleted);
the journal unwinds them before the stack, whose networks they are on.
"""

from __future__ import annotations

import ipaddress
import subprocess
import threading

from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.linux import proc

NIC = "eth0"
DEVICE_OWNER = "compute:vnetbench-port"      # compute:*: Nova's own, so every driver binds it
_META = threading.Lock()
_LOCAL = threading.local()                   # one API connection per thread (the family's workers)


def ns_name(run_id: str, index: int) -> str:
    return f"vnb-{run_id}-p-{index}"


def neutron_name(run_id: str, index: int) -> str:
    return f"vnb-{run_id}-p{index}"


def nodes(dep) -> dict:
    nodes = (dep.cloud_facts() or {}).get("nodes")
    if not nodes:
        raise UnsupportedError("the cloud's clouds.yaml names no compute nodes the runner may plug "
                               "on (its vnetbench.nodes block; the all-in-one cloud's has one): a "
                               "port without a VM is plugged on its node as os-vif would")
    return nodes


def check(dep) -> None:
    nodes(dep)
    if dep.testbed.port_security:
        raise UnsupportedError("adding ports to a testbed with security groups is not implemented "
                               "(the probe's replies would need the groups' rules)")


def _conn(dep):
    conns = getattr(_LOCAL, "conns", None)
    if conns is None:
        conns = _LOCAL.conns = {}
    if dep.run_id not in conns:
        conns[dep.run_id] = dep._connect()
    return conns[dep.run_id]


def _compute_host(dep, host: str) -> str:
    """The compute node of testbed host HOST: where Nova put a VM of it."""
    meta = dep.run.meta()
    hosts = (meta.get("placement") or {}).get("hosts") or {}
    for vm in dep.testbed.vms:
        if vm.host == host and hosts.get(vm.name):
            return hosts[vm.name]
    raise VnetbenchError(f"openstack: run {dep.run_id} recorded no compute node for host {host!r} "
                         "(no VM of it was placed by host name: an admin's run places them)")


def _network(dep, vnet: str) -> str:
    meta = dep.run.meta()
    vm = next((v.name for v in dep.testbed.vms if v.nics and v.nics[0].vnet == vnet), None)
    if vm is None or not (meta.get("ports") or {}).get(vm):
        raise VnetbenchError(f"openstack: vnet {vnet!r} of run {dep.run_id} has no VM port to "
                             "find its network by")
    return _conn(dep).network.get_port(meta["ports"][vm]).network_id


def add(dep, host: str, vnet: str) -> dict:
    """A new port on HOST's compute node on VNET; its record (name, host, vnet, ip, mac)."""
    check(dep)
    compute = _compute_host(dep, host)
    node = nodes(dep).get(compute)
    if node is None:
        raise VnetbenchError(f"openstack: compute node {compute} of host {host!r} is not among the "
                             "cloud's nodes (clouds.yaml vnetbench.nodes)")
    network = _network(dep, vnet)
    with _META:
        index = dep.run.meta().get("ports_next", 0)
        dep.run.write_meta(ports_next=index + 1)
    name, ns = f"p{index}", ns_name(dep.run_id, index)
    dep.run.record("netns", name=ns)
    proc.run(["ip", "netns", "add", ns], what=f"netns {ns}")
    meta = dep.run.meta()
    dep.run.record("cloud_port", name=neutron_name(dep.run_id, index), cloud=meta["cloud"],
                   clouds_yaml=(meta.get("options") or {}).get("clouds_yaml"), ovsdb=node["ovsdb"])
    port = _conn(dep).network.create_port(network_id=network, name=neutron_name(dep.run_id, index),
                                          binding_host_id=compute, device_owner=DEVICE_OWNER,
                                          port_security_enabled=False)
    ip, cidr = port.fixed_ips[0]["ip_address"], _conn(dep).network.get_subnet(port.fixed_ips[0]["subnet_id"]).cidr
    plug(node, ns, port.id, port.mac_address, f"{ip}/{ipaddress.ip_network(cidr).prefixlen}")
    record = {"name": name, "host": host, "vnet": vnet, "ip": ip, "mac": port.mac_address,
              "netns": ns, "port": port.id, "compute": compute}
    with _META:
        added = dep.run.meta().get("added_ports", {})
        dep.run.write_meta(added_ports={**added, name: record})
    return record


def tap(port_id: str) -> str:
    """os-vif's name for a port's tap: tap + the port id's first 11 characters."""
    return f"tap{port_id[:11]}"


def plug(node: dict, ns: str, port_id: str, mac: str, cidr: str) -> None:
    """os-vif's plug without the VM: the node end on the bridge with the port's ids."""
    inside = ["ip", "-n", node["netns"]] if node["netns"] else ["ip"]
    dev = tap(port_id)
    proc.run([*inside, "link", "add", dev, "type", "veth", "peer", "name", NIC, "netns", ns],
             what=f"veth {dev}")
    at_node = ["ip", "netns", "exec", node["netns"]] if node["netns"] else []
    for argv in ([*inside, "link", "set", dev, "up"],
                 ["ip", "-n", ns, "link", "set", NIC, "address", mac],
                 ["ip", "-n", ns, "addr", "add", cidr, "dev", NIC],
                 ["ip", "-n", ns, "link", "set", NIC, "up"], ["ip", "-n", ns, "link", "set", "lo", "up"],
                 # the userspace datapath fills in no checksum the kernel left to offload
                 [*at_node, "ethtool", "-K", dev, "tx", "off"],
                 ["ip", "netns", "exec", ns, "ethtool", "-K", NIC, "tx", "off"]):
        proc.run(argv, what=" ".join(argv[:6]))
    proc.run(["ovs-vsctl", f"--db={node['ovsdb']}", "--timeout=30", "add-port", node["bridge"], dev,
              "--", "set", "Interface", dev, f"external_ids:iface-id={port_id}",
              f'external_ids:attached-mac="{mac}"', "external_ids:iface-status=active"],
             timeout=40, what=f"plugging {dev} on {node['bridge']}")


def ready(dep, host: str, names) -> dict:
    """{name: None} of NAMES that Neutron reports ACTIVE (one query; the poll's own time)."""
    added = dep.run.meta().get("added_ports", {})
    ids = {added[n]["port"]: n for n in names if n in added}
    if not ids:
        return {}
    ports = _conn(dep).network.ports(device_owner=DEVICE_OWNER, status="ACTIVE")
    return {ids[p.id]: None for p in ports if p.id in ids}


def remove(dep, name: str) -> None:
    added = dep.run.meta().get("added_ports", {})
    if name not in added:
        raise VnetbenchError(f"openstack: run {dep.run_id} has no added port {name!r}")
    rec = added[name]
    node = nodes(dep)[rec["compute"]]
    proc.run(["ovs-vsctl", f"--db={node['ovsdb']}", "--timeout=30", "--if-exists", "del-port",
              node["bridge"], tap(rec["port"])], timeout=40, what=f"unplugging {name}")
    proc.run(["ip", "netns", "delete", rec["netns"]], what=f"deleting netns {rec['netns']}")
    _conn(dep).network.delete_port(rec["port"], ignore_missing=True)
    with _META:
        added = dict(dep.run.meta().get("added_ports", {}))
        added.pop(name, None)
        dep.run.write_meta(added_ports=added)


def popen(dep, name: str, argv, **kwargs) -> subprocess.Popen:
    added = dep.run.meta().get("added_ports", {})
    if name not in added:
        raise VnetbenchError(f"openstack: run {dep.run_id} has no added port {name!r}")
    return subprocess.Popen(["ip", "netns", "exec", added[name]["netns"], *argv], **kwargs)
