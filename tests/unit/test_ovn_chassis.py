"""Light OVN chassis without a system: the testbed's ``chassis:`` block (expansion, its
refusals in one line, exit 2), the SB's Encap listing parsed from a recorded output,
and the per-daemon CPU breakdown of a window."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from vnetbench import cli, cpu
from vnetbench.errors import TestbedFileError as FileError
from vnetbench.kinds import ovs
from vnetbench.kinds.ovn import chassis
from vnetbench.testbed import codec
from vnetbench.testbed.loader import loads

DATA = Path(__file__).resolve().parents[1] / "data/portready"
BASE = "vswitch: ovn\nnetwork: {type: geneve}\n"


def tb(extra: str, kind_text: str = BASE):
    return loads(kind_text + extra, source="t.yaml", online_cpus=[0, 1])


def error(extra: str, kind_text: str = BASE) -> str:
    with pytest.raises(FileError) as exc:
        tb(extra, kind_text)
    return str(exc.value)


def test_chassis_block_adds_light_hosts_after_the_declared_ones():
    t = tb("chassis: {count: 3}\n")
    assert [(h.name, h.light) for h in t.hosts] == [
        ("h1", False), ("h2", False), ("ch1", True), ("ch2", True), ("ch3", True)]
    assert [str(h.underlay_ip) for h in t.hosts][2:] == ["198.18.0.3", "198.18.0.4", "198.18.0.5"]
    assert {h.cpus for h in t.hosts if h.light} == {(0, 1)}        # they share every CPU
    assert all(vm.host in ("h1", "h2") for vm in t.vms)
    assert codec.from_dict(codec.to_dict(t)).hosts == t.hosts        # a run's meta keeps it


def test_chassis_cpus_are_checked_against_the_online_set():
    assert {h.cpus for h in tb("chassis: {count: 2, cpus: [1]}\n").hosts if h.light} == {(1,)}
    assert error("chassis: {count: 2, cpus: [7]}\n").startswith(
        "t.yaml: chassis.cpus: CPU 7 is not online")


@pytest.mark.parametrize("extra, where", [
    ("chassis: {count: 0}\n", "chassis.count: 0 is less than the minimum of 1"),
    ("chassis: {count: 101}\n", "chassis.count: 101 is greater than the maximum of 100"),
    ("chassis: {count: many}\n", "chassis.count: 'many' is not of type integer"),
    ("chassis: {}\n", "chassis: 'count' is a required property"),
    ("chassis: {count: 2, mode: heavy}\n", "chassis: unknown field 'mode'"),
    ("chassis: {count: 2}\nvms: [{name: a, host: ch2}]\n",
     "vms[0].host: host 'ch2' is a light chassis: it holds no VM"),
    ("hosts: [{name: h1}, {name: ch1}]\nchassis: {count: 2}\n", "chassis: duplicate name 'ch1'"),
])
def test_bad_chassis_blocks_are_named(extra, where):
    assert error(extra).startswith(f"t.yaml: {where}")


def test_the_underlay_must_have_room_for_the_chassis():
    text = "vswitch: ovn\nnetwork: {type: geneve, underlay_cidr: 198.18.0.0/29}\n"
    assert error("chassis: {count: 5}\n", text).startswith(
        "t.yaml: network.underlay_cidr: 198.18.0.0/29 has room for 6 hosts, 7 are declared")


def test_only_ovn_takes_chassis():
    assert error("chassis: {count: 2}\n", "vswitch: ovs\nnetwork: {type: vxlan}\n").startswith(
        "t.yaml: chassis: light chassis are not ovs's (only ovn takes them)")


def test_light_chassis_never_count_towards_afxdp():
    t = tb("chassis: {count: 40}\n")
    caps = SimpleNamespace(ovs_datapath="netdev", xdp_sockets=True)
    assert ovs.KIND.ports(t, caps) == "afxdp"          # 40 uplinks more, still AF_XDP for h1, h2


def _validate(text: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["testbed", "validate", f.name])
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=60, deadline=None, database=None)
@given(st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=12), st.booleans(), st.none()))
def test_any_chassis_count_validates_or_fails_in_one_line_naming_it(count):
    text = BASE + yaml.safe_dump({"chassis": {"count": count}})
    code, out, err = _validate(text)
    if isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= 100:
        assert code == 0 and err == "", err
    else:
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "chassis" in err and err.startswith("vnetbench: error: "), err


def test_encap_listing_names_every_chassis_with_its_tunnel_address():
    got = chassis.encaps((DATA / "ovn-sbctl-list-encap.json").read_text())
    assert got["6a45ab-h1"] == ("geneve", "198.18.0.1")
    assert sorted(got) == sorted(f"6a45ab-{h}" for h in ("h1", "h2", "ch1", "ch2", "ch3", "ch4"))
    assert chassis.encaps('{"data": [], "headings": ["chassis_name", "type", "ip"]}') == {}


def test_daemon_metrics_break_the_window_down_per_daemon():
    split = SimpleNamespace(seconds=2.0, components={
        ("controller", "ovn-northd", "main"): 0.2,
        ("controller", "ovsdb-server-sb", "main"): 0.1,
        ("vswitch", "ovn-controller", "main"): 0.3,
        ("softirq_in_vswitch", "ovn-controller", "main"): 0.1,
        ("softirq_other", "ksoftirqd", "all"): 1.0,
        ("hardirq", "other", "all"): 1.0})
    assert cpu.daemon_metrics(split) == pytest.approx({
        "cpu_ovn_northd_pct": 10.0, "cpu_ovsdb_server_sb_pct": 5.0, "cpu_ovn_controller_pct": 20.0})
