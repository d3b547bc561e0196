"""Every shipped Rally task file renders and passes Rally's own syntax validation:
plugin names exist (our plugins load by entry point), scenario arguments match the
scenario's signature, context/runner/SLA configs match their schemas."""

from pathlib import Path

import pytest
import yaml

from rally import api, exceptions
from rally.common.plugin import discover
from rally.task import engine, task_cfg

TASKS = sorted((Path(__file__).resolve().parents[2] / "rally-tasks").glob("*.yaml"))
ARGS = [{}, {"vswitch": "linuxbridge", "network": "flat"}, {"vswitch": "ovs", "network": "geneve"},
        {"vswitch": "ovs", "network": "vxlan", "backend": "libvirt", "image": "/srv/image"},
        {"run": "1ea255", "profile": "smoke"},
        {"backend": "openstack", "cloud": "c", "existing_network": "n", "flavor": "f", "unpinned": True,
         "prometheus": "http://127.0.0.1:9090", "compute_hosts": ["cmp1", "cmp2"]},
        {"backend": "openstack", "cloud": "c", "path": "floating-ip", "mgmt_network": "flat",
         "external_network": "public", "outside": "netns:out"}]


@pytest.fixture(scope="module", autouse=True)
def plugins():
    import rally.plugins
    rally.plugins.load()
    loaded = discover.import_modules_by_entry_point()
    assert any(p["name"] == "vnetbench" for p in loaded), "vnetbench is not a rally_plugins entry point"


def render(task_file, /, **args):
    task = api._Task.__new__(api._Task)         # render_template needs no API state
    return task.render_template(task_file.read_text(), template_dir=str(task_file.parent), **args)


def validate(text):
    config = task_cfg.TaskConfig(yaml.safe_load(text))
    eng = engine.TaskEngine.__new__(engine.TaskEngine)   # syntax checks need no DB or env
    eng.task = {"uuid": "syntax-check"}
    eng._validate_config_syntax(config)
    return config


def test_there_are_task_files():
    assert TASKS


@pytest.mark.parametrize("path", TASKS, ids=[p.name for p in TASKS])
@pytest.mark.parametrize("args", ARGS, ids=["defaults", "lb-flat", "ovs-geneve", "libvirt", "borrowed-run", "openstack",
                                        "openstack-routed"])
def test_task_renders_and_validates(path, args):
    config = validate(render(path, **args))
    names = {w["name"] for s in config.subtasks for w in s["workloads"]}
    assert names and all(n.startswith("VnetBench.") for n in names)
    # port-ready.yaml: the netns backend alone (ports without a VM; the cloud's are not built)
    if "outside" in args and path.name not in ("scale.yaml", "overlay-comparison.yaml", "port-ready.yaml"):
        # a routed path on a cloud: the context gets what the backend needs for it
        ctx = [w["contexts"]["vnetbench_testbed"] for s in config.subtasks for w in s["workloads"]]
        assert all({k: c.get(k) for k in ("mgmt_network", "external_network", "outside")}
                   == {k: args[k] for k in ("mgmt_network", "external_network", "outside")} for c in ctx)


def test_validation_catches_a_wrong_argument():
    text = render(TASKS[0]).replace("repetitions:", "repetitionz:", 1)
    with pytest.raises(exceptions.InvalidTaskConfig):
        validate(text)


@pytest.mark.parametrize("path", TASKS, ids=[p.name for p in TASKS])
def test_every_workload_says_its_configuration(path):
    """Rally's report shows a workload's description: it names vSwitch and network type."""
    config = validate(render(path, vswitch="linuxbridge", network="flat",
                             vswitches=["linuxbridge"], networks=["flat"]))
    for subtask in config.subtasks:
        for workload in subtask["workloads"]:
            assert workload["description"].startswith("linuxbridge/flat · "), workload["description"]


def _scenario_args(text, name):
    config = validate(text)
    return [w["args"] for s in config.subtasks for w in s["workloads"] if w["name"] == name]


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_libvirt_comparison_offers_tcg_guests_what_they_can_do(profile):
    """flow setup at 1,000/s and 70 Mbit/s fairness flows are beyond a TCG guest: the libvirt
    backend's points are 10/30/100 conn/s and a 10 Mbit/s bottleneck; tcg: false and the
    netns backend keep the seed's points."""
    path = TASKS[0].parent / "overlay-comparison.yaml"
    guest = render(path, profile=profile, backend="libvirt", columns=["ovs/vxlan"])
    assert _scenario_args(guest, "VnetBench.flow_setup")[0]["rates"] == [10, 30, 100]
    fair = _scenario_args(guest, "VnetBench.fairness")[0]
    assert fair["bottleneck_bps"] == 10000000 and max(map(max, fair["settings"])) <= 8000000
    for other in (dict(backend="libvirt", tcg=False), dict(backend="netns")):
        text = render(path, profile=profile, columns=["ovs/vxlan"], **other)
        assert _scenario_args(text, "VnetBench.flow_setup")[0]["rates"] == [10, 100, 1000, 10000]
        assert _scenario_args(text, "VnetBench.fairness")[0]["bottleneck_bps"] == 100000000


@pytest.mark.parametrize("seed_id", ["000", "002", "003", "004"])
def test_each_seeds_comparison_task_renders_with_its_task_args(seed_id):
    """What `vnetbench reproduce SEED` hands the comparison task (its columns, families,
    the seed file's task_args and its systems' paths) renders and validates; seed 002's
    RFC 2544 runs throughput and latency_at, repeated (a claim between two rows needs each
    row's spread), on a testbed with the bridge's pairs and the router's."""
    import yaml
    from vnetbench.reproduce import commands, seed
    s = seed.load(seed_id)
    task = TASKS[0].parent / "overlay-comparison.yaml"
    routed = s.measured_paths != ["l2"]
    text = render(task, profile="quick", columns=s.columns, tests=commands.families(s),
                  **(s.task_args or {}), **({"path": s.measured_paths} if routed else {}))
    validate(text)
    if seed_id == "002":
        per_column = _scenario_args(text, "VnetBench.rfc2544")
        assert len(per_column) == len(s.columns) == 5         # the bridge's, and each kind's router beside
        for args in per_column:
            assert args["measures"] == ["throughput", "latency_at"] and args["repetitions"] == 3
            assert args["latency_rates"] == [1, 1000] and args["latency_loads"] == [50, 150]
            assert args["frame_sizes"] == [64, 512, 1518]
        ctxs = [w["contexts"]["vnetbench_testbed"] for st in yaml.safe_load(text)["subtasks"]
                for w in st["workloads"]]
        assert ctxs and all(c["path"] == ["l2", "l3-east-west"] for c in ctxs)
    if seed_id == "000":
        _assert_seed000_columns(text)


def _assert_seed000_columns(text):
    """Seed 000: a column per testbed (routing svi, stick), each with the seed's flood RTT
    payloads and its throughput test: the 30 Mbit/s flow among the background of its own
    testbed (25 Mbit/s a flow on the L3 switch, 20 behind the stick)."""
    import yaml
    doc = yaml.safe_load(text)
    assert [st["title"] for st in doc["subtasks"]] == ["ovs/vlan svi", "ovs/vlan stick"]
    for st, routing, bps in zip(doc["subtasks"], ("svi", "stick"), (25000000, 20000000)):
        ctxs = [w["contexts"]["vnetbench_testbed"] for w in st["workloads"]]
        assert all((c["routing"], c["vswitch"], c["network"]) == (routing, "ovs", "vlan") for c in ctxs)
        assert all(w["description"].startswith(f"ovs/vlan {routing} ·") for w in st["workloads"])
    flood = [a for a in _scenario_args(text, "VnetBench.icmp_rtt") if a["mode"] == "flood"]
    assert [a["payloads"] for a in flood] == [[100, 1440]] * 2
    udp = _scenario_args(text, "VnetBench.udp_stream")
    assert [a["seconds"] for a in udp] == [5, 5]          # not the profile's 1 s: the background's start-up
    assert [(a["background_bps"], a["background"], a["background_length"], a["bitrate_bps"], a["sessions"])
            for a in udp] == [(25000000, "seed000", 500, 30000000, [1]), (20000000, "seed000", 500, 30000000, [1])]


def test_a_routing_column_builds_seed000s_testbed():
    """The context's routing: seed 000's four PCs on one switch in two VLANs, its pairs
    inside VLAN 10 and across (l3-east-west), same-host only; bad values in one line."""
    from vnetbench.rally_plugins.context import testbed_yaml
    from vnetbench.testbed.loader import loads
    for routing in ("svi", "stick"):
        tb = loads(testbed_yaml("ovs", "vlan", None, ["same-host", "cross-host"], path=["l2", "l3-east-west"],
                                routing=routing), online_cpus=[0, 1])
        assert [(p.name, p.vms, p.path, p.placement) for p in tb.pairs] == [
            ("intra", ("pc1", "pc2"), "l2", "same-host"), ("inter", ("pc1", "pc3"), "l3-east-west", "same-host")]
        assert [(r.routing, [p.vnet for p in r.ports]) for r in tb.routers] == [(routing, ["vlan10", "vlan20"])]
        assert [(v.name, v.nics[0].vnet) for v in tb.vms] == [
            ("pc1", "vlan10"), ("pc2", "vlan10"), ("pc3", "vlan20"), ("pc4", "vlan20")]
    for kwargs, words in (({"routing": "hub"}, "not one of svi, stick"),
                          ({"routing": "svi", "path": "north-south"}, "east-west only"),
                          ({"routing": "stick", "placements": ["cross-host"]}, "same-host")):
        args = {"placements": ["same-host"], **kwargs}
        with pytest.raises(ValueError, match=words) as e:
            testbed_yaml("ovs", "vlan", None, args.pop("placements"), **args)
        assert "\n" not in str(e.value)


def test_the_context_schema_refuses_an_unknown_routing():
    path = TASKS[0].parent / "overlay-comparison.yaml"
    text = render(path, profile="smoke", columns=["ovs/vlan svi"]).replace("routing: svi", "routing: hub")
    text = text.replace('"routing": "svi"', '"routing": "hub"')
    with pytest.raises(exceptions.InvalidTaskConfig):
        validate(text)


def test_the_comparison_with_security_groups_filters_every_testbed():
    """compare --security-groups: every workload's testbed context asks for it, and the
    context's schema takes it (validate runs it)."""
    import yaml
    path = TASKS[0].parent / "overlay-comparison.yaml"
    text = render(path, profile="smoke", columns=["linuxbridge/flat"], security_groups=True)
    validate(text)
    doc = yaml.safe_load(text)
    ctxs = [w["contexts"]["vnetbench_testbed"] for s in doc["subtasks"] for w in s["workloads"]]
    assert ctxs and all(c["security_groups"] is True for c in ctxs)
    plain = yaml.safe_load(render(path, profile="smoke", columns=["linuxbridge/flat"]))
    assert not any("security_groups" in w["contexts"]["vnetbench_testbed"]
                   for s in plain["subtasks"] for w in s["workloads"])


@pytest.mark.parametrize("tests", [None, ["icmp_rtt"], ["tcp_stream", "broadcast"], ["fairness"]])
def test_a_columns_families_share_one_testbed_the_last_tears_it_down(tests):
    """The comparison builds one testbed per column: every workload of a column names the
    column as its share key with the same configuration; only its last says keep: false."""
    path = TASKS[0].parent / "overlay-comparison.yaml"
    args = {"tests": tests} if tests else {}
    doc = yaml.safe_load(render(path, profile="quick", columns=["ovs/vxlan", "vrouter/gre"], **args))
    for sub in doc["subtasks"]:
        ctxs = [w["contexts"]["vnetbench_testbed"] for w in sub["workloads"]]
        assert {c["share"] for c in ctxs} == {sub["title"]}
        assert [c["keep"] for c in ctxs] == [True] * (len(ctxs) - 1) + [False]
        assert len({yaml.safe_dump({k: v for k, v in c.items() if k != "keep"}) for c in ctxs}) == 1


def test_the_routed_comparison_asks_every_testbed_for_its_path():
    """compare --path l3-east-west: every workload's context asks for a routed testbed
    (the context's schema takes it), and that testbed routes each pair through r1."""
    import yaml
    from vnetbench.rally_plugins.context import testbed_yaml
    from vnetbench.testbed.loader import loads
    task = TASKS[0].parent / "overlay-comparison.yaml"
    text = render(task, profile="smoke", columns=["ovs/vxlan"], **{"path": "l3-east-west"})
    validate(text)
    doc = yaml.safe_load(text)
    ctxs = [w["contexts"]["vnetbench_testbed"] for s in doc["subtasks"] for w in s["workloads"]]
    assert ctxs and all(c["path"] == "l3-east-west" for c in ctxs)
    tb = loads(testbed_yaml("ovs", "vxlan", None, ["same-host", "cross-host"], path="l3-east-west"))
    assert [(p.name, p.path, p.vnet, p.peer_vnet) for p in tb.pairs] == [
        ("same-ew", "l3-east-west", "vnet1", "vnet2"), ("cross-ew", "l3-east-west", "vnet1", "vnet2")]
    assert [(tb.vm(p.vms[1]).nics[0].vnet, tb.router_of("vnet1").name) for p in tb.pairs] == [("vnet2", "r1")] * 2


@pytest.mark.parametrize("way", ["l3-east-west", "north-south"])
@pytest.mark.parametrize("name", ["icmp-rtt", "tcp-mss", "udp-streams", "broadcast", "flow-setup", "rfc2544",
                                  "fairness"])
def test_every_family_task_takes_the_path(name, way):
    import yaml
    task = TASKS[0].parent / f"{name}.yaml"
    text = render(task, **{"path": way})
    validate(text)
    ctxs = [w["contexts"]["vnetbench_testbed"] for s in yaml.safe_load(text)["subtasks"] for w in s["workloads"]]
    assert ctxs and all(c["path"] == way for c in ctxs)
    assert not any("path" in w["contexts"]["vnetbench_testbed"]
                   for s in yaml.safe_load(render(task))["subtasks"] for w in s["workloads"])


def test_the_progress_line_tells_seed000s_columns_and_pairs_apart():
    """Rally's progress lines name the routing column and the routed pair: "ovs/vlan svi ...
    same-host l3-east-west", not two identical "ovs/vlan ... same-host" lines."""
    from vnetbench.rally_plugins.scenarios import _summary
    from vnetbench.results.record import Result
    labels = {"vswitch": "ovs", "network": "vlan", "routing": "stick", "placement": "same-host",
              "path": "l3-east-west", "point": "100 B"}
    line = _summary(Result(test="icmp_rtt", labels=labels, samples={"rtt_mean_ms": [0.5]}))
    assert line == "ovs/vlan stick icmp_rtt same-host l3-east-west 100 B: rtt_mean_ms 0.5"


def test_compare_selects_port_ready_with_its_arguments_and_sla():
    overlay = next(p for p in TASKS if p.name == "overlay-comparison.yaml")
    config = validate(render(overlay, tests=["port_ready"], port_ready_ports=12, port_ready_steps=3))
    works = [w for s in config.subtasks for w in s["workloads"]]
    assert {w["name"] for w in works} == {"VnetBench.port_ready"}
    assert all(w["args"]["ports"] == 12 and w["args"]["steps"] == 3 for w in works)
    assert all(w["sla"] == {"vnetbench": {"max_not_ready": 0}} for w in works)
    assert all(not w["contexts"]["vnetbench_testbed"].get("keep") for w in works)   # the last tears down
