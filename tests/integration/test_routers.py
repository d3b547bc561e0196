"""Routed tenant networks on the embedded testbed (issue 26): a router on h1 between two
vnets, a VM of each on h1 and h2, an external network with one host outside the cloud,
a floating IP for one VM. East-west crosses the router (the TTL drops by one: a bridged
path keeps it); the outside reaches the floating IP and never a fixed address; what the
VMs send out leaves from the floating IP, or from the router's gateway address (SNAT),
as the external host's capture shows; the NAT is Neutron's: the L3 agent's rules in the
router's namespace (ovs), the OVN driver's NAT rows with the gateway port on the router's
host's chassis (ovn). Teardown leaves nothing (``netns_up``)."""

import re
import subprocess

import pytest

from vnetbench.battery import session
from vnetbench.testbed.loader import loads
from vnetbench.kinds import l3agent
from vnetbench.testbed.netns import l3

ROUTED = """
vswitch: {kind}
network: {{type: vxlan}}
vnets: [{{name: blue}}, {{name: red}}]
vms:
  - {{name: a, host: h1, vnets: [blue]}}
  - {{name: b, host: h2, vnets: [red]}}
routers:
  - {{name: r1, host: h1, vnets: [blue, red], external_gateway: true}}
floating_ips:
  - {{vm: b}}
"""
TTL = re.compile(r"ttl=(\d+)")
ECHO = re.compile(r"IP (\S+) > (\S+): ICMP echo request")


def ping(dep, where, ip, count=3):
    return dep.exec(where, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", str(ip)], timeout=30)


# a namespace router and a logical one here: the functional matrix's routing rows
# measure every kind that routes
@pytest.mark.parametrize("kind", ["ovs", "ovn"])
def test_routed_east_west_and_north_south(netns_up, kind):
    dep = netns_up(loads(ROUTED.format(kind=kind), source=f"<routed {kind}>"))
    tb = dep.testbed
    a, b = (tb.vm(n).nics[0].ip for n in ("a", "b"))
    router, fip, outside = tb.routers[0], tb.floating_ips[0].ip, tb.external_hosts[0]

    east_west = ping(dep, "a", b)           # a on h1, b on h2: through h1's router
    assert east_west.returncode == 0, east_west.stdout + east_west.stderr
    assert set(TTL.findall(east_west.stdout)) == {"63"}, east_west.stdout   # 64 - one router

    inbound = ping(dep, outside.name, fip)
    assert inbound.returncode == 0, inbound.stdout + inbound.stderr
    unreachable = ping(dep, outside.name, b, count=1)   # no route to a tenant's fixed address
    assert unreachable.returncode != 0 and "1 received" not in unreachable.stdout

    with session.capture(dep, outside.name, ["tcpdump", "-i", l3.EXTERNAL_DEV, "-nn", "-l", "-c", "2",
                                             f"icmp[icmptype] == 8 and dst host {outside.ip}"]) as seen:
        for vm in ("a", "b"):
            out = ping(dep, vm, outside.ip, count=1)
            assert out.returncode == 0, (vm, out.stdout + out.stderr)
        text = seen(5.0)
    sources = {src for src, _ in ECHO.findall(text)}
    assert sources == {str(router.gateway), str(fip)}, text   # a through SNAT, b from its floating IP

    if kind == "ovn":                       # the NAT Neutron's OVN driver writes, centralized
        from vnetbench.kinds.ovn.netns import Central
        from vnetbench.kinds.ovn.routers import chassis, router_port, EXT_SWITCH
        nat = Central(dep).nbctl("lr-nat-list", router.name)
        rows = {tuple(line.split()[:3]) for line in nat.splitlines()[1:]}
        assert rows == {("dnat_and_snat", str(fip), str(b)), ("snat", str(router.gateway), "198.19.1.0/24"),
                        ("snat", str(router.gateway), "198.19.2.0/24")}, nat
        gw = Central(dep).nbctl("lrp-get-gateway-chassis", router_port(router.name, EXT_SWITCH))
        lrp = router_port(router.name, EXT_SWITCH)         # rows named <port>-<chassis>
        assert gw.split()[:2] == [f"{lrp}-{chassis(dep.run_id, router.host)}", "1"], gw
        return
    nat = subprocess.run(dep.vm_argv(router.name, ["iptables-save", "-t", "nat"]), capture_output=True,
                         text=True, check=True).stdout
    assert f"-A neutron-l3-agent-PREROUTING -d {fip}/32 -j DNAT --to-destination {b}" in nat, nat
    assert f"-A neutron-l3-agent-float-snat -s {b}/32 -j SNAT --to-source {fip}" in nat, nat
    assert f"-A neutron-l3-agent-snat -o {l3agent.GATEWAY_DEV} -j SNAT --to-source {router.gateway}" in nat, nat
