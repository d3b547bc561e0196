"""Routed tenant networks on the all-in-one cloud (issue 26): the Heat stack's Neutron
router between two subnets, its gateway on the external network (vnetbench-public, a
VLAN of the physnet), a floating IP for b; the cloud's neutron-l3-agent realises them
(legacy router namespace, its NAT by Neutron's own code). From the guests: east-west
crosses the router (TTL - 1), the outside host (a namespace on the external network)
reaches b's floating IP and never its fixed address, what a and b send out leaves from
the router's gateway address (SNAT) and from b's floating IP, the battery measures into
the floating IP, and a router interface removed through Neutron stops east-west.
Two pinned guests, one per compute node (each node's one dedicated CPU), each with a
management NIC on the flat network the runner reaches them on: the one on node 2 reaches
the router through the VXLAN tunnel to node 1, whose L3 agent (the network node) holds it.
On ML2/OVN the networks are Geneve and the router is OVN's: distributed east-west, its
gateway (SNAT, the floating IP) on node 1, the one chassis that may host gateways."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from aio_nodes import kind_of, layout_of, tenant_type
from aio_testbed import up_on_the_aio
from vnetbench.battery import session

VNETBENCH = str(Path(sys.executable).parent / "vnetbench")
CLOUD = "vnetbench-aio"
TESTBED = """
vswitch: ovs
network: {type: vxlan}
vnets: [{name: blue}, {name: red}]
vms:
  - {name: a, host: h1, vnets: [blue]}
  - {name: b, host: h2, vnets: [red]}
routers:
  - {name: r1, host: h1, vnets: [blue, red], external_gateway: true}
floating_ips:
  - {vm: b}
"""
TTL = re.compile(r"ttl=(\d+)")
ECHO = re.compile(r"IP (\S+) > (\S+): ICMP echo request")
STOP_S = 15.0           # the L3 agent unplugs after Neutron answered (an RPC, then its loop)


@pytest.fixture(scope="module")
def routed(aio_cloud, aio_outside, tmp_path_factory):
    # the tenant networks' type: the AIO's (ML2/OVN offers Geneve, not VXLAN)
    testbed = TESTBED.replace("vxlan", tenant_type(layout_of(aio_cloud))).replace(
        "vswitch: ovs", f"vswitch: {kind_of(aio_cloud)}")
    with up_on_the_aio(aio_cloud, tmp_path_factory.mktemp("routers-cloud"), testbed,
                            "--mgmt-network", "vnetbench-flat", "--external-network",
                            "vnetbench-public", "--outside", aio_outside) as (dep, _):
        yield dep


def ping(dep, where, ip, count=3, wait_s=2):
    return dep.exec(where, ["ping", "-c", str(count), "-i", "0.2", "-W", str(wait_s), str(ip)], timeout=60)


def test_neutrons_router_routes_east_west_and_nats_north_south(routed, conn, aio_cloud):
    dep = routed
    tb = dep.testbed
    bound = {vm: conn.network.get_port(dep.run.meta()["ports"][vm]).binding_host_id for vm in ("a", "b")}
    if layout_of(aio_cloud).computes >= 2:
        assert bound["a"] != bound["b"], bound          # b behind the tunnel from the router
    print(f"a on {bound['a']}, b on {bound['b']}")
    a, b = (tb.vm(n).nics[0].ip for n in ("a", "b"))
    router, fip, outside = tb.routers[0], tb.floating_ips[0].ip, tb.external_hosts[0]
    # what the backend read back is Neutron's
    nrouter = conn.network.get_router(dep.run.meta()["router"])
    assert [i["ip_address"] for i in nrouter.external_gateway_info["external_fixed_ips"]] == [str(router.gateway)]
    (nfip,) = conn.network.ips(floating_ip_address=str(fip))
    assert nfip.port_id == dep.run.meta()["ports"]["b"] and nfip.fixed_ip_address == str(b)

    east_west = ping(dep, "a", b)
    assert east_west.returncode == 0, east_west.stdout + east_west.stderr
    assert set(TTL.findall(east_west.stdout)) == {"63"}, east_west.stdout   # 64 - one router

    inbound = ping(dep, outside.name, fip)
    assert inbound.returncode == 0, inbound.stdout + inbound.stderr
    unreachable = ping(dep, outside.name, b, count=1)   # no route to a tenant's fixed address
    assert unreachable.returncode != 0 and "1 received" not in unreachable.stdout

    with session.capture(dep, outside.name, ["tcpdump", "-i", "eth0", "-nn", "-l", "-c", "2",
                                             f"icmp[icmptype] == 8 and dst host {outside.ip}"]) as seen:
        for vm in ("a", "b"):
            out = ping(dep, vm, outside.ip, count=1, wait_s=5)
            assert out.returncode == 0, (vm, out.stdout + out.stderr)
        text = seen(5.0)
    sources = {src for src, _ in ECHO.findall(text)}
    assert sources == {str(router.gateway), str(fip)}, text   # a through SNAT, b from its floating IP


def test_the_battery_measures_into_the_floating_ip(routed):
    """The outside host to b's floating IP (``path: floating-ip``): RTT and TCP go to the
    address ``reach`` gives, the one the cloud allocated."""
    from vnetbench.battery import rtt, tcp
    from vnetbench.testbed.model import Pair
    dep = routed
    (fip,) = dep.testbed.floating_ips
    outside = dep.testbed.external_hosts[0].name
    pair = Pair("fip", "cross-host", "red", (outside, "b"), path="floating-ip")
    assert dep.reach(outside, "b") == str(fip.ip)
    out = [rtt.run(dep, pair, mode="flood", count=50, repetitions=1),
           *tcp.run(dep, pair, nominal_mss=[1398], seconds=2, repetitions=1)]
    assert {r.labels["path"] for r in out} == {"floating-ip"}
    assert out[0].samples["loss_pct"] == [0.0] and out[0].samples["rtt_mean_ms"][0] > 0
    assert out[1].samples["gbps"][0] > 0.001
    print(f"into the floating IP: RTT {out[0].samples['rtt_mean_ms'][0]:.2f} ms, "
          f"TCP {out[1].samples['gbps'][0]:.3f} Gbit/s (TCG guests)")


def test_a_router_interface_removed_through_neutron_stops_east_west(routed):
    dep = routed
    tb = dep.testbed
    b, fip = tb.vm("b").nics[0].ip, tb.floating_ips[0].ip
    assert ping(dep, "a", b, count=1).returncode == 0
    dep.remove_router_interface("r1", "blue")
    t0 = time.monotonic()
    while ping(dep, "a", b, count=1, wait_s=1).returncode == 0:
        assert time.monotonic() - t0 < STOP_S, f"a still reaches b {STOP_S} s after the interface went"
    cut = ping(dep, "a", b, count=2, wait_s=1)                       # and it stays stopped
    assert cut.returncode != 0 and " 0 received" in cut.stdout, cut.stdout
    print(f"east-west stopped {time.monotonic() - t0:.1f} s after Neutron answered")
    assert ping(dep, tb.external_hosts[0].name, fip, count=1).returncode == 0   # red's path stays
