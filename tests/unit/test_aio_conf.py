"""The all-in-one cloud's layout and configuration (pure): everything derives from the
state dir and run id, the nova/neutron options the issue names are set, and every file
lands inside the state dir."""

import configparser
from pathlib import Path

from vnetbench.aio import conf
from vnetbench.aio.procs import Journal, start_time, alive

LAY = conf.Layout(Path("/var/tmp/vnbaio-x"), "a1b2c3", port_base=20000, cidr="198.19.250.0/24",
                  host="vm")


def _parse(text: str) -> configparser.ConfigParser:
    p = configparser.ConfigParser(interpolation=None)
    p.read_string(text)
    return p


def test_every_file_is_inside_the_state_dir_and_parses():
    files = conf.files(LAY)
    assert files and all(LAY.state in path.parents for path in files)
    for path, text in files.items():
        if path.name not in ("rabbitmq.conf", "libvirtd.conf"):    # not ini files
            _parse(text)


def test_ports_are_distinct_and_from_the_base():
    ports = [LAY.port(n) for n in conf.PORT_NAMES]
    assert len(set(ports)) == len(ports) and min(ports) == 20000


def test_nova_is_qemu_pinned_numa_aware_with_config_drive():
    n = _parse(conf.nova(LAY))
    assert n["libvirt"]["virt_type"] == "qemu"
    assert n["workarounds"]["libvirt_disable_apic"] == "true"
    assert "NUMATopologyFilter" in n["filter_scheduler"]["enabled_filters"].split(",")
    assert n["compute"]["cpu_dedicated_set"] == "0-1"
    assert n["DEFAULT"]["force_config_drive"] == "true"
    assert n["DEFAULT"]["instance_name_template"].startswith(LAY.instance_prefix)
    assert n["DEFAULT"]["osapi_compute_workers"] == "1"
    assert n["os_vif_ovs"]["ovsdb_connection"] == "unix:/var/tmp/vnbaio-x/ovs/db.sock"


def test_neutron_ml2_ovs_netdev_on_the_owned_bridges():
    a = _parse(conf.ovs_agent(LAY))
    assert a["ovs"]["datapath_type"] == "netdev"
    assert a["ovs"]["bridge_mappings"] == f"{conf.PHYSNET}:vnba1b2c3-phy"
    assert a["ovs"]["integration_bridge"] == "vnba1b2c3-int"
    assert all(len(b) <= 15 for b in (LAY.br_int, LAY.br_tun, LAY.br_phys))   # IFNAMSIZ
    assert a["ovs"]["of_listen_port"] == str(LAY.port("openflow"))   # not os-ken's 6633/6653
    m = _parse(conf.ml2(LAY))
    assert m["ml2"]["mechanism_drivers"] == "openvswitch"
    assert _parse(conf.neutron(LAY))["DEFAULT"]["api_workers"] == "1"


def test_the_l3_agent_is_legacy_on_veths_of_the_owned_bridge_and_the_outside_is_apart():
    """Legacy routers (no DVR/HA/metadata proxy) with the router service plugin; router
    ports as veths (the netdev datapath's taps stop carrying traffic in a namespace); the
    external network a twin subnet in the other /16, its outside namespace and veth
    named by the run (IFNAMSIZ), its gateway the outside host."""
    l3 = _parse(conf.l3_agent(LAY))
    assert l3["DEFAULT"]["interface_driver"] == "openvswitch" and l3["DEFAULT"]["ovs_use_veth"] == "true"
    assert l3["DEFAULT"]["agent_mode"] == "legacy" and l3["DEFAULT"]["enable_metadata_proxy"] == "false"
    assert l3["ovs"]["integration_bridge"] == LAY.br_int and l3["ovs"]["datapath_type"] == "netdev"
    assert l3["ovs"]["ovsdb_connection"] == LAY.ovsdb
    assert "router" in _parse(conf.neutron(LAY))["DEFAULT"]["service_plugins"].split(",")
    assert LAY.external_cidr == "198.18.250.0/24" and LAY.outside_cidr == "198.18.250.1/24"
    assert len(LAY.outside_link) <= 15 and LAY.run_id in LAY.outside_netns
    assert LAY.netns_dir.parent == LAY.state


def test_the_capacity_hand_off_reaches_placement():
    """--ovs-kpps: the OVS agent reports the packet rate; Neutron's placement plugin (with
    credentials for Placement) syncs it; without it, no inventory line."""
    n = _parse(conf.neutron(LAY))
    assert "placement" in n["DEFAULT"]["service_plugins"].split(",")
    assert n["placement"]["auth_url"].endswith("/v3") and n["placement"]["username"] == "neutron"
    assert "resource_provider_packet_processing_without_direction" not in _parse(conf.ovs_agent(LAY))["ovs"]
    from dataclasses import replace
    a = _parse(conf.ovs_agent(replace(LAY, ovs_kpps=79)))
    assert a["ovs"]["resource_provider_packet_processing_without_direction"] == "vm:79"


def test_every_network_type_of_the_templates_is_enabled():
    """A provider network of each type heat-templates/ offers can be made on the AIO."""
    import yaml
    tpl = yaml.safe_load((Path(__file__).parents[2] / "heat-templates/testbed.yaml").read_text())
    offered = tpl["parameters"]["network_type"]["constraints"][0]["allowed_values"]
    m = _parse(conf.ml2(LAY))
    assert m["ml2"]["type_drivers"].split(",") == offered
    assert m["ml2_type_vlan"]["network_vlan_ranges"] == conf.PHYSNET
    tunnels = [t for t in offered if t not in ("flat", "vlan")]
    assert all(m[f"ml2_type_{t}"] for t in tunnels)
    assert _parse(conf.ovs_agent(LAY))["agent"]["tunnel_types"].split(",") == tunnels


def test_host_address_and_pool_in_the_benchmarking_range():
    assert LAY.host_cidr == "198.19.250.1/24"
    assert LAY.pool == ("198.19.250.10", "198.19.250.254")


def test_journal_skips_a_torn_last_line(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    j.record("process", name="a", pid=1, start=2)
    with open(j.path, "a") as f:
        f.write('{"kind": "proc')
    assert j.entries() == [{"kind": "process", "name": "a", "pid": 1, "start": 2}]


def test_a_recycled_pid_is_not_ours():
    import os
    me = {"pid": os.getpid(), "start": start_time(os.getpid())}
    assert alive(me)
    assert not alive({**me, "start": me["start"] - 1})


DATA = Path(__file__).parent.parent / "data" / "aio"


def test_a_daemons_last_error_line_is_the_exception_not_oslos_closing_line():
    from vnetbench.aio.procs import _tail, log_lines
    log = DATA / "nova-compute-domain-race.log"        # recorded: nova-compute died at start
    assert _tail(log).endswith("libvirt.libvirtError: Domain not found: no domain with matching "
                               "uuid '85160f9c-f3a6-4421-b14e-dda9e8f793eb' (vnb-aa1da6-same-b)")
    from vnetbench.aio.resources import RACE
    assert any(RACE in ln for ln in log_lines(log, 60))


class _FakeCloud:
    """Just what Aio._wait_compute reads: a hypervisor, live OVS and L3 agents, PCPU inventory."""
    import socket
    HOST = socket.gethostname()

    class compute:
        @staticmethod
        def hypervisors(details=False):
            # Nova >= 2.88 asks each compute for its uptime over RPC for the details: a
            # compute still starting lets that time out (HTTP 500), so the wait never asks
            assert not details, "the wait for the computes must not list hypervisor details"
            return [type("H", (), {"name": _FakeCloud.HOST})()]

    class network:
        agents = staticmethod(lambda: [type("A", (), {"agent_type": t, "is_alive": True,
                                                      "host": _FakeCloud.HOST})()
                                       for t in ("Open vSwitch agent", "L3 agent")])

    class placement:
        resource_providers = staticmethod(lambda: [type("R", (), {"name": _FakeCloud.HOST})()])
        resource_provider_inventories = staticmethod(
            lambda rp: [type("I", (), {"resource_class": "PCPU"})()])


def _dead_pid() -> int:
    import subprocess
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_nova_compute_killed_by_the_domain_race_is_started_again(tmp_path, monkeypatch):
    import os
    import shutil
    from vnetbench.aio.cloud import Aio
    aio = Aio(tmp_path / "aio")
    aio.lay.logs.mkdir(parents=True)
    shutil.copy(DATA / "nova-compute-domain-race.log", aio.lay.logs / "nova-compute.log")
    aio.journal.record("process", name="nova-compute", pid=_dead_pid(), start=1)
    argv = ["nova-compute", "--config-file", "x"]
    aio._computes = {"nova-compute": (argv, {})}
    started = []

    def start(name, argv, env=None):
        started.append((name, argv))
        aio.journal.record("process", name=name, pid=os.getpid(), start=start_time(os.getpid()))
    monkeypatch.setattr(aio.daemons, "start", start)
    monkeypatch.setattr(aio, "connect", lambda *a: _FakeCloud)
    aio._wait_compute(timeout_s=10)
    assert started == [("nova-compute", argv)]
    assert [e["name"] for e in aio.current()] == ["nova-compute"] and alive(aio.current()[0])


def test_any_other_exit_fails_up_with_the_daemons_last_error(tmp_path, monkeypatch):
    import pytest
    from vnetbench.aio.cloud import Aio
    from vnetbench.errors import VnetbenchError
    aio = Aio(tmp_path / "aio")
    aio.lay.logs.mkdir(parents=True)
    (aio.lay.logs / "nova-compute.log").write_text(
        "2026-11-23 17:57:57.298 1 ERROR nova.cmd Error: no such option cpu_dedicated_set\n")
    aio.journal.record("process", name="nova-compute", pid=_dead_pid(), start=1)
    monkeypatch.setattr(aio, "connect", lambda *a: _FakeCloud)
    with pytest.raises(VnetbenchError, match="nova-compute exited: .*no such option"):
        aio._wait_compute(timeout_s=10)
