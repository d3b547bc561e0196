"""The capacity hand-off applied (issue 28): the all-in-one cloud's OVS agent reports the
packet rate this machine's measured ovs/vxlan profile gives its vSwitch
(``aio up --ovs-kpps``, computed in conftest through ``vnetbench.capacity.openstack``),
Neutron's placement plugin puts it in Placement, and Nova's scheduler then refuses the
host for a port whose minimum-packet-rate guarantee no longer fits -- while the host
still has the CPUs and memory (Placement's allocation candidates say so).

Zed ties minimum *bandwidth* to physnet-backed networks; the packet-rate inventory is the
OVS backend's own, whatever the network type, so this holds for tunnelled tenant
networks too (docs/capacity.md)."""

from __future__ import annotations

import os
import secrets
import time

import pytest

from aio_capacity import handed_off_kpps

RATE = "NET_PACKET_RATE_KILOPACKET_PER_SEC"
PLACEMENT = {"OpenStack-API-Version": "placement 1.29"}


def _get(conn, path):
    r = conn.placement.get(path, headers=PLACEMENT)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r.json()


def _rate_provider(conn, timeout_s=150):
    """The OVS agent's packet-processing provider, once Neutron has synced it."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        rps = _get(conn, f"/resource_providers?resources={RATE}:1")["resource_providers"]
        if rps:
            return rps[0]
        time.sleep(5)
    return None


def _wait(conn, server, statuses, timeout_s=300):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        s = conn.compute.get_server(server)
        if s.status in statuses:
            return s
        time.sleep(2)
    raise AssertionError(f"server {server.name} still {s.status} after {timeout_s} s")


def test_nova_refuses_the_host_whose_measured_vswitch_capacity_is_taken(conn, aio_cloud):
    rp = _rate_provider(conn)
    if rp is None and os.environ.get("VNETBENCH_AIO_CLOUDS"):
        pytest.skip("the running all-in-one cloud VNETBENCH_AIO_CLOUDS names reports no "
                    "packet-processing inventory (it was started without 'aio up --ovs-kpps')")
    assert rp is not None, "the OVS agent's packet rate (aio up --ovs-kpps) never reached Placement"
    total = _get(conn, f"/resource_providers/{rp['uuid']}/inventories")["inventories"][RATE]["total"]
    assert total == handed_off_kpps()
    want = int(total * 0.6)          # one port fits, two do not
    tag = f"vnb-cap-{secrets.token_hex(3)}"
    image = conn.image.find_image("vnetbench-guest", ignore_missing=False)
    flavor = conn.compute.find_flavor("vnetbench-pinned", ignore_missing=False)
    net = conn.network.find_network("vnetbench-flat", ignore_missing=False)
    made = {"servers": [], "ports": [], "policy": None}
    try:
        policy = made["policy"] = conn.network.create_qos_policy(name=tag)
        conn.network.create_qos_minimum_packet_rate_rule(policy, min_kpps=want, direction="any")
        ports = made["ports"] = [conn.network.create_port(network_id=net.id, name=f"{tag}-{i}",
                                                          qos_policy_id=policy.id) for i in range(2)]
        request = conn.network.get_port(ports[0]).resource_request
        assert request and any(RATE in str(g) for g in request.values()), request
        first = conn.compute.create_server(name=f"{tag}-a", image_id=image.id, flavor_id=flavor.id,
                                           networks=[{"port": ports[0].id}])
        made["servers"].append(first)
        assert _wait(conn, first, {"ACTIVE", "ERROR"}).status == "ACTIVE"
        usage = _get(conn, f"/resource_providers/{rp['uuid']}/usages")["usages"][RATE]
        assert usage == want
        # what is left: the packet rate no longer holds a second port; CPUs and memory do
        assert not _get(conn, f"/allocation_candidates?resources={RATE}:{want}")["allocation_requests"]
        assert _get(conn, f"/allocation_candidates?resources=PCPU:{flavor.vcpus},"
                          f"MEMORY_MB:{flavor.ram}")["allocation_requests"]
        second = conn.compute.create_server(name=f"{tag}-b", image_id=image.id, flavor_id=flavor.id,
                                            networks=[{"port": ports[1].id}])
        made["servers"].append(second)
        refused = _wait(conn, second, {"ACTIVE", "ERROR"})
        assert refused.status == "ERROR", refused.status
        assert "No valid host" in (refused.fault or {}).get("message", ""), refused.fault
    finally:
        for s in made["servers"]:
            conn.compute.delete_server(s, ignore_missing=True)
        for s in made["servers"]:
            conn.compute.wait_for_delete(s, wait=300)
        for p in made["ports"]:
            conn.network.delete_port(p, ignore_missing=True)
        if made["policy"] is not None:
            conn.network.delete_qos_policy(made["policy"], ignore_missing=True)
