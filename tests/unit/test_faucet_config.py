"""The faucet kind's faucet.yaml (``vnetbench.kinds.faucet.config``): a VLAN per vnet, a
datapath per host, ports at fixed numbers; and Faucet's own checker accepts it."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from vnetbench.kinds.faucet import config, netns
from vnetbench.testbed.loader import loads
from vnetbench.testbed.netns.names import Names

NAMES = Names("abcdef12")
TWO_HOSTS = """vswitch: faucet
network: {{type: {ntype}}}
hosts: [{{name: h1}}, {{name: h2}}]
vnets: [{{name: red}}, {{name: blue}}]
vms:
  - {{name: a, host: h1, vnets: [red]}}
  - {{name: b, host: h2, vnets: [red]}}
  - {{name: c, host: h1, vnets: [blue]}}
  - {{name: d, host: h2, vnets: [blue, red]}}
"""


def tb(ntype="vlan"):
    return loads(TWO_HOSTS.format(ntype=ntype), online_cpus=[0, 1])


def test_a_vlan_per_vnet_with_the_segmentation_id():
    doc = config.faucet_yaml(tb(), NAMES)
    assert {n: v["vid"] for n, v in doc["vlans"].items()} == {"red": 101, "blue": 102}


def test_each_host_is_a_datapath_with_its_vm_ports_and_a_trunk():
    dps = config.faucet_yaml(tb(), NAMES)["dps"]
    assert {h: d["dp_id"] for h, d in dps.items()} == {"h1": 1, "h2": 2}
    h2 = dps["h2"]["interfaces"]
    assert {n: i.get("native_vlan") for n, i in h2.items() if n != config.UPLINK_PORT} == \
        {2: "red", 4: "blue", 5: "red"}
    assert h2[config.UPLINK_PORT] == {"name": NAMES.uplink, "tagged_vlans": ["red", "blue"],
                                      "description": "trunk to the other hosts"}


def test_a_vm_port_keeps_its_number_on_any_host():
    """Numbered by the NIC's place in the testbed, not on its host: a migration keeps it."""
    t = tb()
    assert [n for n, _, _ in config.vm_ports(t, NAMES, "h1")] == [1, 3]
    assert config.vm_port_number(t, 3, 1) == 5


def test_flat_has_a_physnet_port_per_vnet_and_no_trunk():
    h1 = config.faucet_yaml(tb("flat"), NAMES)["dps"]["h1"]["interfaces"]
    assert config.UPLINK_PORT not in h1
    assert h1[config.PHYSNET_PORT_BASE]["native_vlan"] == "red"
    assert h1[config.PHYSNET_PORT_BASE + 1]["native_vlan"] == "blue"


def test_a_removed_vnet_leaves_the_vlans_its_ports_and_the_trunk():
    doc = config.faucet_yaml(tb(), NAMES, removed=["blue"])
    assert list(doc["vlans"]) == ["red"]
    h1 = doc["dps"]["h1"]["interfaces"]
    assert set(h1) == {1, config.UPLINK_PORT} and h1[config.UPLINK_PORT]["tagged_vlans"] == ["red"]


def test_the_ports_the_bridge_gets_are_those_faucet_yaml_names():
    t = tb()
    for host in ("h1", "h2"):
        named = {n: i["name"] for n, i in config.faucet_yaml(t, NAMES)["dps"][host]["interfaces"].items()}
        assert dict(config.ports(t, NAMES, host)) == named


@pytest.mark.parametrize("ntype", ["vlan", "flat"])
def test_faucets_own_checker_accepts_it(ntype, tmp_path):
    check = netns.venv() / "bin" / "check_faucet_config"
    if not check.exists():
        pytest.skip(f"Faucet is not installed at {netns.venv()}: 'make faucet' installs it")
    path = tmp_path / "faucet.yaml"
    path.write_text(yaml.safe_dump(config.faucet_yaml(tb(ntype), NAMES), sort_keys=False))
    done = subprocess.run([str(check), str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert '"dp_id": 2' in done.stdout


@pytest.mark.parametrize("row,within_s,connected", [
    # recorded rows of `ovs-vsctl --format=json --columns=is_connected,status list Controller`
    ([True, ["map", [["sec_since_connect", "1"], ["state", "ACTIVE"]]]], 2.5, True),
    # right after Faucet stopped: OVS has not noticed, the connection is the old Faucet's
    ([True, ["map", [["sec_since_connect", "14"], ["state", "ACTIVE"]]]], 0.03, False),
    ([False, ["map", [["last_error", "Connection refused"], ["sec_since_disconnect", "2"],
                      ["state", "BACKOFF"]]]], 5.0, False),
    ([True, ["map", []]], 5.0, False),
])
def test_a_restarted_faucet_counts_only_connections_made_since(row, within_s, connected):
    """Faucet takes seconds to import os-ken and listen; a bridge that still shows the
    stopped Faucet's connection is not connected to the new one."""
    assert netns.controller_connected_since(row, within_s) is connected


def test_an_l3_switch_is_faucets_own_inter_vlan_routing():
    """Seed 000's L3 switch on faucet (routing: svi): the router's address per VLAN as
    its faucet_vips (with the router's MAC) and a routers entry joining the VLANs, as
    Faucet's docs/configuration.rst configures inter-VLAN routing."""
    from pathlib import Path
    from vnetbench.testbed.loader import load
    text = (Path(__file__).resolve().parents[2] / "examples/seed000-svi.yaml").read_text()
    tb = loads(text.replace("vswitch: ovs", "vswitch: faucet"), source="svi.yaml", online_cpus=[0, 1])
    doc = config.faucet_yaml(tb, Names("abc123"))
    (r,) = tb.routers
    assert doc["routers"] == {"l3sw": {"vlans": ["vlan10", "vlan20"]}}
    assert doc["vlans"]["vlan10"]["faucet_vips"] == ["198.19.1.254/24"]
    assert doc["vlans"]["vlan20"]["faucet_vips"] == ["198.19.2.254/24"]
    assert doc["vlans"]["vlan20"]["faucet_mac"] == r.port("vlan20").mac
    assert "routers" not in config.faucet_yaml(load(Path(__file__).resolve().parents[2] / "examples/faucet-vlan.yaml"),
                                                 Names("abc123"))
