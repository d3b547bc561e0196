"""The openstack backend's logic with fake openstacksdk objects: stack parameters from a
testbed, outputs back onto it, placement and pinning verification, the non-admin
cross-host fallback, stack deletion only of the run's own stack (also from cleanup), and
the host-side CPU window from Prometheus. The real thing runs in
tests/integration/openstack/ against an all-in-one cloud."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from vnetbench import kinds, promcpu
from vnetbench.errors import BuildError, VnetbenchError
from vnetbench.rally_plugins import context as rally_context
from vnetbench.state import Run
from vnetbench.testbed.loader import loads
from vnetbench.testbed.unwind import teardown
from vnetbench.testbed.openstack import builder, cloud, stack as st, undo, verify

RID = "0a1b2c"


def _tb(placements=("same-host", "cross-host"), network="vxlan"):
    return loads(rally_context.testbed_yaml("ovs", network, None, list(placements)), source="<test>",
                 online_cpus=[0, 1])


def _opts(**kw):
    return st.Options(cloud="c", **kw)


# -- parameters ---------------------------------------------------------------------

def test_parameters_admin_make_provider_networks_and_a_pinned_flavor():
    p = st.parameters(_tb(), RID, _opts(), admin=True, public_key="ssh-ed25519 AAA")
    assert p["network_mode"] == "provider" and p["network_type"] == "vxlan"
    assert p["flavor"] == "" and p["vcpus"] == 1 and p["cpu_thread_policy"] == "prefer"
    assert (p["same_host_pairs"], p["cross_host_pairs"], p["unplaced_pairs"]) == (1, 1, 0)
    macs = p["macs"]["same_host"]["a"] + p["macs"]["same_host"]["b"] + p["macs"]["cross_host"]["a"]
    assert len(set(macs)) == 3 and all(m.startswith("fa:0a:1b:2c:") for m in macs)


def test_physical_network_only_when_named():
    """Unset, the SDN environment file's default stands (a parameter passed would win)."""
    assert "physical_network" not in st.parameters(_tb(network="vlan"), RID, _opts(), True, "k")
    p = st.parameters(_tb(network="vlan"), RID, _opts(physical_network="datacentre"), True, "k")
    assert p["physical_network"] == "datacentre" and p["network_type"] == "vlan"


def test_macs_differ_between_runs():
    a = st.parameters(_tb(), RID, _opts(), True, "k")["macs"]
    b = st.parameters(_tb(), "ffeedd", _opts(), True, "k")["macs"]
    assert not set(a["same_host"]["a"]) & set(b["same_host"]["a"])


def test_parameters_non_admin_tenant_network_needs_an_existing_flavor():
    with pytest.raises(VnetbenchError, match="not admin, so no pinned flavor.*--flavor"):
        st.parameters(_tb(), RID, _opts(), admin=False, public_key="k")
    p = st.parameters(_tb(), RID, _opts(flavor="pinned.small"), admin=False, public_key="k")
    assert p["network_mode"] == "tenant" and p["flavor"] == "pinned.small"


def test_existing_network_and_the_no_server_group_fallback():
    p = st.parameters(_tb(), RID, _opts(network="vnetbench-flat", no_server_groups=True), True, "k")
    assert p["network_mode"] == "existing" and p["existing_network"] == "vnetbench-flat"
    assert (p["cross_host_pairs"], p["unplaced_pairs"]) == (0, 1)


def test_port_overrides_only_where_neutron_allows_them():
    """Fixed MACs and port security off: admin, or the project's own networks."""
    member = _opts(flavor="f", network="shared-net")
    assert st.parameters(_tb(), RID, _opts(network="n"), True, "k", owner=False)["port_overrides"]
    assert st.parameters(_tb(), RID, member, False, "k", owner=True)["port_overrides"]
    assert not st.parameters(_tb(), RID, member, False, "k", owner=False)["port_overrides"]
    assert st.parameters(_tb(), RID, _opts(flavor="f"), False, "k", owner=False)["port_overrides"]


def test_require_thread_policy_is_refused_with_the_reason():
    with pytest.raises(VnetbenchError, match="'require' cannot schedule on hosts without SMT"):
        _opts(cpu_thread_policy="require")


def test_no_cloud_is_one_clear_error():
    with pytest.raises(VnetbenchError, match="no cloud named; pass --cloud NAME"):
        st.Options(cloud="")


def test_every_vswitch_kind_has_an_environment_file():
    for kind in (k for k in kinds.all_kinds() if k.openstack_environment):
        tb = loads(rally_context.testbed_yaml(kind.name, kind.preferred_network.value, None,
                                              ["same-host"]), source="<t>", online_cpus=[0, 1])
        assert st.environment(tb).is_file(), kind


def _pairs_output(tb, opts):
    out = []
    for g in st.GROUPS:
        for i, pair in enumerate(st.grouped(tb, opts)[g]):
            out.append({"placement": pair.placement, **{
                side: {"server": f"srv-{vm}", "name": f"vnb-{RID}-{vm}", "port": f"port-{vm}",
                       "ip": f"198.19.250.{10 + 2 * len(out) + k}", "mac": f"fa:0a:1b:2c:00:{2 * len(out) + k:02x}"}
                for k, (side, vm) in enumerate(zip("ab", pair.vms))}})
    return out


def test_outputs_become_the_testbed_the_battery_sees():
    tb, opts = _tb(), _opts(network="vnetbench-flat")
    vms = st.vm_outputs(tb, opts, _pairs_output(tb, opts))
    real = st.realised(tb, vms, {"vnet1": "198.19.250.0/24"}, 1450)
    assert str(real.vm("same-a").nics[0].ip) == "198.19.250.10"
    assert real.vm("cross-b").nics[0].mac == "fa:0a:1b:2c:00:03"
    assert str(real.vnets[0].cidr) == "198.19.250.0/24" and real.network.tenant_mtu == 1450
    with pytest.raises(VnetbenchError, match="has 1 pairs, the testbed 2"):
        st.vm_outputs(tb, opts, _pairs_output(tb, opts)[:1])


# -- verification ----------------------------------------------------------------------

PAIRS = [("same", "same-host", "same-a", "same-b"), ("cross", "cross-host", "cross-a", "cross-b")]


def _servers(**hosts):
    return {vm: {"host": h, "host_id": f"id-{h}" if h else None} for vm, h in hosts.items()}


def test_placement_as_admin_by_host_name():
    ok = verify.placement(PAIRS, _servers(**{"same-a": "c1", "same-b": "c1", "cross-a": "c1",
                                             "cross-b": "c2"}), admin=True)
    assert ok.problems == [] and ok.facts["placement_by"] == "OS-EXT-SRV-ATTR:host"
    bad = verify.placement(PAIRS, _servers(**{"same-a": "c1", "same-b": "c2", "cross-a": "c1",
                                              "cross-b": "c1"}), admin=True)
    assert len(bad.problems) == 2
    assert "same-host, but same-a is on c1 and same-b on c2" in bad.problems[0]
    assert "cross-host, but cross-a and cross-b are both on c1" in bad.problems[1]


def test_placement_without_admin_by_host_id():
    servers = {vm: {"host": None, "host_id": h} for vm, h in
               {"same-a": "x", "same-b": "x", "cross-a": "x", "cross-b": "y"}.items()}
    v = verify.placement(PAIRS, servers, admin=False)
    assert v.problems == [] and v.facts["placement_by"] == "hostId"
    servers["same-b"]["host_id"] = "y"
    assert "same-host" in verify.placement(PAIRS, servers, admin=False).problems[0]


def _topo(pins):
    return {"nodes": [{"cpu_pinning": pins, "host_node": 0, "memory_mb": 256, "siblings": [],
                       "vcpu_set": list(map(int, pins))}], "pagesize_kb": None}


def test_pinning_verified_as_admin():
    v = verify.pinning({"a": _topo({"0": 2}), "b": _topo({"0": 3})}, {"a": 1, "b": 1},
                       {"a": "c1", "b": "c1"}, admin=True)
    assert v.problems == [] and v.warnings == [] and v.facts == {"a": {"0": 2}, "b": {"0": 3}}


def test_pinning_problems_are_errors():
    shared = verify.pinning({"a": _topo({"0": 2}), "b": _topo({"0": 2})}, {"a": 1, "b": 1},
                            {"a": "c1", "b": "c1"}, admin=True)
    assert "host CPU 2 of c1 is also a's" in shared.problems[0]
    other_hosts = verify.pinning({"a": _topo({"0": 2}), "b": _topo({"0": 2})}, {"a": 1, "b": 1},
                                 {"a": "c1", "b": "c2"}, admin=True)
    assert other_hosts.problems == []
    unpinned = verify.pinning({"a": {"nodes": [], "pagesize_kb": None}}, {"a": 1}, {"a": "c1"}, True)
    assert "not pinned; use a flavor with hw:cpu_policy=dedicated" in unpinned.problems[0]
    short = verify.pinning({"a": _topo({"0": 2})}, {"a": 2}, {"a": "c1"}, True)
    assert "the flavor has 2" in short.problems[0]


def test_pinning_without_admin_is_an_explicit_warning():
    topo = {"nodes": [{"memory_mb": 256, "siblings": [], "vcpu_set": [0]}], "pagesize_kb": None}
    v = verify.pinning({"a": topo, "b": None}, {"a": 1, "b": 1}, {}, admin=False)
    assert v.problems == []
    assert "CPU pinning unverified: Nova shows the host CPUs only to admins" in v.warnings[0]
    assert "microversion 2.78) is not available; CPU pinning unverified" in v.warnings[1]


def test_distinct_host_pairs_keeps_pairs_across_host_ids():
    vms = [("v1", "h1"), ("v2", "h1"), ("v3", "h2"), ("v4", "h1")]
    pairs = verify.distinct_host_pairs(vms, 2)
    assert pairs == [("v1", "v3")]          # only one VM on h2: one cross pair
    assert verify.distinct_host_pairs([("a", "h1"), ("b", "h2"), ("c", "h3"), ("d", "h1")], 2) == \
        [("a", "b"), ("d", "c")]


# -- stack lifecycle with a fake Heat -------------------------------------------------------

class FakeHeat:
    """Heat's stack API as the backend uses it: find, delete, resources."""

    def __init__(self, *stacks, delete_polls=2):
        self.stacks = {s.id: s for s in stacks}
        self.deleted, self.delete_polls = [], delete_polls

    def find_stack(self, ref, ignore_missing=True):
        for s in self.stacks.values():
            if ref in (s.id, s.name):
                if s.status == "DELETE_IN_PROGRESS":
                    s.polls += 1
                    if s.polls >= self.delete_polls:
                        del self.stacks[s.id]
                        return None
                return s
        if not ignore_missing:
            raise LookupError(ref)
        return None

    def delete_stack(self, stack):
        self.deleted.append(stack.name)
        stack.status = "DELETE_IN_PROGRESS"

    def resources(self, stack, nested_depth=0):
        return stack.resources


def _stack(name, tags, status="CREATE_COMPLETE", resources=()):
    return SimpleNamespace(id=f"id-{name}", name=name, tags=tags, status=status, polls=0,
                           status_reason="", resources=list(resources), outputs=[])


def _conn(heat):
    return SimpleNamespace(orchestration=heat)


def _run(tmp_path, rid=RID):
    run = Run(rid, tmp_path)
    run.create(status="up", name="t", backend="openstack", testbed={})
    run.unlock()
    return run


def test_undo_deletes_the_runs_stack_and_waits(tmp_path):
    heat = FakeHeat(_stack(f"vnb-{RID}", ["vnetbench", f"run-{RID}"]))
    undo.undo_stack(_run(tmp_path), {"name": f"vnb-{RID}", "cloud": "c"}, conn=_conn(heat),
                    sleep=lambda s: None)
    assert heat.deleted == [f"vnb-{RID}"] and heat.stacks == {}


def test_undo_leaves_a_stack_without_the_runs_tag(tmp_path):
    heat = FakeHeat(_stack(f"vnb-{RID}", ["vnetbench", "run-ffffff"]))
    with pytest.raises(ValueError, match="not this run's; left alone"):
        undo.undo_stack(_run(tmp_path), {"name": f"vnb-{RID}", "cloud": "c"}, conn=_conn(heat))
    assert heat.deleted == []


def test_undo_of_a_stack_never_created_is_a_no_op(tmp_path):
    heat = FakeHeat()
    undo.undo_stack(_run(tmp_path), {"name": f"vnb-{RID}", "cloud": "c"}, conn=_conn(heat))
    assert heat.deleted == []


def test_delete_failed_and_timeout_say_what_to_do(tmp_path):
    failed = _stack("s", [f"run-{RID}"], status="DELETE_FAILED")
    with pytest.raises(RuntimeError, match="DELETE_FAILED.*vnetbench cleanup --backend openstack"):
        undo.wait_deleted(_conn(FakeHeat(failed)), failed.id, "s")
    stuck = FakeHeat(_stack("s", [f"run-{RID}"], status="DELETE_IN_PROGRESS"), delete_polls=10**9)
    ticks = itertools.count(0, 100)
    with pytest.raises(RuntimeError, match="still DELETE_IN_PROGRESS after 600 s"):
        undo.wait_deleted(_conn(stuck), "id-s", "s", sleep=lambda s: None, clock=lambda: next(ticks))


def test_cleanup_after_a_crash_deletes_that_stack_and_spares_a_decoy(tmp_path, monkeypatch):
    """A run killed mid-creation left only its journal: teardown (what 'vnetbench cleanup'
    runs) deletes its stack from it; another stack of the same cloud survives."""
    mine = _stack(f"vnb-{RID}", ["vnetbench", f"run-{RID}"], status="CREATE_IN_PROGRESS")
    decoy = _stack("vnb-decoy", ["vnetbench", "run-dec0de"])
    heat = FakeHeat(mine, decoy)
    monkeypatch.setattr(cloud, "connect", lambda name, path=None: _conn(heat))
    run = _run(tmp_path)
    run.record("stack", name=mine.name, cloud="c", clouds_yaml=None)
    assert teardown(run) == []
    assert heat.deleted == [mine.name] and list(heat.stacks) == [decoy.id]
    assert not run.dir.exists()


def test_create_failure_names_the_failed_resource():
    bad = _stack("s", [], status="CREATE_FAILED", resources=[
        SimpleNamespace(name="vm_a", resource_type="OS::Nova::Server", status="CREATE_FAILED",
                        status_reason="No valid host was found. "),
        SimpleNamespace(name="port_a", resource_type="OS::Neutron::Port", status="CREATE_COMPLETE",
                        status_reason="")])
    with pytest.raises(BuildError, match=r"CREATE_FAILED: vm_a \(OS::Nova::Server\): No valid host"):
        builder.wait_created(_conn(FakeHeat(bad)), "s", 60, sleep=lambda s: None)


def test_create_timeout_names_what_is_still_in_progress():
    slow = _stack("s", [], status="CREATE_IN_PROGRESS", resources=[
        SimpleNamespace(name="vm_b", resource_type="OS::Nova::Server", status="CREATE_IN_PROGRESS",
                        status_reason="")])
    ticks = itertools.count(0, 50)
    with pytest.raises(BuildError, match=r"not complete after 120 s \(still in progress: vm_b "
                                         r"\(OS::Nova::Server\)\); raise the timeout"):
        builder.wait_created(_conn(FakeHeat(slow)), "s", 120, sleep=lambda s: None,
                             clock=lambda: next(ticks))


class Forbidden(Exception):
    status_code = 403
    details = "Policy doesn't allow os_compute_api:os-flavor-manage:create\nmore"


def test_api_errors_are_one_line_naming_the_resource_and_the_fix():
    text = str(cloud.error(Forbidden(), "creating stack vnb-0a1b2c"))
    assert "\n" not in text and text.startswith("creating stack vnb-0a1b2c: HTTP 403: Policy")
    assert "needs an admin role" in text


# -- host-side CPU ------------------------------------------------------------------------------

def test_cpu_window_from_prometheus():
    seen = {}

    def fetch(url, promql, at):
        seen.update(url=url, promql=promql)
        return [{"metric": {"host": "cmp1"}, "value": [at, "5.0"]},
                {"metric": {"host": "cmp2"}, "value": [at, "2.5"]}]
    clock = itertools.count(1000, 10).__next__
    with promcpu.Window({"prometheus": "http://p:9090", "hosts": ["cmp1", "cmp2"]}, fetch, clock) as w:
        pass
    assert w.metrics() == {"cpu_pct": pytest.approx(75.0)}
    assert w.result["hosts"] == {"cmp1": 50.0, "cmp2": 25.0}
    assert 'host=~"cmp1|cmp2"' in seen["promql"] and "[10s]" in seen["promql"]


def test_cpu_window_is_a_clear_na_without_prometheus_or_host_names():
    with promcpu.Window({"prometheus": "", "hosts": ["c"]}) as w:
        pass
    assert w.metrics() == {} and "no Prometheus URL" in w.result["reason"]
    with promcpu.Window({"prometheus": "http://p", "hosts": []}) as w:
        pass
    assert "not admin" in w.result["reason"]

    def down(url, promql, at):
        raise OSError("connection refused")
    with promcpu.Window({"prometheus": "http://p", "hosts": ["c"]}, down) as w:
        pass
    assert w.metrics() == {} and "connection refused" in w.result["reason"]


# -- CLI ----------------------------------------------------------------------------------------

EXAMPLE = rally_context.__file__.rsplit("/src/", 1)[0] + "/examples/ovs-flat.yaml"


def test_up_without_cloud_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from vnetbench import cli
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(tmp_path))
    assert cli.main(["testbed", "up", "--backend", "openstack", EXAMPLE]) == 2
    err = capsys.readouterr().err.strip()
    assert "--cloud NAME" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []           # nothing half-built


def test_up_with_an_unknown_cloud_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from vnetbench import cli
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text("clouds:\n  other: {auth: {auth_url: 'http://198.18.0.1:5000/v3'}}\n")
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(tmp_path / "state"))
    assert cli.main(["testbed", "up", "--backend", "openstack", "--cloud", "nope", EXAMPLE]) == 2
    err = capsys.readouterr().err.strip()
    assert "cloud 'nope': not usable from" in err and "\n" not in err
    assert not (tmp_path / "state").exists()


def test_cleanup_backend_filter_touches_only_that_backends_runs(tmp_path, monkeypatch, capsys):
    from vnetbench import cli
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(tmp_path))
    keep = Run("aaaaaa", tmp_path)
    keep.create(status="up", name="n", backend="netns", testbed={})
    keep.unlock()
    gone = _run(tmp_path, "bbbbbb")
    assert cli.main(["cleanup", "--backend", "openstack"]) == 0
    assert keep.dir.exists() and not gone.dir.exists()
    assert "run bbbbbb: removed" in capsys.readouterr().out


# -- the whole bring-up with a fake cloud ----------------------------------------------------------

class FakeCloud:
    """Just enough of an openstacksdk Connection for builder.up: Heat (stacks from
    create_stack), Nova (servers, topology), Neutron (port, subnet, network), Keystone."""

    def __init__(self, state_dir, admin=True, hosts=("cmp1", "cmp1"), pins=((2,), (3,))):
        self.state_dir, self.hosts, self.pins = state_dir, hosts, pins
        self.heat = FakeHeat(delete_polls=1)
        self.orchestration = self.heat
        roles = ["admin", "member"] if admin else ["member"]
        self.session = SimpleNamespace(auth=SimpleNamespace(
            get_access=lambda s: SimpleNamespace(role_names=roles)))
        self.compute = SimpleNamespace(get_server=self._server, get=self._topology)
        self.network = SimpleNamespace(
            get_port=lambda p: SimpleNamespace(fixed_ips=[{"subnet_id": "sub"}], network_id="net"),
            get_subnet=lambda s: SimpleNamespace(cidr="198.19.250.0/24"),
            get_network=lambda n: SimpleNamespace(mtu=1500))
        self.created = None

    def create_stack(self, name, tags, template_file, environment_files, **params):
        journal = "".join(p.read_text() for p in self.state_dir.glob("*/journal.jsonl"))
        assert f'"name": "{name}"' in journal, "stack created before it was journaled"
        assert isinstance(tags, str), "Heat's create API takes tags comma-separated"
        self.created = dict(params, template_file=template_file, environment_files=environment_files)
        stack = _stack(name, tags.split(","))
        stack.outputs = [{"output_key": "pairs", "output_value": [
            {"placement": "same-host",
             "a": {"server": "s-a", "name": "a", "port": "p-a", "ip": "198.19.250.10",
                   "mac": params["macs"]["same_host"]["a"][0]},
             "b": {"server": "s-b", "name": "b", "port": "p-b", "ip": "198.19.250.11",
                   "mac": params["macs"]["same_host"]["b"][0]}}]}]
        self.heat.stacks[stack.id] = stack

    def _server(self, sid):
        i = "ab".index(sid[-1])
        return SimpleNamespace(id=sid, compute_host=self.hosts[i], host_id=f"h-{self.hosts[i]}")

    def _topology(self, url, microversion, raise_exc):
        i = "ab".index(url.split("/")[2][-1])
        pins = {str(k): c for k, c in enumerate(self.pins[i])}
        body = {"nodes": [{"cpu_pinning": pins, "host_node": 0, "vcpu_set": list(range(len(pins)))}]}
        return SimpleNamespace(status_code=200, json=lambda: body, text="")

    def close(self):
        pass


@pytest.fixture
def fake_cloud(tmp_path, monkeypatch):
    import subprocess as sp
    monkeypatch.setenv("VNETBENCH_STATE_DIR", str(tmp_path))
    fake = FakeCloud(tmp_path)
    monkeypatch.setattr(cloud, "connect", lambda name, path=None: fake)
    masters = []

    def master(ssh, deadline, conn, got):        # a stand-in SSH master the run owns
        masters.append(sp.Popen(["sleep", "60"]))
        return masters[-1]
    monkeypatch.setattr(builder, "_open", master)
    yield fake
    for p in masters:
        p.kill()
        p.wait()


def test_bring_up_journals_then_creates_verifies_and_tears_down(fake_cloud, tmp_path):
    tb = _tb(["same-host"], network="flat")
    dep = builder.up(tb, cloud_name="c", network="vnetbench-flat")
    assert fake_cloud.created["network_mode"] == "existing"
    assert fake_cloud.created["environment_files"][0].endswith("env/ml2-ovs.yaml")
    meta = dep.run.meta()
    assert meta["status"] == "up" and meta["stack"] == f"vnb-{dep.run_id}"
    assert meta["placement"]["hosts"] == {"same-a": "cmp1", "same-b": "cmp1"}
    assert meta["pinning"] == {"same-a": {"0": 2}, "same-b": {"0": 3}} and meta["warnings"] == []
    assert dep.ip("same-b") == "198.19.250.11" and dep.testbed.vnets[0].cidr.prefixlen == 24
    assert dep.cpu_source == {"prometheus": "", "hosts": ["cmp1"]}
    assert dep.down() == []
    assert fake_cloud.heat.deleted == [f"vnb-{dep.run_id}"] and not dep.run.dir.exists()


def test_a_placement_that_does_not_hold_unwinds_the_stack(fake_cloud):
    fake_cloud.hosts = ("cmp1", "cmp2")
    with pytest.raises(BuildError, match="same-host, but same-a is on cmp1 and same-b on cmp2"):
        builder.up(_tb(["same-host"], network="flat"), cloud_name="c", network="n")
    assert len(fake_cloud.heat.deleted) == 1 and fake_cloud.heat.stacks == {}


def test_best_effort_drops_a_misplaced_pair_but_not_every_pair(fake_cloud):
    """drop_misplaced (the scale family's best_effort): a pair Nova placed wrong is left
    out; when every pair is, nothing is left to measure and the build fails, unwound."""
    fake_cloud.hosts = ("cmp1", "cmp2")
    with pytest.raises(BuildError, match="every pair landed where its placement says it must not: "
                                         "pair same: same-host, but same-a is on cmp1"):
        builder.up(_tb(["same-host"], network="flat"), cloud_name="c", network="n", drop_misplaced=True)
    assert fake_cloud.heat.stacks == {}


def test_misplaced_pairs_are_named_and_left_out_of_the_testbed():
    servers = _servers(**{"same-a": "c1", "same-b": "c2", "cross-a": "c1", "cross-b": "c2"})
    v = verify.placement([("same", "same-host", "same-a", "same-b"),
                          ("cross", "cross-host", "cross-a", "cross-b")], servers, admin=True)
    assert list(v.misplaced) == ["same"] and v.problems == [v.misplaced["same"]]
    tb = st.without_pairs(_tb(), v.misplaced)
    assert [p.name for p in tb.pairs] == ["cross"] and [vm.name for vm in tb.vms] == ["cross-a", "cross-b"]


def test_shared_dedicated_cpus_unwind_the_stack(fake_cloud):
    fake_cloud.pins = ((2,), (2,))
    with pytest.raises(BuildError, match="host CPU 2 of cmp1 is also same-a's"):
        builder.up(_tb(["same-host"], network="flat"), cloud_name="c", network="n")
    assert fake_cloud.heat.stacks == {}


class HeatBadRequest(Exception):
    status_code = 400
    details = "Bad Request"
    response = SimpleNamespace(json=lambda: {
        "code": 400, "title": "Bad Request", "explanation": "The server could not comply",
        "error": {"type": "StackValidationFailed", "traceback": None,
                  "message": "Property error: resources.vm_a.properties.flavor: Error validating "
                             "value 'nope': The Flavor ID (nope) could not be found."}})


def test_api_errors_carry_the_services_own_message():
    text = str(cloud.error(HeatBadRequest(), "creating stack vnb-0a1b2c"))
    assert text.startswith("creating stack vnb-0a1b2c: HTTP 400: StackValidationFailed: Property "
                           "error: resources.vm_a.properties.flavor")
    assert "\n" not in text


def test_a_delete_failed_is_deleted_again_and_reported_after_the_last_attempt(tmp_path):
    """Heat's DELETE_FAILED after a delete raced the creation: delete again (bounded)."""
    class Flaky(FakeHeat):
        def __init__(self, stack, fails):
            super().__init__(stack)
            self.fails = fails

        def delete_stack(self, stack):
            super().delete_stack(stack)
            if len(self.deleted) <= self.fails:
                stack.status = "DELETE_FAILED"
    for fails, ok in ((2, True), (3, False)):
        heat = Flaky(_stack(f"vnb-{RID}", ["vnetbench", f"run-{RID}"]), fails)
        call = lambda: undo.undo_stack(_run(tmp_path / str(fails)), {"name": f"vnb-{RID}", "cloud": "c"},
                                       conn=_conn(heat), sleep=lambda s: None)
        if ok:
            call()
            assert heat.stacks == {}
        else:
            with pytest.raises(RuntimeError, match="DELETE_FAILED"):
                call()
        assert len(heat.deleted) == fails + ok


# -- VMs in no pair (the functional suite's testbeds) ----------------------------------------

ISOLATION = """
vswitch: ovs
network: {type: vxlan}
vnets:
  - {name: red, cidr: 198.19.1.0/24}
  - {name: blue, cidr: 198.19.1.0/24}
vms:
  - {name: red-1, host: h1, vnets: [red]}
  - {name: red-2, host: h2, vnets: [{name: red, qos: {max_kbps: 10000, direction: egress}}]}
  - {name: blue-1, host: h1, vnets: [blue]}
  - {name: blue-2, host: h2, vnets: [blue]}
"""


def _iso(text=ISOLATION):
    return loads(text, source="<iso>", online_cpus=[0, 1])


def test_vms_in_no_pair_are_laid_out_one_by_one_with_the_testbeds_addresses():
    tb = _iso()
    p = st.parameters(tb, RID, _opts(), True, "k")
    assert (p["vm_count"], p["host_count"], p["same_host_pairs"]) == (4, 2, 0)
    lay = {e["name"]: e for e in p["vm_layout"]}
    assert [lay[n]["vnet"] for n in ("red-1", "red-2", "blue-1", "blue-2")] == ["a", "a", "b", "b"]
    assert [lay[n]["host"] for n in ("red-1", "red-2", "blue-1", "blue-2")] == [0, 1, 0, 1]
    # the same addresses in both vnets (isolation), MACs unique per VM
    assert lay["red-1"]["ip"] == lay["blue-1"]["ip"] == str(tb.vm("red-1").nics[0].ip)
    assert len({e["mac"] for e in p["vm_layout"]}) == 4
    assert [e["qos"] for e in p["vm_layout"]] == [False, True, False, False]
    assert p["qos_max_kbps"] == 10000 and p["qos_direction"] == "egress"
    assert all(e["zone_host"] == "" for e in p["vm_layout"]) and "cidr_b" not in p


def test_vm_layout_on_named_hosts_an_existing_network_and_two_cidrs():
    tb = _iso(ISOLATION.replace("{name: blue, cidr: 198.19.1.0/24}", "{name: blue, cidr: 198.19.2.0/24}"))
    p = st.parameters(tb, RID, _opts(host_a="c1", host_b="c2", zone="az"), True, "k")
    assert [e["zone_host"] for e in p["vm_layout"]] == ["az:c1", "az:c2", "az:c1", "az:c2"]
    assert p["cidr_b"] == "198.19.2.0/24"
    one = _iso(ISOLATION.replace("  - {name: blue-1, host: h1, vnets: [blue]}\n", "")
               .replace("  - {name: blue-2, host: h2, vnets: [blue]}\n", "")
               .replace("  - {name: blue, cidr: 198.19.1.0/24}\n", ""))
    p = st.parameters(one, RID, _opts(network="shared"), True, "k")
    assert all(e["ip"] == "" for e in p["vm_layout"])          # Neutron's addresses there


def test_vm_layout_refuses_what_the_template_cannot_build():
    three = _iso(ISOLATION.replace("vnets:\n", "hosts: [{name: h1}, {name: h2}, {name: h3}]\nvnets:\n", 1)
                 .replace("{name: blue-2, host: h2", "{name: blue-2, host: h3"))
    with pytest.raises(VnetbenchError, match=r"^<iso>: its VMs are on 3 hosts \(h1, h2, h3\); "
                                             r"compute_hosts names 2: name one per testbed host$"):
        st.parameters(three, RID, _opts(host_a="c1", host_b="c2"), True, "k")
    st.parameters(three, RID, _opts(), True, "k")            # the scheduler places 3 groups
    two_nics = _iso(ISOLATION.replace("{name: blue-2, host: h2, vnets: [blue]}",
                                      "{name: blue-2, host: h2, vnets: [blue, red]}"))
    with pytest.raises(VnetbenchError, match="VM 'blue-2' has 2 NICs; the openstack backend "
                                             "builds VMs with one port"):
        st.parameters(two_nics, RID, _opts(), True, "k")


def test_vm_outputs_map_by_name_and_each_vnet_keeps_its_cidr():
    tb, opts = _iso(), _opts()
    out = [{"name": v.name, "server": f"s-{v.name}", "port": f"p-{v.name}",
            "ip": str(v.nics[0].ip), "mac": f"fa:00:00:00:00:0{i}"} for i, v in enumerate(tb.vms)]
    vms = st.vm_outputs(tb, opts, [], out)
    assert vms["blue-2"]["server"] == "s-blue-2"
    real = st.realised(tb, vms, {"red": "198.19.1.0/24", "blue": "198.19.3.0/24"}, 1450)
    assert [str(v.cidr) for v in real.vnets] == ["198.19.1.0/24", "198.19.3.0/24"]
    with pytest.raises(VnetbenchError, match=r"stack output 'vms' names \['red-1', 'red-2', "
                                             r"'blue-2', 'blue-1'\]"):
        st.vm_outputs(tb, opts, [], [out[0], out[1], out[3], out[2]])


def test_host_groups_each_testbed_host_on_one_node():
    vms = [("red-1", "h1"), ("red-2", "h2"), ("blue-1", "h1"), ("blue-2", "h2")]
    ok = verify.host_groups(vms, _servers(**{"red-1": "c1", "blue-1": "c1", "red-2": "c2",
                                             "blue-2": "c2"}), True, [])
    assert ok.problems == ok.warnings == [] and ok.facts["testbed_hosts"] == {"h1": ["c1"], "h2": ["c2"]}
    split = verify.host_groups(vms, _servers(**{"red-1": "c1", "blue-1": "c3", "red-2": "c2",
                                                "blue-2": "c2"}), True, [])
    assert split.problems == ["testbed host h1: its VMs are on 2 compute nodes (c1, c3); server "
                              "group affinity not enforced (check the scheduler's "
                              "ServerGroupAffinityFilter)"]
    one = _servers(**{v: "aio" for v, _ in vms})
    shared = verify.host_groups(vms, one, True, [])
    assert shared.problems == [] and shared.warnings[0].startswith(
        "testbed hosts h1, h2 are one compute node (aio): traffic between them does not cross hosts")
    asked = verify.host_groups(vms, one, True, ["aio", "c2"])
    assert "h2: its VMs are on aio, not on c2 as asked" in asked.problems[0]
    assert asked.problems[-1].endswith("although distinct hosts were asked for")
    assert verify.host_groups(vms, one, True, ["aio", "aio"]).problems == []
    by_id = verify.host_groups(vms, _servers(**{"red-1": "c1", "blue-1": "c1", "red-2": "c2",
                                                "blue-2": "c2"}), False, [])
    assert by_id.facts["testbed_hosts"] == {"h1": ["id-c1"], "h2": ["id-c2"]}


def test_unpinned_guests_are_asked_for_and_said():
    """--unpinned: a shared-CPU flavor (the functional testbeds' 6 guests on a cloud with
    2 dedicated CPUs), nothing verified, and a warning in the run."""
    assert st.parameters(_iso(), RID, _opts(), True, "k")["cpu_policy"] == "dedicated"
    assert st.parameters(_iso(), RID, _opts(pinned=False), True, "k")["cpu_policy"] == "shared"
    v = verify.unpinned()
    assert v.problems == [] and v.facts == {"pinning": "off (--unpinned)"}
    assert v.warnings[0].startswith("CPU pinning off (--unpinned)")


class FakeNeutron:
    def __init__(self, ports: dict):
        self.ports, self.calls = ports, []                  # port id -> network id

    def get_port(self, pid):
        return SimpleNamespace(id=pid, network_id=self.ports[pid])

    def delete_port(self, port, ignore_missing):
        self.calls.append(("port", port.id))

    def subnets(self, network_id):
        return [SimpleNamespace(id=f"sub-{network_id}")]

    def delete_subnet(self, subnet, ignore_missing):
        self.calls.append(("subnet", subnet.id))

    def delete_network(self, network, ignore_missing):
        self.calls.append(("network", network))


def test_deprovisioning_deletes_the_vnets_ports_then_its_network(tmp_path, monkeypatch):
    """remove_vnet as a tenant deprovisions: the vnet's ports first (Neutron refuses to
    delete a network with ports), then its subnet and network; the other vnet is left;
    journaled before anything is deleted, and the run says which vnet went."""
    from vnetbench.testbed.codec import to_dict
    from vnetbench.testbed.openstack.deployment import OpenstackDeployment
    tb = _iso()
    run = Run(RID, tmp_path)
    run.create(status="up", name="t", backend="openstack", testbed=to_dict(tb), cloud="c",
               options={}, ports={"red-1": "p-r1", "red-2": "p-r2", "blue-1": "p-b1", "blue-2": "p-b2"})
    run.unlock()
    neutron = FakeNeutron({"p-r1": "n-red", "p-r2": "n-red", "p-b1": "n-blue", "p-b2": "n-blue"})
    monkeypatch.setattr(cloud, "connect", lambda name, path=None: SimpleNamespace(
        network=neutron, close=lambda: None))
    dep = OpenstackDeployment(run, tb)
    dep.remove_vnet("blue")
    assert neutron.calls == [("port", "p-b1"), ("port", "p-b2"), ("subnet", "sub-n-blue"),
                             ("network", "n-blue")]
    assert any(e.get("kind") == "deprovision" and e.get("vnet") == "blue" for e in run.entries())
    assert dep.status()["removed_vnets"] == ["blue"]
    with pytest.raises(KeyError, match="no vnet named 'green'"):
        dep.remove_vnet("green")


@pytest.mark.parametrize("accommodation, dropped", [
    (["pair", "double_room"], False), (["pair", "double_room", "best_effort"], True),
    ({"room": "single_room", "best_effort": True}, True)])
def test_the_scale_contexts_best_effort_lets_the_cloud_drop_misplaced_pairs(accommodation, dropped):
    from vnetbench.rally_plugins.context import _backend_options
    opts = _backend_options({"backend": "openstack", "cloud": "c", "unpinned": True,
                             "scale": {"accommodation": accommodation, "hosts": 1, "density": 2}})
    assert opts.get("drop_misplaced", False) is dropped and opts["pinned"] is False
    st.Options(**{k.replace("cloud_name", "cloud"): v for k, v in opts.items()})   # every key is an option


def _scale_tb(hosts, room="single_room", density=2):
    import yaml

    from vnetbench.scale import plan
    acc = plan.accommodation(["pair", room], hosts=hosts, density=density)
    return loads(yaml.safe_dump(plan.testbed(acc, "ovs", "vxlan", [0, 1], name="scale")),
                 source="<scale>", online_cpus=[0, 1])


def test_a_scale_testbed_over_more_than_two_hosts_is_built_vm_by_vm_each_on_its_host():
    """The template's pair groups put every A side on one compute host and every B side on
    another: a testbed over 4 hosts goes through VNB::Vm instead, each VM in its testbed
    host's server group and, as admin with compute_hosts, on that host (zone:host)."""
    tb = _scale_tb(4)
    opts = _opts(compute_hosts=("c1", "c2", "c3", "c4"))
    params = st.parameters(tb, RID, opts, admin=True, public_key="k")
    assert params["same_host_pairs"] == params["cross_host_pairs"] == 0
    assert params["vm_count"] == len(tb.vms) and params["host_count"] == 4
    by_vm = {e["name"]: e for e in params["vm_layout"]}
    for vm in tb.vms:
        h = [x.name for x in tb.hosts].index(vm.host)
        assert by_vm[vm.name]["zone_host"] == f"nova:c{h + 1}" and by_vm[vm.name]["host"] == h
    outs = [{"name": v.name, "server": f"s-{v.name}", "port": "p", "ip": str(v.nics[0].ip),
             "mac": v.nics[0].mac} for v in st.unpaired(tb)]
    assert set(st.vm_outputs(tb, opts, [], outs)) == {v.name for v in tb.vms}
    with pytest.raises(VnetbenchError, match="compute_hosts names 2: name one per testbed host"):
        st.parameters(tb, RID, _opts(compute_hosts=("c1", "c2")), admin=True, public_key="k")


def test_a_scale_testbed_over_two_hosts_keeps_the_template_pairs():
    tb = _scale_tb(2)
    params = st.parameters(tb, RID, _opts(), admin=True, public_key="k")
    assert params["cross_host_pairs"] == len(tb.pairs) and params["vm_count"] == 0


class RoutedCloud(FakeCloud):
    """FakeCloud whose stack is a routed testbed's (the floating-ip path: one VM, its vnet
    routed to a second vnet without VMs, a floating IP on the external network)."""

    def __init__(self, state_dir):
        super().__init__(state_dir, hosts=("cmp1",), pins=((2,),))
        nets = {"net-a": ("sub-a", "198.19.1.0/24"), "net-b": ("sub-b", "198.19.2.0/24"),
                "public": ("sub-pub", "198.18.250.0/24")}
        subnets = {s: c for s, c in nets.values()}
        self.network = SimpleNamespace(
            get_port=lambda p: SimpleNamespace(fixed_ips=[{"subnet_id": "sub-a"}], network_id="net-a"),
            get_subnet=lambda s: SimpleNamespace(cidr=subnets[s]),
            get_network=lambda n: SimpleNamespace(mtu=1450, subnet_ids=[nets[n][0]]),
            find_network=lambda n, ignore_missing: SimpleNamespace(id=n),
            subnets=lambda network_id, ip_version: iter([SimpleNamespace(
                cidr=nets[network_id][1], gateway_ip="198.18.250.1")]))

    def create_stack(self, name, tags, template_file, environment_files, **params):
        self.created = dict(params)
        stack = _stack(name, tags.split(","))
        (entry,) = params["vm_layout"]
        stack.outputs = [
            {"output_key": "pairs", "output_value": []},
            {"output_key": "vms", "output_value": [
                {"name": entry["name"], "server": "s-a", "port": "p-a", "ip": "198.19.1.1",
                 "mac": entry["mac"], "mgmt_ip": "198.19.250.20", "floating_ip": "198.18.250.23"}]},
            {"output_key": "networks", "output_value": {"a": "net-a", "b": "net-b"}},
            {"output_key": "router", "output_value": {"id": "r-1", "gateway_ip": "198.18.250.17"}}]
        self.heat.stacks[stack.id] = stack


def test_a_routed_testbed_takes_the_clouds_north_south_addresses(fake_cloud, monkeypatch, tmp_path):
    """The floating-ip path on a cloud: the router's gateway, the floating IP, the external
    subnet and the outside host's address are the cloud's; the vnet without VMs takes its
    CIDR from its network; the pair with the outside host is not placement-checked."""
    from vnetbench.rally_plugins.context import testbed_yaml
    from vnetbench.testbed.loader import loads
    routed = RoutedCloud(tmp_path)
    monkeypatch.setattr(cloud, "connect", lambda name, path=None: routed)
    monkeypatch.setattr(builder, "outside_address", lambda outside, cidr: "198.18.250.1")
    tb = loads(testbed_yaml("ovs", "vxlan", None, ["same-host"], path="floating-ip"), source="<fip>",
               online_cpus=[0, 1])
    dep = builder.up(tb, cloud_name="c", mgmt_network="flat", external_network="public",
                     outside="netns:out")
    assert routed.created["external_network"] == "public" and routed.created["router_ip_a"]
    (pair,) = dep.testbed.pairs
    outside, vm = pair.vms
    assert dep.reach(outside, vm) == "198.18.250.23" and dep.ip(outside) == "198.18.250.1"
    assert str(dep.testbed.routers[0].gateway) == "198.18.250.17"
    assert [str(v.cidr) for v in dep.testbed.vnets] == ["198.19.1.0/24", "198.19.2.0/24"]
    assert dep.run.meta()["router"] == "r-1"
    assert dep.vm_argv(outside, ["ping", "x"])[:4] == ["ip", "netns", "exec", "out"]
    assert dep.down() == []
