"""Smoke test of the all-in-one OpenStack (tools/aio): Heat (api + engine) makes and
deletes a member's stack. Guests on the cloud: the openstack backend's tests (a member's
pinned pair through an SSH gateway, test_openstack_member; an admin's pinned pair with
its pinning read back from Nova and from libvirt's domain XML, test_openstack_cloud;
security groups enforced by Neutron's openvswitch firewall, test_security_groups_cloud)."""

from __future__ import annotations

from pathlib import Path

import pytest

DEMO = "vnetbench-aio-demo"


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
