"""The functional matrix on a configured deployment (libvirt guests, an OpenStack cloud):
the backend options, the column names, and rows a backend cannot measure becoming N/A
cells with its reason -- never a crash, never a silent gap."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from vnetbench.errors import PrerequisiteError, UnsupportedError, VnetbenchError
from vnetbench.faults import Faults
from vnetbench.functional import plugin
from vnetbench.functional.matrix import Matrix
from vnetbench.functional.verdict import Status, Verdict
from vnetbench.testbed import options


def ns(**kw):
    base = {options.dest(f): k.get("default") for f, k in options.ARGUMENTS}
    return SimpleNamespace(**{**base, **kw})


def test_libvirt_options_need_a_built_image(tmp_path):
    with pytest.raises(PrerequisiteError, match=f"{tmp_path}: no vmlinuz"):
        options.build_options(ns(backend="libvirt", image=str(tmp_path)))
    (tmp_path / "vmlinuz").write_text("k")
    (tmp_path / "initrd.img").write_text("i")
    got = options.build_options(ns(backend="libvirt", image=str(tmp_path),
                                   libvirt_uri=["h2=qemu+ssh://root@b/system"]))
    assert got == {"image_dir": tmp_path, "memory_mib": 256,
                   "uris": {"h2": "qemu+ssh://root@b/system"}}


def test_openstack_options_need_a_cloud():
    with pytest.raises(VnetbenchError, match="functional --backend openstack: name the cloud"):
        options.build_options(ns(backend="openstack"), command="functional")
    got = options.build_options(ns(backend="openstack", cloud="aio", gateway="root@gw"))
    assert got["cloud_name"] == "aio" and got["image"] == "vnetbench-guest"
    assert got["gateway"] == "root@gw"


def test_forward_hands_only_what_the_user_set_to_pytest():
    got = options.forward(ns(backend="libvirt", image="/img", memory=512,
                             libvirt_uri=["h1=qemu:///system", "h2=qemu+ssh://x/system"]))
    assert got == ["--backend=libvirt", "--image=/img", "--memory=512",
                   "--libvirt-uri=h1=qemu:///system", "--libvirt-uri=h2=qemu+ssh://x/system"]
    assert options.forward(ns(backend="netns")) == []
    assert options.forward(ns(backend="netns", no_server_groups=False)) == []
    assert options.forward(ns(backend="openstack", cloud="c", no_server_groups=True)) == \
        ["--backend=openstack", "--cloud=c", "--no-server-groups"]


def test_column_names_the_backend_and_survives_json():
    m = Matrix(expect={}, backend="libvirt")
    m.add("ovs", "vxlan", "rate.compliance", Verdict(Status.PASS, 9.6, "Mbit/s", "ok"))
    m.add("ovs", "vxlan", "migration.live", plugin.na("libvirt: no VM migration: why"))
    md = m.markdown()
    assert "| Category | Test | libvirt ovs/vxlan |" in md
    assert "[1] libvirt ovs/vxlan, Live: ping continues" in md and "no VM migration: why" in md
    back = Matrix.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.backend == "libvirt" and "<th>libvirt ovs/vxlan</th>" in back.html()
    assert Matrix.from_dict({"cells": []}).backend == "netns"     # matrices from before


class Tb:
    name = "t"
    vswitch = SimpleNamespace(kind=SimpleNamespace(value="ovn"))
    network = SimpleNamespace(type=SimpleNamespace(value="geneve"))

    def vm(self, name):
        return SimpleNamespace(name=name, host="h1")


@pytest.mark.parametrize("backend, call, what", [
    ("libvirt", lambda f: f.migrate("red-1", "h2", live=True), "no VM migration"),
    ("libvirt", lambda f: f.migrate("red-1", "h2", live=False), "no VM migration"),
    ("openstack", lambda f: f.controller_stop(), "no controller-stop fault"),
    ("openstack", lambda f: f.vswitch_restart("h1"), "no vswitch-restart fault"),
])
def test_faults_a_backend_cannot_inject_are_refused_before_acting(backend, call, what):
    dep = SimpleNamespace(backend=backend, testbed=Tb(), run_id="r")
    with pytest.raises(UnsupportedError, match=f"^{backend}: {what}: "):
        call(Faults(dep))


def test_a_cloud_that_cannot_realise_the_testbed_is_not_built(monkeypatch):
    """openstack: the stack's shape refused (one line) -> the configuration's cells N/A;
    on an emulated-host backend the same error is a bug of the suite and propagates."""
    from vnetbench.testbed import deployment as backends
    from vnetbench.testbed.model import NetType, VSwitchKind

    def refuse(backend, tb, **opts):
        raise VnetbenchError("the openstack backend builds at most 2 vnets")
    monkeypatch.setattr(backends, "build", refuse)
    combo = (VSwitchKind.OVS, NetType.VXLAN)
    text = plugin.one_vnet(2)
    with pytest.raises(plugin.NotBuilt, match="openstack: the openstack backend builds at most"):
        with plugin.deployment(combo, None, text, "t", ("openstack", {})):
            pass
    caps = SimpleNamespace(root=True, why_not=lambda k, t: None)
    with pytest.raises(VnetbenchError) as exc:
        with plugin.deployment(combo, caps, text, "t", ("libvirt", {})):
            pass
    assert not isinstance(exc.value, plugin.NotBuilt)


STAND_IN = '''
import pytest
from vnetbench.errors import UnsupportedError
from vnetbench.functional.verdict import Status, Verdict

@pytest.mark.row("feature.bonding")
def test_host_side(combo, record):
    raise UnsupportedError("openstack: no host-side commands (the cloud's compute nodes are not vnetbench's)")

@pytest.fixture(scope="module")
def refused():
    raise UnsupportedError("openstack: no VM migration: the cloud's hypervisors are not vnetbench's")

@pytest.mark.row("migration.live")
def test_refused_in_setup(combo, record, refused):
    pass

@pytest.mark.row("rate.compliance")
def test_measured(combo, record, target):
    assert target[0] == "openstack" and target[1]["cloud_name"] == "c1"
    record(Verdict(Status.PASS, 9.7, "Mbit/s"))
'''


def _on_a_cloud(tmp_path, name: str, module: str):
    """Run MODULE as a functional test module with --backend openstack (cloud 'c1')."""
    (tmp_path / name).write_text(module)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "vnetbench.functional.plugin",
         str(tmp_path / name), "--vswitch=ovs", "--network=vxlan",
         "--backend=openstack", "--cloud=c1", f"--matrix-out={tmp_path / 'm'}",
         "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_unsupported_rows_become_na_cells_with_the_reason(tmp_path):
    done = _on_a_cloud(tmp_path, "test_standin.py", STAND_IN)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 passed, 2 skipped" in done.stdout
    d = json.loads((tmp_path / "m" / "matrix.json").read_text())
    assert d["backend"] == "openstack"
    cells = {c["row"]: c for c in d["cells"]}
    assert cells["feature.bonding"]["status"] == "N/A"
    assert cells["feature.bonding"]["detail"].startswith("openstack: no host-side commands")
    assert cells["rate.compliance"]["status"] == "Pass"
    assert cells["migration.live"]["status"] == "N/A"        # refused while setting up
    assert cells["migration.live"]["detail"].startswith("openstack: no VM migration")
    assert "| openstack ovs/vxlan |" in (tmp_path / "m" / "matrix.md").read_text()


CLOUD_MIGRATION = '''
import pytest
from vnetbench.errors import UnsupportedError
from vnetbench.functional.plugin import one_vnet
from vnetbench.testbed.loader import loads
from vnetbench.functional.tests.test_migration import (  # noqa: F401
    migratable, test_live_migration_ping_continues, test_migration_with_the_controller_down)


class Member:
    """A cloud testbed brought up without the admin role: what the Nova moves refuse."""
    backend, run_id = "openstack", "0a1b2c"

    def __init__(self, kind):
        self.testbed = loads(one_vnet(3).format(kind=kind, ntype="vxlan"), source="<stand-in>")

    def migration_target(self, vm, to_host):
        raise UnsupportedError(f"openstack: no VM migration of {vm}: cloud 'c1' was used without "
                               "the admin role")


@pytest.fixture(scope="module")
def dep(combo):
    return Member(combo[0].value)
'''


def test_the_migration_rows_on_a_cloud_run_there_or_say_why_not(tmp_path):
    """The migration module is no longer refused before a build on openstack: its rows
    ask the deployment (Nova, as admin), and what it refuses is an N/A cell with its
    reason; the controller row is N/A there: ML2/OVS has no controller, and another
    kind's is the cloud's own."""
    (tmp_path / "test_cloud_migration.py").write_text(CLOUD_MIGRATION)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "vnetbench.functional.plugin",
         str(tmp_path / "test_cloud_migration.py"), "--vswitch=ovs", "--vswitch=ovn", "--network=vxlan",
         "--backend=openstack", "--cloud=c1", f"--matrix-out={tmp_path / 'm'}", "-p", "no:cacheprovider"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    cells = {(c["vswitch"], c["row"]): c for c in json.loads((tmp_path / "m" / "matrix.json").read_text())["cells"]}
    assert {c["status"] for c in cells.values()} == {"N/A"} and len(cells) == 4
    assert cells["ovs", "migration.live"]["detail"] == ("openstack: no VM migration of red-2: cloud 'c1' "
                                                         "was used without the admin role")
    assert "(ovs) has no controller" in cells["ovs", "migration.controller-down"]["detail"]
    assert cells["ovn", "migration.controller-down"]["detail"] == (
        "openstack: no controller fault: the cloud's controllers and vSwitches are not vnetbench's")


def test_slow_guest_tolerances_still_separate_shaped_from_free_ports():
    """Guests: UDP at 2x the limit, a free port passes above 1.5x; a shaped one (10 Mbit/s
    with its burst) stays under that, and a sender too slow to load the limit is an
    Error of the suite, never a finding about the network."""
    from vnetbench.functional import verdict as v
    free = {"limit_mbps": 10.0, "factor": v.GUEST_UNAFFECTED_FACTOR, "offered_mbps": 20.0,
            "sent_mbps": 19.9, "mbps": 19.6}
    assert v.unaffected(free).status is Status.PASS
    shaped = {**free, "mbps": 12.7}           # 10 Mbit/s + the whole 8 Mbit bucket over 3 s
    assert v.unaffected(shaped).status is Status.FAIL
    slow = {**free, "sent_mbps": 13.0, "mbps": 13.0}
    got = v.unaffected(slow)
    assert got.status is Status.ERROR and "offered only 13.0 Mbit/s" in got.detail
    assert v.unaffected({"limit_mbps": 10.0, "mbps": 24.6}).status is Status.FAIL   # netns: 3x
    comp = {"limit_mbps": 10.0, "samples_mbps": [12, 10, 9.9, 10.1], "offered_mbps": 20.0}
    assert v.rate_compliance({**comp, "sent_mbps": 19.8}).status is Status.PASS
    assert v.rate_compliance({**comp, "sent_mbps": 10.5}).status is Status.ERROR


def test_openstack_builds_the_functional_testbeds_vm_by_vm():
    """The functional testbeds declare VMs, not pairs: on a cloud each becomes one VNB::Vm
    of the template, on its vnet and in its testbed host's server group."""
    from vnetbench.testbed.loader import loads
    from vnetbench.testbed.openstack import stack as st
    tb = loads(plugin.one_vnet(3).format(kind="ovs", ntype="vxlan"), source="<isolation ovs-vxlan>")
    p = st.parameters(tb, "0a1b2c", st.Options(cloud="c"), True, "k")
    assert (p["vm_count"], p["host_count"]) == (3, 2)
    assert [(e["name"], e["vnet"], e["host"]) for e in p["vm_layout"]] == \
        [("red-1", "a", 0), ("red-2", "a", 1), ("red-3", "a", 0)]


def test_the_cli_hands_its_defaults_to_pytest_unchanged(tmp_path):
    """`vnetbench functional` with no backend option collects the suite (no option of
    testbed up's leaks into pytest's arguments as a value it refuses)."""
    done = subprocess.run([sys.executable, "-m", "vnetbench", "functional", "--vswitch", "ovs",
                           "--network", "vxlan", "--out", str(tmp_path), "--", "--collect-only",
                           "-q", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test_isolation.py::test_same_ips_each_vnet_reaches_itself[ovs-vxlan]" in done.stdout


def test_a_stop_time_across_clocks_is_reported_as_its_bound():
    """Guest clocks mapped with ±393 ms: the deprovisioning figure is what that allows at
    most ("≤ 393 ms"), not an estimate that looks exact (0 ms)."""
    from vnetbench.functional import verdict as v
    t0 = 10_000_000_000
    m = {"t_start_ns": t0, "t_done_ns": t0 + 116_000_000, "clock_uncertainty_ms": 393.0,
         "sender": {"interval_ns": 5_000_000, "last_ns": t0 + 3_000_000_000},
         "probes": [[i, t0 - 1_000_000_000 + i * 5_000_000, 0] for i in range(199)],
         "new_ping": {"sent": 5, "received": 0}, "other_vnet_ping": {"sent": 5, "received": 5}}
    got = v.deprovision(m)
    assert got.status is Status.PASS and got.figure == "≤ 393 ms"
    assert got.extra["stop_ms"] == 0 and "±393 ms" in got.detail
    assert v.deprovision({**m, "clock_uncertainty_ms": 0}).figure == "0 ms"


REFUSED_MODULE = '''
import pytest
from vnetbench.functional.tests.test_faults import dep, faultable  # noqa: F401

@pytest.mark.row("fault.vswitch-restart")
def test_needs_faults(dep, record):
    raise AssertionError("never reached: the module's rows are refused before a build")
'''


def test_a_module_the_backend_refuses_is_na_before_any_build(tmp_path):
    """Fault and migration modules on a cloud: N/A cells with the fault API's reason,
    and no stack built for nothing (a build would need the cloud 'c1', which is not
    there, and would show as not built instead)."""
    done = _on_a_cloud(tmp_path, "test_refused.py", REFUSED_MODULE)
    assert done.returncode == 0, done.stdout[-2000:]
    cell, = json.loads((tmp_path / "m" / "matrix.json").read_text())["cells"]
    assert cell["status"] == "N/A" and cell["detail"] == (
        "openstack: no controller or vSwitch faults: the cloud's controllers and vSwitches are "
        "not vnetbench's")
