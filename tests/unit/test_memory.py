"""The control plane's resident memory over a window (vnetbench.memory, issue 48): the
/proc parsers on files recorded on this machine (tests/data/memory/), the daemons taken
from the run's pidfiles and named as the CPU split names them, and the per-daemon and
per-part figures (end, growth) on fake /proc trees."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vnetbench import memory

DATA = Path(__file__).resolve().parents[1] / "data" / "memory"


def test_rss_from_recorded_status_and_smaps_rollup_agree():
    status = (DATA / "ovsdb-server.status").read_text()
    rollup = (DATA / "ovsdb-server.smaps_rollup").read_text()
    assert memory.rss_kib(status) == memory.rss_kib(rollup) == 6464
    # not RssAnon / RssFile (parts of it), not VmHWM (the peak)
    assert "RssAnon:\t    1868 kB" in status and "VmHWM:" in status


def test_a_kernel_thread_or_a_gone_process_has_no_rss():
    assert memory.rss_kib((DATA / "kthreadd.status").read_text()) is None
    assert memory.rss_kib("") is None and memory.rss_kib(None) is None


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_rss_parser_never_raises(text):
    value = memory.rss_kib(text)
    assert value is None or (isinstance(value, int) and value >= 0)


# -- fake /proc trees and deployments -----------------------------------------------------

def write(proc: Path, pid: int, comm: str, kib: int | None, smaps: bool = True) -> None:
    """A process with its comm and RSS (in smaps_rollup, or only in status)."""
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "comm").write_text(comm + "\n")
    rss = "" if kib is None else f"VmRSS:\t{kib:8d} kB\n"
    (d / "status").write_text(f"Name:\t{comm}\nVmHWM:\t  999999 kB\n{rss}RssAnon:\t       1 kB\n")
    if smaps:
        (d / "smaps_rollup").write_text("" if kib is None else
                                        f"00400000-7ffe0000 ---p 00000000 00:00 0  [rollup]\n"
                                        f"Rss:            {kib} kB\nPss:            {kib // 2} kB\n")
    elif (d / "smaps_rollup").exists():
        (d / "smaps_rollup").unlink()


def ovn(proc: Path, grow: int = 0) -> None:
    """Two hosts and a light chassis (ovs-vswitchd, ovsdb-server, ovn-controller each) and
    the OVN central (NB, SB, northd); ``grow`` KiB more in every ovn-controller and the SB."""
    for base in (100, 200, 300):
        write(proc, base, "ovs-vswitchd", 40_960)
        write(proc, base + 1, "ovsdb-server", 5_120)
        write(proc, base + 2, "ovn-controller", 10_240 + grow)
    write(proc, 7, "ovsdb-server", 8_192)
    write(proc, 8, "ovsdb-server", 16_384 + grow)
    write(proc, 9, "ovn-northd", 12_288)
    write(proc, 500, "ovn-controller", 99_999)        # another run's: no pidfile of ours


def deployment(source=None):
    hosts = [SimpleNamespace(name=n, cpus=(0, 1)) for n in ("h1", "h2", "ch1")]
    pids = {"h1": 100, "h2": 200, "ch1": 300}
    dep = SimpleNamespace(
        vswitch_pids=lambda h: {"ovs-vswitchd": pids[h], "ovsdb-server": pids[h] + 1,
                                "ovn-controller": pids[h] + 2},
        controller_pids=lambda: {"ovsdb-server-nb": 7, "ovsdb-server-sb": 8, "ovn-northd": 9},
        testbed=SimpleNamespace(hosts=hosts))
    if source is not None:
        dep.cpu_source = source
    return dep


def test_daemons_come_from_the_pidfiles_and_are_named_as_the_cpu_split_names_them(tmp_path):
    ovn(tmp_path)
    found = memory.daemons(deployment(), tmp_path)
    assert 500 not in found                           # never found by name
    assert found[7] == ("controller", "ovsdb-server-nb") and found[8] == ("controller", "ovsdb-server-sb")
    assert found[9] == ("controller", "ovn-northd")
    assert found[102] == ("controller", "ovn-controller") and found[100] == ("vswitch", "ovs-vswitchd")
    assert found[101] == ("vswitch", "ovsdb-server")
    assert len(found) == 12


def test_window_reports_the_end_and_the_growth_per_daemon_and_per_part(tmp_path):
    ovn(tmp_path)
    with memory.Window(deployment(), tmp_path) as w:
        ovn(tmp_path, grow=2048)                      # 2 MiB more in each
    m = w.metrics()
    assert m["rss_ovn_controller_mib"] == pytest.approx(3 * 12.0)       # summed over the chassis
    assert m["rss_ovn_controller_growth_mib"] == pytest.approx(3 * 2.0)
    assert m["rss_ovsdb_server_sb_mib"] == pytest.approx(18.0) and m["rss_ovsdb_server_sb_growth_mib"] == 2.0
    assert m["rss_ovsdb_server_nb_growth_mib"] == 0.0 and m["rss_ovn_northd_mib"] == 12.0
    assert m["rss_ovs_vswitchd_mib"] == 3 * 40.0 and m["rss_ovsdb_server_mib"] == 3 * 5.0
    # parts as the CPU's: controller = central + ovn-controllers, vswitch = the rest
    assert m["rss_controller_mib"] == pytest.approx(8 + 18 + 12 + 3 * 12.0)
    assert m["rss_controller_growth_mib"] == pytest.approx(4 * 2.0)
    assert m["rss_vswitch_mib"] == 3 * 45.0 and m["rss_vswitch_growth_mib"] == 0.0
    assert w.result == {"unit": "MiB", "processes": 12, "method": "smaps_rollup"}


def test_status_is_read_where_smaps_rollup_is_not_and_the_window_says_so(tmp_path):
    ovn(tmp_path)
    write(tmp_path, 9, "ovn-northd", 12_288, smaps=False)
    with memory.Window(deployment(), tmp_path) as w:
        pass
    assert w.metrics()["rss_ovn_northd_mib"] == 12.0 and w.result["method"] == "mixed"
    assert memory.read_one(tmp_path, 9) == (12_288, "status")


def test_a_daemon_gone_or_restarted_has_no_growth(tmp_path):
    ovn(tmp_path)
    with memory.Window(deployment(), tmp_path) as w:
        write(tmp_path, 202, "ovn-controller", None)      # h2's ovn-controller exited
    m = w.metrics()
    assert m["rss_ovn_controller_mib"] == 2 * 10.0 and "rss_ovn_controller_growth_mib" not in m
    assert "rss_controller_growth_mib" not in m and m["rss_vswitch_growth_mib"] == 0.0
    assert w.result["changed"] == ["controller", "ovn_controller"] and w.result["processes"] == 11


def test_hosts_on_other_machines_are_not_measured_here(tmp_path):
    ovn(tmp_path)
    with memory.Window(deployment(source={"monitor": "m1"}), tmp_path) as w:
        pass
    assert w.metrics() == {} and "other machines" in w.result["not_measured"]


def test_no_daemons_no_figures(tmp_path):
    dep = SimpleNamespace(vswitch_pids=lambda h: {}, controller_pids=dict,
                          testbed=SimpleNamespace(hosts=[SimpleNamespace(name="h1", cpus=(0,))]))
    with memory.Window(dep, tmp_path) as w:
        pass
    assert w.metrics() == {} and w.result == {"unit": "MiB", "processes": 0, "method": None}


def test_a_part_without_processes_is_zero_not_absent():
    got, changed = memory.metrics({1: ("vswitch", "ovs-vswitchd", 2048)}, {1: ("vswitch", "ovs-vswitchd", 3072)})
    assert got["rss_controller_mib"] == 0 and got["rss_controller_growth_mib"] == 0
    assert got["rss_vswitch_mib"] == 3.0 and got["rss_vswitch_growth_mib"] == 1.0 and changed == []
