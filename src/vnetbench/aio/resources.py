"""The all-in-one cloud's resources, through its APIs (openstacksdk): the service users
and catalog, Heat's domain, the demo project, the guest image, the provider and external
networks, the flavors; the wait until Nova can place on every node; clouds.yaml.

A part of ``cloud.Aio`` (which composes it with ``nodes`` and ``services``): it uses the
Aio's layout (``lay``), its daemons and the computes ``services`` started."""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

import yaml

from vnetbench.aio import conf
from vnetbench.aio.procs import _tail, alive, command, log_lines
from vnetbench.errors import VnetbenchError

# the packages whose versions a record made on the AIO names
FACT_PACKAGES = {"ovs": ("neutron-server", "nova-compute", "openvswitch-switch"),
                 "ovn": ("neutron-server", "nova-compute", "openvswitch-switch", "ovn-host")}

CLOUD, DEMO = "vnetbench-aio", "vnetbench-aio-demo"
DEMO_PROJECT = DEMO_USER = "vnetbench-demo"
FLAVOR = "vnetbench-pinned"
FLAVOR_SHARED = "vnetbench-shared"     # unpinned: boots where cpu_shared_set is (aio up --shared-cpus)
SERVICE_USERS = ("glance", "placement", "nova", "neutron", "heat")
ENDPOINTS = (("glance", "image", "glance", ""), ("placement", "placement", "placement", ""),
             ("nova", "compute", "nova", "/v2.1"), ("neutron", "network", "neutron", ""),
             ("heat", "orchestration", "heat", "/v1/%(tenant_id)s"))
# nova-compute's start lists every libvirt domain of the host, then reads each one's XML:
# a domain of another run (the libvirt backend's tests) that goes in between kills it
# (Zed, driver._get_all_assigned_mediated_devices: libvirtError "Domain not found")
RACE = "Domain not found"


class Resources:
    def _auth(self, user="admin", project="admin") -> dict:
        return {"auth_url": self.lay.url("keystone", "/v3"), "username": user,
                "password": self.lay.password, "project_name": project,
                "user_domain_name": "Default", "project_domain_name": "Default"}

    def connect(self, user="admin", project="admin"):
        import openstack
        return openstack.connect(auth=self._auth(user, project), region_name=conf.REGION,
                                 identity_api_version="3", interface="public")

    def _identity(self) -> None:
        """Service users, the catalog, Heat's domain and roles, the demo project."""
        c = self.connect()
        idm = c.identity
        admin_role = idm.find_role("admin", ignore_missing=True)
        member = idm.find_role("member", ignore_missing=True)
        default = idm.find_domain("default", ignore_missing=True)
        service = idm.create_project(name="service", domain_id=default.id)
        # the 'service' role: services check it on the service token another service sends
        service_role = idm.find_role("service", ignore_missing=True) or idm.create_role(name="service")
        for user in SERVICE_USERS:
            u = idm.create_user(name=user, password=self.lay.password, domain_id=default.id,
                                default_project_id=service.id)
            for role in (admin_role, service_role):
                idm.assign_project_role_to_user(service, u, role)
        for svc, kind, name, path in ENDPOINTS:
            s = idm.create_service(name=name, type=kind)
            for iface in ("public", "internal", "admin"):
                idm.create_endpoint(service_id=s.id, interface=iface, region_id=conf.REGION,
                                    url=self.lay.url(svc, path))
        # Heat: its stack-user domain and roles
        heat_domain = idm.create_domain(name="heat", description="Heat stack users")
        dadmin = idm.create_user(name="heat_domain_admin", password=self.lay.password,
                                 domain_id=heat_domain.id)
        idm.assign_domain_role_to_user(heat_domain, dadmin, admin_role)
        owner = idm.create_role(name="heat_stack_owner")
        idm.create_role(name="heat_stack_user")
        demo = idm.create_project(name=DEMO_PROJECT, domain_id=default.id)
        du = idm.create_user(name=DEMO_USER, password=self.lay.password, domain_id=default.id,
                             default_project_id=demo.id)
        for role in (member, owner):
            idm.assign_project_role_to_user(demo, du, role)

    def _resources(self, image: Path) -> None:
        """The guest image, the flat provider network and the pinned flavor."""
        c = self.connect()
        self._upload_image(c, image)
        net = c.network.create_network(name=conf.NETWORK_NAME, shared=True,
                                       provider_network_type="flat",
                                       provider_physical_network=conf.PHYSNET)
        start, end = self.lay.pool
        c.network.create_subnet(network_id=net.id, name=conf.NETWORK_NAME, ip_version=4,
                                cidr=self.lay.cidr, enable_dhcp=False,
                                gateway_ip=self.lay.host_cidr.split("/")[0],
                                allocation_pools=[{"start": start, "end": end}])
        ext = c.network.create_network(name=conf.EXTERNAL_NAME, is_router_external=True,
                                       provider_network_type="vlan",
                                       provider_physical_network=conf.PHYSNET,
                                       provider_segmentation_id=conf.EXTERNAL_VLAN)
        net = ipaddress.ip_network(self.lay.external_cidr)
        c.network.create_subnet(network_id=ext.id, name=conf.EXTERNAL_NAME, ip_version=4,
                                cidr=str(net), enable_dhcp=False,
                                gateway_ip=self.lay.outside_cidr.split("/")[0],
                                allocation_pools=[{"start": str(net.network_address + 10),
                                                   "end": str(net.broadcast_address - 1)}])
        flavor = c.compute.create_flavor(name=FLAVOR, ram=256, vcpus=1, disk=1, is_public=True)
        c.compute.create_flavor_extra_specs(flavor, {"hw:cpu_policy": "dedicated"})
        c.compute.create_flavor(name=FLAVOR_SHARED, ram=256, vcpus=1, disk=1, is_public=True)

    def _upload_image(self, c, image: Path) -> None:
        fmt = "qcow2" if image.suffix == ".qcow2" else "raw"
        img = c.image.create_image(name=conf.IMAGE_NAME, filename=str(image), disk_format=fmt,
                                   container_format="bare", visibility="public",
                                   img_config_drive="mandatory", wait=True, timeout=120)
        t0 = time.monotonic()
        while img.status != "active" and time.monotonic() - t0 < 120:
            if img.status in ("killed", "deleted"):
                break
            time.sleep(1)
            img = c.image.get_image(img.id)
        if img.status != "active":
            raise VnetbenchError(f"aio: image {conf.IMAGE_NAME} is {img.status}, not active "
                                 f"(log: {self.lay.logs}/glance-api.log)")

    def _wait_compute(self, timeout_s: float = 300) -> None:
        """Until Nova's scheduler can place on this host: the compute service is up, mapped
        to the cell and its resource provider has the CPU inventory its layout asks for
        (PCPU for pinned guests, VCPU for unpinned ones); and the OVS agent is alive.
        Hypervisors are listed without details: from microversion 2.88 each detailed
        entry asks its compute for its uptime over RPC, and a compute still starting let
        that call time out (HTTP 500, MessagingTimeout after 60 s), which ended `up`."""
        c = self.connect()
        want = {rc for rc, cpus in (("PCPU", self.lay.cpus), ("VCPU", self.lay.shared_cpus)) if cpus}
        n, hosts = self.lay.computes, [node.host for node in self.lay.nodes]
        t0, last, restarts, next_discover = time.monotonic(), "nothing yet", 0, 0.0
        while time.monotonic() - t0 < timeout_s:
            for entry in self.current():
                if alive(entry):
                    continue
                log = self.lay.logs / f"{entry['name']}.log"
                if (entry["name"] == "nova-compute" and restarts < 3
                        and any(RACE in ln for ln in log_lines(log, 60) or [])):
                    restarts += 1
                    argv, env = self._computes["nova-compute"]
                    self.daemons.start("nova-compute", argv, env=env)
                    continue
                raise VnetbenchError(f"aio: {entry['name']} exited: {_tail(log)} (log: {log})")
            hyps = list(c.compute.hypervisors())     # the list, not details: see the docstring
            if (len(hyps) < n and time.monotonic() >= next_discover
                    and self._computes_up(c) > len(hyps)):
                # map the new compute hosts into their cell now (devstack's discover_hosts):
                # the scheduler's periodic discovery took 20-25 s to run here
                self._discover_hosts()
                next_discover = time.monotonic() + 5
                hyps = list(c.compute.hypervisors())
            silent = self._agents_silent(c, hosts)
            if len(hyps) < n:
                last = f"{len(hyps)} of {n} hypervisors in the cell yet"
            elif silent:
                last = f"{' and '.join(silent)} has not reported"
            else:
                rps = list(c.placement.resource_providers())
                lacking = [rp.name for rp in rps
                           if not want <= {i.resource_class for i in c.placement.resource_provider_inventories(rp)}
                           and rp.name in {h.name for h in hyps}]
                if not lacking:
                    return
                last = f"no {'/'.join(sorted(want))} inventory in placement yet for {', '.join(lacking)}"
            time.sleep(2)
        raise VnetbenchError(f"aio: compute not ready after {timeout_s:g} s: {last}")

    def _agents_silent(self, c, hosts: list[str]) -> list[str]:
        """The network agents Neutron has not heard from yet: ML2/OVS, each node's OVS agent
        and the L3 agent; ML2/OVN, each node's ovn-controller (its SB chassis, which Neutron
        lists as an agent) and metadata agent (the one that names the node's bridge)."""
        alive = {(a.agent_type, a.host) for a in c.network.agents() if a.is_alive}
        if self.lay.ml2 == "ovn":
            want = [(f"the ovn-controller of {h}", ("OVN Controller agent", "OVN Controller Gateway agent"), h)
                    for h in hosts]
            want += [(f"the OVN metadata agent of {h}", ("OVN Metadata agent",), h) for h in hosts]
        else:
            want = [(f"the OVS agent of {h}", ("Open vSwitch agent",), h) for h in hosts]
            want.append(("the L3 agent", ("L3 agent",), None))
        return [what for what, types, host in want
                if not any(t in types and (host is None or h == host) for t, h in alive)]

    @staticmethod
    def _computes_up(c) -> int:
        return sum(s.binary == "nova-compute" and s.state == "up" for s in c.compute.services())

    def _discover_hosts(self) -> None:
        command(self.rx(["nova-manage", "--config-file", self.lay.conf_path("nova"), "cell_v2",
              "discover_hosts"]), "nova-manage cell_v2 discover_hosts", timeout_s=120)

    def facts(self) -> dict:
        """The cloud's provenance (testbed.openstack.facts): its release and driver, and the
        versions of the packages its nodes run (the root's, or this machine's for Zed)."""
        lay = self.lay
        pkgs = dict(line.split(" ", 1) for line in command(self.rx([
            "dpkg-query", "-W", "-f", "${Package} ${Version}\n", *FACT_PACKAGES[lay.ml2]]),
            "dpkg-query").splitlines() if " " in line)
        return {"release": lay.release, "series": conf.SERIES[lay.release],
                "mechanism_driver": conf.MECHANISM_DRIVER[lay.ml2],
                "ovs": pkgs.get("openvswitch-switch"), "ovn": pkgs.get("ovn-host"),
                "neutron": pkgs.get("neutron-server"), "nova": pkgs.get("nova-compute"),
                # where the runner plugs a port without a VM as os-vif would (port_ready)
                "nodes": {n.host: {"ovsdb": n.ovsdb, "netns": n.netns, "bridge": n.br_int}
                          for n in lay.nodes}}

    def _write_clouds_yaml(self) -> None:
        clouds = {}
        for name, user, project in ((CLOUD, "admin", "admin"), (DEMO, DEMO_USER, DEMO_PROJECT)):
            clouds[name] = {"auth": self._auth(user, project), "region_name": conf.REGION,
                            "identity_api_version": 3, "interface": "public",
                            "vnetbench": self.facts()}
        self.clouds_yaml.write_text(yaml.safe_dump({"clouds": clouds}, sort_keys=False))
        self.clouds_yaml.chmod(0o644)
