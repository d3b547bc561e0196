"""``vnetbench-html`` names every workload by test and configuration, in the spelling
Rally's report needs (one dot; links keep only ``[A-Za-z0-9_.-]``)."""

import re

import pytest

from vnetbench.rally_plugins import exporter


def workload(name="VnetBench.icmp_rtt", args=None, ctx=None, description=""):
    return {"name": name, "args": args or {}, "description": description,
            "contexts": {} if ctx is None else {"vnetbench_testbed": ctx}}


@pytest.mark.parametrize("wl, expected", [
    (workload(args={"mode": "deferred"}, ctx={"vswitch": "linuxbridge", "network": "flat"}),
     "icmp_rtt.linuxbridge-flat-deferred"),
    (workload(args={"mode": "flood", "payloads": [64]}, ctx={"vswitch": "ovs", "network": "vxlan"}),
     "icmp_rtt.ovs-vxlan-flood-payload-sweep"),
    (workload("VnetBench.broadcast", ctx={"vswitch": "ovs", "network": "geneve"}),
     "broadcast.ovs-geneve"),
    (workload("VnetBench.tcp_stream", ctx={"file": "examples/jumbo-vxlan.v2.yaml"}),
     "tcp_stream.jumbo-vxlan-v2"),
    (workload("VnetBench.udp_stream", ctx={}), "udp_stream.ovs-vxlan"),      # the context's defaults
    (workload("VnetBench.udp_stream"), "udp_stream.default"),
])
def test_workload_name(wl, expected):
    name = exporter.workload_name(wl)
    assert name == expected
    assert name.count(".") == 1 and re.fullmatch(r"[A-Za-z0-9_.-]+", name)


def test_description_leads_with_the_configuration():
    ctx = {"vswitch": "ovs", "network": "gre"}
    assert exporter.describe(workload(ctx=ctx)) == "ovs/gre"
    assert exporter.describe(workload(ctx=ctx, description="flood RTT")) == "ovs/gre · flood RTT"
    own = "ovs/gre · flood RTT"
    assert exporter.describe(workload(ctx=ctx, description=own)) == own
    assert exporter.describe(workload(ctx={"file": "t.yaml"})) == "testbed t.yaml"
