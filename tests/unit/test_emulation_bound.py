"""The emulation-bound rule on recorded CPU splits (issue 22): a cell is marked when a
component that stands in for kernel or compiled code sat at its ceiling, computed from the
measurement's split by component and thread class; which components emulate is the kind's own list."""

from vnetbench.report import table, text
from vnetbench.report.html import page
from vnetbench.results.load import Run
from vnetbench.results import bound
from vnetbench.results.record import Result


def record(components_per_rep, vswitch="ovs", datapath="netdev", test="tcp_stream", cpu=(130.0, 140.0)):
    reps = [{"cpu": {"components": comps}} for comps in components_per_rep]
    return Result(test=test, labels={"vswitch": vswitch, "network": "vxlan", "placement": "cross-host",
                                     "params": {"nominal": 1448}},
                  samples={"gbps": [0.8, 0.9][:len(reps)], "cpu_pct": list(cpu)[:len(reps)]},
                  provenance={"ovs_datapath": datapath}, extra={"repetitions": reps})


SATURATED_MAIN = {"vswitch/ovs-vswitchd/main": 88.0, "softirq_in_vswitch/ovs-vswitchd/main": 9.5,
                  "vswitch/ovs-vswitchd/revalidator": 1.0, "softirq_other": 30.0}


def test_a_saturated_netdev_datapath_thread_marks_the_cell():
    r = record([{"vswitch/ovs-vswitchd/main": 40.0}, SATURATED_MAIN])
    (b,) = bound.bound(r)
    assert b.component == "ovs-vswitchd/main" and round(b.peak_pct, 1) == 97.5
    assert "userspace datapath" in b.text()


def test_the_same_thread_on_a_kernel_datapath_is_the_system_itself():
    """A real cloud's OVS main thread at 100% is OVS's own bottleneck, not emulation."""
    assert bound.bound(record([SATURATED_MAIN], datapath="system")) == []
    assert bound.bound(record([SATURATED_MAIN], datapath=None)) == []


def test_a_saturated_guest_workload_does_not_mark():
    """A VM's iperf3 at 100% is the workload: it is no component of the split; the
    softirq it causes elsewhere is not a component's either."""
    r = record([{"vswitch/ovs-vswitchd/main": 35.0, "softirq_other//": 99.0}], cpu=(180.0,))
    assert bound.bound(r) == []


def test_below_the_ceiling_nothing_is_marked():
    r = record([{"vswitch/ovs-vswitchd/main": 70.0, "softirq_in_vswitch/ovs-vswitchd/main": 10.0}])
    assert bound.bound(r) == []


def test_python_models_are_marked_by_process_not_by_kind():
    agent = record([{"vswitch/contrail-vrouter-agent/all": 96.0}], vswitch="vrouter", datapath=None,
                   test="flow_setup")
    controller = record([{"controller/osken-1/all": 93.0}], vswitch="whatever-kind", datapath=None)
    ovn = record([{"vswitch/ovn-controller/all": 99.0}], vswitch="ovn", datapath=None)
    assert [b.component for b in bound.bound(agent)] == ["contrail-vrouter-agent/all"]
    assert [b.component for b in bound.bound(controller)] == ["osken-1/all"]
    assert bound.bound(ovn) == []           # real OVN code (C): its own speed


def test_records_without_a_split_are_not_marked():
    r = Result(test="icmp_rtt", labels={"vswitch": "ovs", "network": "vxlan"}, samples={"rtt_mean_ms": [0.1]},
               provenance={"ovs_datapath": "netdev"}, extra={})
    assert bound.bound(r) == [] and bound.bound(None) == []


def test_every_format_marks_the_cell_and_the_summary_names_the_row():
    bound_rec = record([SATURATED_MAIN, SATURATED_MAIN])
    free = Result(test="tcp_stream", labels={"vswitch": "linuxbridge", "network": "flat",
                                             "placement": "cross-host", "params": {"nominal": 1448}},
                  samples={"gbps": [15.0, 15.2], "cpu_pct": [60.0, 62.0]}, provenance={}, extra={})
    model = table.build([Run("", None, [bound_rec, free])])
    plain = text.plain(model)
    assert "‡" in plain.splitlines()[2] and plain.count("‡ (") == 1
    assert "conclusions this machine cannot support" in plain
    assert "ovs/vxlan: OVS's userspace datapath" in plain
    assert "ovs/vxlan emulation-bound (ovs-vswitchd/main up to 98%)" in plain
    assert "‡" in text.markdown(model)
    csv = text.csv_text(model).splitlines()
    head = csv[0].split(",")
    col = head.index("emulation_bound")
    rows = {line.split(",")[0]: line for line in csv[1:]}
    assert "ovs-vswitchd/main at 98%" in rows["ovs/vxlan"]
    assert rows["linuxbridge/flat"].split(",")[col] == ""
    html = page([Run("", None, [bound_rec, free])], model, [])
    assert "class='v bound'" in html and "emulation-bound: ovs-vswitchd/main" in html
    assert "Conclusions this machine cannot support" in html


def hosts_record(hosts: dict, datapath="netdev"):
    """One repetition whose window has per-host splits: {host: (components, busy%, cpus)}."""
    window = {"components": {}, "hosts": {h: {"components": c, "busy_pct": b, "cpus": n}
                                          for h, (c, b, n) in hosts.items()}}
    for c, _, _ in hosts.values():      # the testbed-wide split sums the hosts
        for k, v in c.items():
            window["components"][k] = window["components"].get(k, 0.0) + v
    return Result(test="tcp_stream", labels={"vswitch": "ovs", "network": "vxlan", "placement": "cross-host"},
                  samples={"gbps": [0.5]}, provenance={"ovs_datapath": datapath},
                  extra={"repetitions": [{"cpu": window}]})


def test_two_half_busy_hosts_are_not_one_saturated_thread():
    """The testbed-wide split adds h1's and h2's main threads (96%): per host neither is at
    its ceiling, and their CPUs had room."""
    half = {"vswitch/ovs-vswitchd/main": 40.0, "softirq_in_vswitch/ovs-vswitchd/main": 8.0}
    r = hosts_record({"h1": (half, 60.0, 1), "h2": (half, 55.0, 1)})
    assert bound.bound(r) == []


def test_a_saturated_host_cpu_the_emulated_datapath_dominates_marks():
    """Same host: the guests and the datapath share one CPU; it ran out, and the datapath
    took most of it (63% here, as measured for ovs/vxlan same-host TCP)."""
    dominant = {"vswitch/ovs-vswitchd/main": 43.0, "softirq_in_vswitch/ovs-vswitchd/main": 20.0}
    (b,) = bound.bound(hosts_record({"h1": (dominant, 99.0, 1)}))
    assert b.component == "h1: ovs-vswitchd/main" and b.busy_pct == 99.0
    assert "saturated host (99% busy)" in b.text()
    assert bound.bound(hosts_record({"h1": (dominant, 80.0, 1)})) == []       # CPU had room
    minor = {"vswitch/ovs-vswitchd/main": 20.0}
    assert bound.bound(hosts_record({"h1": (minor, 99.0, 1)})) == []          # the guests' CPU


def test_one_host_at_the_ceiling_is_named():
    hot = {"vswitch/ovs-vswitchd/main": 70.0, "softirq_in_vswitch/ovs-vswitchd/main": 25.0}
    cool = {"vswitch/ovs-vswitchd/main": 30.0}
    (b,) = bound.bound(hosts_record({"h1": (cool, 50.0, 1), "h2": (hot, 97.0, 1)}))
    assert b.component == "h2: ovs-vswitchd/main" and b.busy_pct is None and round(b.peak_pct) == 95


def test_the_same_process_is_an_emulation_in_one_kind_and_the_system_in_another():
    """An os-ken controller at its ceiling: the Floodlight model's emulation (Floodlight is
    Java), but Faucet itself (Faucet is Python on os-ken in production too)."""
    comps = [{"controller/osken-manager/all": 97.0}]
    assert [b.component for b in bound.bound(record(comps, vswitch="ovs-openflow"))] == ["osken-manager/all"]
    assert bound.bound(record(comps, vswitch="faucet")) == []
    assert bound.bound(record(comps, vswitch="a-cloud-label")), "an unknown label gets every kind's rules"
