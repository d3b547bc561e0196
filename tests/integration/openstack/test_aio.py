"""Smoke test of the all-in-one OpenStack (tools/aio): as the demo project's member,
through openstacksdk, two servers of the pinned flavor (hw:cpu_policy=dedicated) boot on
the one compute host from the project's guest image on the shared flat provider network;
each takes its address from the config drive (there is no DHCP agent), the runner reaches
both over SSH with the keypair's key through a security group admitting SSH, and each
pings the other (the default group admits its members); Neutron's openvswitch firewall
drops what no rule admits. As admin, the live domain
XML shows every vCPU pinned, to distinct host CPUs. And Heat (api + engine) makes and
deletes a member's stack."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from vnetbench.image.channel import Ssh
from vnetbench.traffic import ping

DEMO, ADMIN = "vnetbench-aio-demo", "vnetbench-aio"


def _connect(cloud: str, clouds_yaml: Path):
    import openstack
    from openstack.config import loader
    config = loader.OpenStackConfig(config_files=[str(clouds_yaml)])
    return openstack.connection.Connection(config=config.get_one(cloud))


@pytest.fixture
def demo(aio_cloud):
    c = _connect(DEMO, aio_cloud)
    yield c
    c.close()


@pytest.fixture
def keypair(demo, tmp_path):
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    kp = demo.compute.create_keypair(name=f"aio-smoke-{tmp_path.name[-12:]}",
                                     public_key=key.with_suffix(".pub").read_text())
    yield kp.name, key
    demo.compute.delete_keypair(kp.name, ignore_missing=True)


def _wait_ssh(guest: Ssh, console: str, timeout_s: float) -> float:
    t0 = time.monotonic()
    last = ""
    while time.monotonic() - t0 < timeout_s:
        done = subprocess.run(guest.argv(["true"]), capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
        if done.returncode == 0:
            return time.monotonic() - t0
        last = done.stderr.strip()
        time.sleep(3)
    raise AssertionError(f"{guest.address}: no SSH after {timeout_s:g} s ({last});\n"
                         f"console:\n{console[-2000:]}")


@pytest.fixture
def ssh_group(demo, tmp_path):
    """What a user adds to reach a server under the cloud's openvswitch firewall: a group
    admitting SSH (the project's 'default' admits only its own members)."""
    sg = demo.network.create_security_group(name=f"aio-smoke-ssh-{tmp_path.name[-12:]}")
    demo.network.create_security_group_rule(security_group_id=sg.id, direction="ingress",
                                            ethertype="IPv4", protocol="tcp",
                                            port_range_min=22, port_range_max=22)
    yield sg.name
    demo.network.delete_security_group(sg, ignore_missing=True)


def _dropped(address: str, port: int, timeout_s: float = 2.0) -> bool:
    """A TCP connection to a port nothing listens on: dropped (no answer) by a security
    group, refused (a RST) by the guest's kernel when nothing filters it."""
    import socket
    try:
        socket.create_connection((address, port), timeout=timeout_s).close()
        return False
    except ConnectionRefusedError:
        return False
    except (socket.timeout, TimeoutError):
        return True


def test_pinned_pair_on_the_flat_network_reach_each_other(aio_cloud, demo, keypair, ssh_group, tmp_path):
    """...and the openvswitch firewall enforces the groups: SSH from the runner passes by
    the SSH group's rule, the members of 'default' ping each other, another port of the
    runner's is dropped (not refused, as the guest's kernel would answer unfiltered)."""
    key_name, key = keypair
    image = demo.image.find_image("vnetbench-guest", ignore_missing=False)
    flavor = demo.compute.find_flavor("vnetbench-pinned", ignore_missing=False)
    assert flavor.extra_specs.get("hw:cpu_policy") == "dedicated"
    net = demo.network.find_network("vnetbench-flat", ignore_missing=False)
    t0 = time.monotonic()
    servers = [demo.compute.create_server(name=f"aio-smoke-{i}", image_id=image.id,
                                          flavor_id=flavor.id, networks=[{"uuid": net.id}],
                                          key_name=key_name,
                                          security_groups=[{"name": "default"}, {"name": ssh_group}])
               for i in range(2)]
    try:
        servers = [demo.compute.wait_for_server(s, wait=600) for s in servers]
        active_s = time.monotonic() - t0
        addrs = [s.addresses["vnetbench-flat"][0]["addr"] for s in servers]
        assert {s.host_id for s in servers} == {servers[0].host_id}      # the one host
        mux = Path(f"/tmp/vnbaio-mux-{tmp_path.name[-8:]}")
        mux.mkdir(mode=0o700, exist_ok=True)
        guests = [Ssh(a, key, mux, connect_timeout_s=10) for a in addrs]
        for s, g in zip(servers, guests):
            ready = _wait_ssh(g, demo.compute.get_server_console_output(s).get("output", ""), 600)
            print(f"{s.name} {g.address}: ACTIVE after {active_s:.0f} s, SSH after {ready:.0f} s more")
        for g, other in ((guests[0], addrs[1]), (guests[1], addrs[0])):
            shown = g.run(["ip", "-4", "-o", "addr", "show"]).stdout
            assert f" {g.address}/24 " in shown, shown          # the config drive's address
            rtt = ping.parse(g.run(ping.command(ping.PingParams(other, count=3, interval_s=0.2)),
                                   timeout_s=60).stdout)
            assert rtt["received"] == 3, rtt
        assert all(_dropped(a, 5201) for a in addrs), "the firewall let a port without a rule through"
        admin = _connect(ADMIN, aio_cloud)
        try:
            pins = []
            for s in servers:
                s = admin.compute.get_server(s.id)
                xml = subprocess.run(["virsh", "dumpxml", s.instance_name], capture_output=True,
                                     text=True, check=True).stdout
                pins += [line.split("cpuset='")[1].split("'")[0] for line in xml.splitlines()
                         if "<vcpupin " in line]
            assert len(pins) == 2 and len(set(pins)) == 2, pins
        finally:
            admin.close()
    finally:
        for s in servers:
            demo.compute.delete_server(s, ignore_missing=True)
        for s in servers:
            demo.compute.wait_for_delete(s, wait=120)


HOT = """heat_template_version: 2021-04-16
resources:
  net: {type: OS::Neutron::Net, properties: {name: aio-smoke-tenant}}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 198.18.77.0/24, enable_dhcp: false}
  word: {type: OS::Heat::RandomString, properties: {length: 8}}
outputs:
  word: {value: {get_attr: [word, value]}}
"""


def test_heat_stack_of_a_project_member(aio_cloud, demo, tmp_path):
    """Heat (api + engine) creates and deletes a stack for a non-admin member: a tenant
    network of the cloud's default type (vxlan) with a subnet, and a random string."""
    template = tmp_path / "smoke.yaml"
    template.write_text(HOT)
    stack = demo.create_stack(f"aio-smoke-{tmp_path.name[-12:]}", template_file=str(template),
                              wait=True, timeout=300)
    try:
        assert stack.status == "CREATE_COMPLETE", stack.status_reason
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs}
        assert len(outputs["word"]) == 8
        net = demo.network.find_network("aio-smoke-tenant", ignore_missing=False)
        assert net.project_id == demo.current_project_id
    finally:
        assert demo.delete_stack(stack.id, wait=True)
    assert demo.network.find_network("aio-smoke-tenant") is None
