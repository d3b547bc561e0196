"""The all-in-one cloud on Epoxy with ML2/OVN (pure): the release and driver checked before
anything is built, OVN's configuration (Neutron, the metadata agents, Nova's metadata API),
and the argv that runs a program from the release's root."""

import configparser
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from vnetbench.aio import conf
from vnetbench.aio.__main__ import main
from vnetbench.aio.rootexec import HOST_PROGRAMS, RootExec

LAY = conf.Layout(Path("/var/tmp/vnbaio-x"), "a1b2c3", port_base=20000, host="vm",
                  release="epoxy", ml2="ovn", computes=2)


def _parse(text: str) -> configparser.ConfigParser:
    p = configparser.ConfigParser(interpolation=None)
    p.read_string(text)
    return p


@pytest.mark.parametrize("release,ml2,ok", [("zed", "ovs", True), ("epoxy", "ovs", True),
                                            ("epoxy", "ovn", True), ("zed", "ovn", False)])
def test_release_and_driver_pairs(release, ml2, ok):
    problem = conf.check_release(release, ml2)
    assert (problem == "") == ok
    if not ok:
        assert "--ml2 ovn" in problem and "2045889" in problem


@given(st.text(max_size=60), st.sampled_from(["ovs", "ovn", "linuxbridge", ""]))
def test_any_release_name_is_one_line_or_accepted(release, ml2):
    problem = conf.check_release(release, ml2)
    assert problem == "" or ("\n" not in problem and problem.startswith("--"))


@pytest.mark.parametrize("argv,needle", [(["--release", "kilo"], "--release 'kilo': unknown"),
                                         (["--ml2", "linuxbridge"], "--ml2 'linuxbridge': unknown"),
                                         (["--release", "zed"], "runs on --release epoxy")])
def test_the_cli_refuses_before_building(argv, needle, capsys, tmp_path):
    assert main(["up", "--state", str(tmp_path / "s"), *argv]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_ml2_ovn_talks_to_the_aios_own_databases_with_geneve_tenants():
    m = _parse(conf.ml2(LAY))
    assert m["ml2"]["mechanism_drivers"] == "ovn"
    assert m["ml2"]["tenant_network_types"] == "geneve"
    assert set(m["ml2"]["type_drivers"].split(",")) == {"flat", "vlan", "geneve"}
    assert m["ovn"]["ovn_nb_connection"] == "unix:/var/tmp/vnbaio-x/ovn/ovnnb_db.sock"
    assert m["ovn"]["ovn_sb_connection"] == "unix:/var/tmp/vnbaio-x/ovn/ovnsb_db.sock"
    assert m["ml2_type_geneve"]["max_header_size"] == "38"
    assert _parse(conf.neutron(LAY))["DEFAULT"]["service_plugins"] == "ovn-router,qos"


def test_ovn_files_replace_the_agents_files():
    files = {p.relative_to(LAY.state).as_posix() for p in conf.files(LAY)}
    assert {"etc/nodes/c1/ovn_metadata_agent.ini", "etc/nodes/c2/ovn_metadata_agent.ini",
            "etc/hosts"} <= files
    assert not any(f.endswith(("openvswitch_agent.ini", "l3_agent.ini")) for f in files)
    zed = conf.Layout(LAY.state, LAY.run_id, computes=2)
    assert not any(p.name in ("ovn_metadata_agent.ini", "hosts") for p in conf.files(zed))


def test_each_metadata_agent_reaches_novas_metadata_api_from_its_node():
    one, two = (_parse(conf.ovn_metadata_agent(LAY, n)) for n in LAY.nodes)
    assert one["DEFAULT"]["nova_metadata_host"] == "127.0.0.1"
    assert two["DEFAULT"]["nova_metadata_host"] == LAY.nodes[1].mgmt[0]
    assert two["DEFAULT"]["host"] == LAY.nodes[1].host
    assert two["ovs"]["ovsdb_connection"] == LAY.nodes[1].ovsdb
    nova = _parse(conf.nova(LAY))
    assert nova["DEFAULT"]["enabled_apis"] == "osapi_compute,metadata"
    assert nova["DEFAULT"]["metadata_listen_port"] == two["DEFAULT"]["nova_metadata_port"]
    assert nova["neutron"]["metadata_proxy_shared_secret"] == \
        two["DEFAULT"]["metadata_proxy_shared_secret"]
    assert "AvailabilityZoneFilter" not in nova["filter_scheduler"]["enabled_filters"]


def test_the_hosts_file_names_every_node():
    text = conf.hosts(LAY)
    assert all(n.host in text for n in LAY.nodes) and "127.0.0.1 localhost" in text


def test_root_exec_wraps_the_releases_programs_only():
    rx = RootExec(Path("/c/root"), LAY.state, LAY.hosts_file)
    wrapped = rx(["neutron-server", "--config-file", Path("/x")])
    assert wrapped[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    assert wrapped[-3:] == ["neutron-server", "--config-file", "/x"]
    assert wrapped[-6:-3] == ["/c/root", str(LAY.state), str(LAY.hosts_file)]
    for prog in sorted(HOST_PROGRAMS):
        assert rx([prog, "a"]) == [prog, "a"]
    assert RootExec(None, LAY.state, LAY.hosts_file)(["nova-compute", 1]) == ["nova-compute", "1"]


def test_ovs_kpps_with_ovn_is_refused(capsys, tmp_path):
    argv = ["up", "--state", str(tmp_path / "s"), "--release", "epoxy", "--ml2", "ovn", "--ovs-kpps", "100"]
    assert main(argv) == 2
    assert "--ovs-kpps: ML2/OVN" in capsys.readouterr().err and not (tmp_path / "s").exists()
