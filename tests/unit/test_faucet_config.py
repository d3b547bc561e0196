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


# recorded from a faucet/vlan testbed: h1's Faucet flows, the kept ones (a secure bridge keeps
# them through Faucet's stop) are 40 s old, the new Faucet's cold start installed port 3's
DUMP = """\
 cookie=0x5adc15c0, duration=40.112s, table=0, n_packets=12, n_bytes=1008, priority=9000,in_port=1,vlan_tci=0x0000/0x1fff actions=push_vlan:0x8100,set_field:4197->vlan_vid,goto_table:1
 cookie=0x5adc15c0, duration=0.412s, table=0, n_packets=0, n_bytes=0, priority=9000,in_port=3,vlan_tci=0x0000/0x1fff actions=push_vlan:0x8100,set_field:4197->vlan_vid,goto_table:1
 cookie=0x5adc15c0, duration=0.398s, table=0, n_packets=3, n_bytes=258, priority=9000,in_port=65000,dl_vlan=101 actions=goto_table:1
 cookie=0x5adc15c0, duration=0.401s, table=3, n_packets=0, n_bytes=0, priority=8240,dl_vlan=101 actions=pop_vlan,output:1,output:3
"""


@pytest.mark.parametrize("ports,within_s,fresh", [
    ([3, 65000], 2.0, True),
    ([1, 3], 2.0, False),        # port 1's flow is the stopped Faucet's
    ([1, 3], 60.0, True),
    ([3], 0.3, False),           # older than the start
    ([7], 60.0, False),          # no flow for that port at all
    ([], 1.0, True),
])
def test_a_restarted_faucet_counts_only_flows_it_installed(ports, within_s, fresh):
    """Faucet's cold start deletes every flow and installs its pipeline: a port flow
    younger than the restart is the new Faucet's, the kept ones are not."""
    assert netns.programmed_since(DUMP, ports, within_s) is fresh


def test_a_reconnect_time_out_quotes_faucets_story_not_its_chatter():
    lines = ["Nov 28 20:07:04 faucet INFO     version 1.10.12",
             "Nov 28 20:07:04 faucet INFO     Reloading configuration",
             "Nov 28 20:07:04 faucet INFO     Add new datapath DPID 1 (0x1)",
             "table ID 2 table config exact_match: True match_types: (('eth_dst', False),)",
             "Nov 28 20:07:12 faucet.valve INFO     DPID 1 (0x1) h1 port desc stats",
             "Nov 28 20:07:12 faucet.valve INFO     DPID 1 (0x1) h1 Port 1 fabricating ADD status True",
             "Nov 28 20:07:12 faucet.valve ERROR    DPID 1 (0x1) h1 send_flow_msgs: DP not up",
             "Nov 28 20:07:12 faucet.valve INFO     DPID 1 (0x1) h1 Cold start configuring DP",
             "Nov 28 20:07:13 faucet.valve INFO     DPID 1 (0x1) h1 L2 learned on Port 3 02:76:6e:00:02:00",
             "Nov 28 20:07:14 faucet ERROR    EventOFPSwitchFeatures: unknown datapath DPID 3 (0x3)"]
    said = netns.faucet_evidence(lines)
    assert [x.split(" INFO ")[-1].split(" ERROR ")[-1].strip() for x in said] == [
        "version 1.10.12", "Reloading configuration", "Add new datapath DPID 1 (0x1)",
        "DPID 1 (0x1) h1 port desc stats", "DPID 1 (0x1) h1 send_flow_msgs: DP not up",
        "DPID 1 (0x1) h1 Cold start configuring DP",
        "EventOFPSwitchFeatures: unknown datapath DPID 3 (0x3)"]
    assert netns.faucet_evidence(lines, limit=2) == said[-2:]


def test_a_reconnect_time_out_quotes_ovs_tries_and_backoffs():
    """The OVS 3.1.0 log of a bridge that waited 8 s (its default backoff, not the
    Controller's 1 s) after the new Faucet's start refused it."""
    log = ["2026-11-28T20:07:04.155Z|00192|rconn|WARN|bi79a164<->tcp:198.19.255.1:6653: connection failed (Connection refused)",
           "2026-11-28T20:07:04.155Z|00193|rconn|DBG|bi79a164<->tcp:198.19.255.1:6653: entering BACKOFF",
           "2026-11-28T20:07:12.155Z|00195|vconn|DBG|tcp:198.19.255.1:6653: sent (Success): OFPT_HELLO (OF1.3) (xid=0xe):",
           " version bitmap: 0x04",
           "2026-11-28T20:07:12.654Z|00198|rconn|INFO|bi79a164<->tcp:198.19.255.1:6653: connected"]
    assert netns.rconn_evidence(log) == ["20:07:04.155 connection failed (Connection refused)",
                                         "20:07:04.155 entering BACKOFF", "20:07:12.654 connected"]
    assert netns.rconn_evidence(log, limit=1) == ["20:07:12.654 connected"]


def test_the_reconnect_bound_follows_ovs_and_os_ken():
    """One backoff at OVS's default (the Controller's max_backoff not yet in force), one
    connect attempt, os-ken's handshake time-out; more than the old 10 s, which a bridge
    at the 8 s backoff plus the 5 s stale status exceeded."""
    assert netns.RECONNECT_S == 8 + 1 + 5
    assert netns.MAX_BACKOFF_MS / 1000 <= netns.OVS_DEFAULT_MAX_BACKOFF_S


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
