"""A cloud's provenance (testbed.openstack.facts): the cloud's own clouds.yaml block first,
else what the APIs tell; and the report's provenance rows that show it."""

from types import SimpleNamespace

from hypothesis import given, strategies as st

from vnetbench.report import provenance as rprov
from vnetbench.testbed.openstack import facts

AIO_BLOCK = {"release": "epoxy", "series": "2025.1 Epoxy", "mechanism_driver": "ovn",
             "ovs": "3.5.0-1+b1", "ovn": "25.03.0-1", "neutron": "2:26.0.3-0+deb13u3",
             "nova": "2:31.0.0-6+deb13u3"}


class Conn:
    def __init__(self, config, microversion="2.100", agents=("OVN Controller agent", "OVN Metadata agent")):
        self.config = SimpleNamespace(config=config)
        self.compute = SimpleNamespace(get_endpoint_data=lambda: SimpleNamespace(max_microversion=microversion))
        self.network = SimpleNamespace(agents=lambda: [SimpleNamespace(agent_type=t) for t in agents])


def test_the_clouds_own_block_wins():
    got = facts.collect(Conn({"vnetbench": AIO_BLOCK}, microversion="2.93"))
    assert {k: got[k] for k in AIO_BLOCK} == AIO_BLOCK
    assert got["source"].startswith("clouds.yaml")


def test_without_a_block_the_apis_tell_series_and_driver_and_no_versions():
    got = facts.collect(Conn({}))
    assert got["series"] == "2025.1 Epoxy" and got["mechanism_driver"] == "ovn"
    assert got["ovs"] is None and got["ovn"] is None
    zed = facts.collect(Conn({}, "2.93", ("Open vSwitch agent", "L3 agent")))
    assert zed["series"] == "2022.2 Zed" and zed["mechanism_driver"] == "openvswitch"
    other = facts.collect(Conn({}, "2.96", ()))
    assert other["series"] == "Nova API 2.96" and other["mechanism_driver"] is None


def test_apis_that_refuse_leave_unknowns():
    conn = Conn({})
    conn.compute = SimpleNamespace(get_endpoint_data=lambda: 1 / 0)
    conn.network = SimpleNamespace(agents=lambda: (_ for _ in ()).throw(PermissionError()))
    got = facts.collect(conn)
    assert got["series"] is None and got["mechanism_driver"] is None


@given(st.dictionaries(st.text(max_size=20), st.one_of(st.none(), st.text(max_size=300), st.integers(),
                                                       st.lists(st.integers(), max_size=3))))
def test_any_block_is_read_bounded_or_ignored(block):
    got = facts.from_clouds_yaml({"vnetbench": block})
    assert set(got) == set(facts.FIELDS)
    assert all(v is None or (isinstance(v, str) and len(v) <= 120) for k, v in got.items() if k != "source")
    assert facts.from_clouds_yaml({"vnetbench": ["not", "a", "mapping"]}) is None


def test_the_report_rows_name_the_cloud():
    rec = SimpleNamespace(provenance={"openstack": AIO_BLOCK, "tools": {"ovs-vswitchd": "runner's 3.1"}},
                          labels={"vswitch": "ovs"})
    rows = {name: get(rec) for name, get in rprov.FIELDS}
    assert rows["OpenStack"] == "2025.1 Epoxy" and rows["Neutron ML2"] == "ovn"
    assert rows["OVN"] == "25.03.0-1"
    assert rows["vSwitch"] == "Open vSwitch 3.5.0-1+b1 (the cloud's nodes)"


def test_a_testbed_of_another_driver_is_refused_by_name():
    found = {"mechanism_driver": "ovn"}
    assert facts.mismatch("ovn", "ml2-ovn", found) == ""
    said = facts.mismatch("ovs", "ml2-ovs", found)
    assert "ML2 openvswitch" in said and "ML2 ovn" in said and "vswitch to ovn" in said
    assert facts.mismatch("ovs", "ml2-ovs", {"mechanism_driver": None}) == ""
    assert facts.mismatch("vrouter", "tungsten-fabric", found) == ""


NODES = {"vm": {"ovsdb": "unix:/var/tmp/vnbaio-x/ovs/db.sock", "netns": None, "bridge": "vnbabc123-int"},
         "c2.vnbaioabc123.test": {"ovsdb": "unix:/var/tmp/vnbaio-x/nodes/c2/ovs/db.sock",
                                  "netns": "vnbaioabc123-c2", "bridge": "vnbabc123-int"}}


def test_the_nodes_block_is_read_checked():
    got = facts.from_clouds_yaml({"vnetbench": {**AIO_BLOCK, "nodes": NODES}})
    assert got["nodes"] == NODES


@given(st.one_of(st.none(), st.integers(), st.text(max_size=20),
                 st.dictionaries(st.text(max_size=30), st.one_of(
                     st.none(), st.text(max_size=30),
                     st.fixed_dictionaries({"ovsdb": st.one_of(st.none(), st.text(max_size=40)),
                                            "netns": st.one_of(st.none(), st.text(max_size=70)),
                                            "bridge": st.one_of(st.none(), st.text(max_size=20))})),
                     max_size=4)))
def test_any_nodes_block_is_accepted_checked_or_one_line(value):
    from vnetbench.errors import VnetbenchError
    try:
        got = facts.nodes_of(value)
    except VnetbenchError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("clouds.yaml: vnetbench.nodes")
        return
    for node in got.values():
        assert node["ovsdb"].startswith("unix:/") and len(node["bridge"]) <= 15
        assert node["netns"] is None or "/" not in node["netns"]
