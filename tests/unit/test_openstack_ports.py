"""Ports without a VM on a cloud testbed (testbed/openstack/ports.py), on fake API objects
and a recording command runner: journaled before they exist, Neutron's port bound to the
testbed host's compute node, plugged on that node as os-vif would (the tap's name and its
external_ids), readiness from Neutron's ACTIVE, removal, and the refusals."""

from types import SimpleNamespace

import pytest

from vnetbench.errors import UnsupportedError
from vnetbench.testbed.openstack import ports, undo

NODES = {"vm": {"ovsdb": "unix:/s/ovs/db.sock", "netns": None, "bridge": "vnbabc-int"},
         "c2.test": {"ovsdb": "unix:/s/nodes/c2/ovs/db.sock", "netns": "vnbaioabc-c2", "bridge": "vnbabc-int"}}
PORT_ID = "0123456789abcdef-port"


class Run:
    def __init__(self):
        self.run_id, self.journal = "abc123", []
        self._meta = {"cloud": "vnetbench-aio", "options": {"clouds_yaml": "/s/clouds.yaml"},
                      "placement": {"hosts": {"a": "vm", "b": "c2.test"}}, "ports": {"a": "pa", "b": "pb"}}

    def meta(self):
        return dict(self._meta)

    def write_meta(self, **kw):
        self._meta.update(kw)

    def record(self, kind, **data):
        self.journal.append((kind, data))


class Network:
    def __init__(self):
        self.created, self.deleted, self.status = [], [], "DOWN"

    def get_port(self, pid):
        return SimpleNamespace(network_id="net-1")

    def create_port(self, **kw):
        self.created.append(kw)
        return SimpleNamespace(id=PORT_ID, mac_address="fa:16:3e:00:00:01",
                               fixed_ips=[{"ip_address": "198.18.7.9", "subnet_id": "sub-1"}])

    def get_subnet(self, sid):
        return SimpleNamespace(cidr="198.18.7.0/24")

    def ports(self, **kw):
        if "name" in kw:
            return [SimpleNamespace(id=PORT_ID)]
        return [SimpleNamespace(id=PORT_ID)] if self.status == "ACTIVE" else []

    def delete_port(self, pid, ignore_missing=True):
        self.deleted.append(pid)


def _dep(nodes=NODES, port_security=False):
    net = Network()
    tb = SimpleNamespace(port_security=port_security,
                         vms=[SimpleNamespace(name="a", host="h1", nics=[SimpleNamespace(vnet="red")]),
                              SimpleNamespace(name="b", host="h2", nics=[SimpleNamespace(vnet="red")])])
    dep = SimpleNamespace(run=Run(), run_id="abc123", testbed=tb,
                          cloud_facts=lambda: {"nodes": nodes} if nodes else {},
                          _connect=lambda: SimpleNamespace(network=net))
    return dep, net


@pytest.fixture
def commands(monkeypatch):
    ran = []
    monkeypatch.setattr(ports.proc, "run", lambda argv, **kw: ran.append(list(argv)) or "")
    monkeypatch.setattr(ports, "_LOCAL", SimpleNamespace())
    return ran


def test_a_port_is_journaled_bound_and_plugged_on_its_node(commands):
    dep, net = _dep()
    rec = ports.add(dep, "h2", "red")
    kinds = [k for k, _ in dep.run.journal]
    assert kinds == ["netns", "cloud_port"]                    # both before the objects
    assert commands[0] == ["ip", "netns", "add", "vnb-abc123-p-0"]
    (created,) = net.created
    assert created["binding_host_id"] == "c2.test" and created["name"] == "vnb-abc123-p0"
    assert created["device_owner"].startswith("compute:") and created["port_security_enabled"] is False
    assert ["ip", "-n", "vnbaioabc-c2", "link", "add", "tap0123456789a", "type", "veth", "peer", "name",
            "eth0", "netns", "vnb-abc123-p-0"] in commands
    vsctl = next(c for c in commands if c[0] == "ovs-vsctl")
    assert vsctl[1] == "--db=unix:/s/nodes/c2/ovs/db.sock" and "vnbabc-int" in vsctl
    assert f"external_ids:iface-id={PORT_ID}" in vsctl and "external_ids:iface-status=active" in vsctl
    assert ["ip", "-n", "vnb-abc123-p-0", "addr", "add", "198.18.7.9/24", "dev", "eth0"] in commands
    assert rec == {"name": "p0", "host": "h2", "vnet": "red", "ip": "198.18.7.9", "mac": "fa:16:3e:00:00:01",
                   "netns": "vnb-abc123-p-0", "port": PORT_ID, "compute": "c2.test"}
    assert dep.run.meta()["added_ports"]["p0"] == rec


def test_ready_is_neutrons_active(commands):
    dep, net = _dep()
    ports.add(dep, "h1", "red")
    assert ports.ready(dep, "h1", ["p0"]) == {}
    net.status = "ACTIVE"
    assert ports.ready(dep, "h1", ["p0", "p9"]) == {"p0": None}


def test_remove_unplugs_deletes_and_forgets(commands):
    dep, net = _dep()
    ports.add(dep, "h1", "red")
    ports.remove(dep, "p0")
    assert any(c[:2] == ["ovs-vsctl", "--db=unix:/s/ovs/db.sock"] and "del-port" in c for c in commands)
    assert ["ip", "netns", "delete", "vnb-abc123-p-0"] in commands and net.deleted == [PORT_ID]
    assert dep.run.meta()["added_ports"] == {}


def test_refused_without_nodes_or_with_security_groups(commands):
    with pytest.raises(UnsupportedError, match="names no compute nodes"):
        ports.add(_dep(nodes=None)[0], "h1", "red")
    with pytest.raises(UnsupportedError, match="security groups"):
        ports.add(_dep(port_security=True)[0], "h1", "red")
    assert commands == []


def test_undo_deletes_only_the_runs_port(monkeypatch):
    net = Network()
    ran = []
    monkeypatch.setattr(undo.subprocess, "run", lambda argv, **kw: ran.append(argv))
    run = SimpleNamespace(run_id="abc123")
    entry = {"name": "vnb-abc123-p0", "cloud": "c", "ovsdb": "unix:/s/ovs/db.sock"}
    undo.undo_cloud_port(run, entry, conn=SimpleNamespace(network=net))
    assert net.deleted == [PORT_ID] and "del-port" in ran[0]
    with pytest.raises(ValueError, match="left alone"):
        undo.undo_cloud_port(run, {**entry, "name": "vnb-ffffff-p0"}, conn=SimpleNamespace(network=net))
