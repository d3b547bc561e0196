"""What the openstack backend asks Heat for, and what it reads back: pure functions from
a Testbed and the backend's options to the parameters of heat-templates/testbed.yaml,
and from the stack's outputs back to the testbed's VMs."""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench import kinds
from vnetbench.testbed.model import ROUTER, NetType, Testbed

TEMPLATES = Path(__file__).resolve().parents[4] / "heat-templates"
TEMPLATE = TEMPLATES / "testbed.yaml"
GROUPS = ("same_host", "cross_host", "unplaced", "vnet_b")     # the order of the outputs


@dataclass(frozen=True)
class Options:
    """The backend's own options (CLI flags, Rally context keys)."""
    cloud: str
    image: str = "vnetbench-guest"      # Glance image (make image; tools/aio uploads it)
    network: str = ""                   # an existing network ('' = the stack makes its own)
    subnet: str = ""
    physical_network: str = ""          # flat/vlan provider networks ('' = the environment file's)
    flavor: str = ""                    # an existing flavor ('' = a pinned one, admin)
    cpu_thread_policy: str = "prefer"
    pinned: bool = True                 # False: unpinned guests (functional runs on small clouds)
    memory_mib: int = 256
    hugepages: str = ""
    host_a: str = ""                    # zone:host placement (admin)
    host_b: str = ""
    compute_hosts: tuple = ()           # the compute host of each testbed host, in order (admin;
                                        # a scale testbed over more than two hosts)
    zone: str = "nova"
    no_server_groups: bool = False      # cross-host pairs by the hostId fallback (Shaker's)
    drop_misplaced: bool = False        # a pair Nova placed wrong is left out and named, not fatal
                                        # (the scale family's best_effort)
    external_network: str = ""          # the cloud's external network: routers' gateways, floating IPs
    outside: str = ""                   # the external host: netns:NAME, a namespace of this
                                        # machine on that network (the AIO's: aio status)
    gateway: str = ""                   # SSH jump host to reach the VMs ('' = direct)
    mgmt_network: str = ""              # VMs in no pair: a 2nd NIC there for SSH ('' = none)
    prometheus: str = ""                # URL of the Prometheus scraping the collectors
    clouds_yaml: str | None = None
    timeout_s: float = 900              # stack creation deadline
    ready_timeout_s: float = 600        # SSH into every guest after the stack is complete (TCG boots)

    @property
    def named_hosts(self) -> list[str]:
        """The compute hosts named for zone:host placement, in the testbed's host order."""
        return list(self.compute_hosts) or [h for h in (self.host_a, self.host_b) if h]

    def __post_init__(self):
        if not self.cloud:
            raise VnetbenchError("openstack backend: no cloud named; pass --cloud NAME (a cloud of "
                                 "your clouds.yaml) or 'cloud: NAME' in the Rally context")
        if self.cpu_thread_policy not in ("prefer", "isolate"):
            raise VnetbenchError(f"openstack backend: cpu_thread_policy {self.cpu_thread_policy!r}: "
                                 "use prefer or isolate ('require' cannot schedule on hosts "
                                 "without SMT)")


def stack_name(run_id: str) -> str:
    return f"vnb-{run_id}"


def tags(run_id: str) -> list[str]:
    return ["vnetbench", f"run-{run_id}"]


def environment(testbed: Testbed) -> Path:
    """The Heat environment of the cloud's SDN back-end, named by the testbed's kind."""
    kind = kinds.of(testbed)
    if not kind.openstack_environment:
        raise UnsupportedError(f"{testbed.source}: no OpenStack cloud of vswitch {kind.name}: "
                               f"{kind.no_cloud}")
    return TEMPLATES / "env" / f"{kind.openstack_environment}.yaml"


def mac(run_id: str, vm_i: int) -> str:
    """Unique per run and VM: two runs' ports may share a network (a MAC is unique there)."""
    b = bytes.fromhex(run_id)
    return "fa:%02x:%02x:%02x:%02x:%02x" % (b[0], b[1], b[2], vm_i >> 8, vm_i & 0xFF)


def group_of(testbed: Testbed, pair, options: Options) -> str:
    if len(testbed.vnets) > 1 and pair.vnet == testbed.vnets[1].name:
        return "vnet_b"
    if pair.placement == "same-host":
        return "same_host"
    return "unplaced" if options.no_server_groups else "cross_host"


def stacked_pairs(testbed: Testbed) -> tuple:
    """The pairs the template's pair groups build: every pair's A side on one compute host
    (host_a) and B side on one other (host_b), so only pairs over at most two testbed
    hosts, and on one vnet. The pairs of a testbed over more (the scale family's
    ``single_room`` over N hosts) or of a routed testbed are built VM by VM (VNB::Vm: each
    in its testbed host's server group, on its compute host when named), and still
    verified as pairs by hostId."""
    if testbed.routers:
        return ()
    hosts = {h for p in testbed.pairs for h in (testbed.vm(p.vms[0]).host, testbed.vm(p.vms[1]).host)}
    return testbed.pairs if len(hosts) <= 2 else ()


def grouped(testbed: Testbed, options: Options) -> dict[str, list]:
    """The template-built pairs (``stacked_pairs``) per group, in the group's index order."""
    out = {g: [] for g in GROUPS}
    for pair in stacked_pairs(testbed):
        out[group_of(testbed, pair, options)].append(pair)
    return out


def parameters(testbed: Testbed, run_id: str, options: Options, admin: bool,
               public_key: str, owner: bool = True) -> dict:
    """testbed.yaml's parameters for TESTBED. OWNER: the project owns the existing
    network (else, not admin, Neutron refuses fixed MACs and port security off on it)."""
    if len(testbed.vnets) > 2:
        raise VnetbenchError(f"{testbed.source}: the openstack backend builds at most 2 vnets "
                             f"(the template's A and B); this testbed has {len(testbed.vnets)}")
    if not options.flavor and not admin:
        raise VnetbenchError(f"cloud {options.cloud!r}: not admin, so no pinned flavor can be "
                             "created; name an existing pinned flavor (--flavor / 'flavor:')")
    groups = grouped(testbed, options)
    vm_index = {v.name: i for i, v in enumerate(testbed.vms)}
    macs = {g: {"a": [mac(run_id, vm_index[p.vms[0]]) for p in pairs],
                "b": [mac(run_id, vm_index[p.vms[1]]) for p in pairs]} for g, pairs in groups.items()}
    mode = "existing" if options.network else "provider" if admin else "tenant"
    vcpus = {len(v.cpus) for v in testbed.vms}
    params = {
        "run_id": run_id, "network_mode": mode, "network_type": testbed.network.type.value,
        "existing_network": options.network, "existing_subnet": options.subnet,
        "cidr": str(testbed.vnets[0].cidr), "vnets": len(testbed.vnets),
        "flavor": options.flavor, "vcpus": max(vcpus), "ram_mib": options.memory_mib,
        "cpu_thread_policy": options.cpu_thread_policy, "hugepages": options.hugepages,
        "cpu_policy": "dedicated" if options.pinned else "shared",
        "image": options.image, "public_key": public_key, "zone": options.zone,
        "host_a": options.host_a, "host_b": options.host_b,
        "same_host_pairs": len(groups["same_host"]), "cross_host_pairs": len(groups["cross_host"]),
        "unplaced_pairs": len(groups["unplaced"]), "vnet_b_pairs": len(groups["vnet_b"]),
        "macs": macs, "port_overrides": admin or owner or mode != "existing",
        **vm_parameters(testbed, run_id, options, fixed_ips=mode != "existing"),
    }
    params.update(_security_groups(testbed, run_id, params, bool(options.mgmt_network)))
    params.update(router_parameters(testbed, options, mode))
    if options.physical_network:
        params["physical_network"] = options.physical_network
    seg = testbed.vnets[0].segmentation_id
    if mode == "provider" and seg and testbed.network.type is NetType.VLAN:
        # a VLAN id must be the one the trunk carries; a tunnel's VNI is the cloud's to
        # allocate (the testbed's default would collide with other networks there)
        params["segmentation_id"] = seg
    qos = {n.qos for v in testbed.vms for n in v.nics if n.qos}
    if len(qos) > 1:
        raise VnetbenchError(f"{testbed.source}: the template has one QoS policy; this testbed "
                             f"asks for {len(qos)} different limits")
    if qos:
        q = next(iter(qos))
        sides = [s for s, i in (("a", 0), ("b", 1))
                 if any(testbed.vm(p.vms[i]).nics[0].qos for p in testbed.pairs)]
        params.update(qos_max_kbps=q.max_kbps, qos_max_burst_kbps=q.max_burst_kbits,
                      qos_direction=q.direction, qos_sides=",".join(sides))
    return params


def router_parameters(testbed: Testbed, options: Options, mode: str) -> dict:
    """The template's one router: its interface address on vnet A and B (the subnets'
    gateways), its gateway on the cloud's external network, SNAT. The cloud allocates
    the gateway and floating addresses on its own external subnet (``realised`` reads
    them back); the model's external network stands for that one."""
    if not testbed.routers:
        return {}
    src = testbed.source
    if len(testbed.routers) > 1:
        raise UnsupportedError(f"{src}: routers: the openstack backend builds one router (the "
                               f"template's); this testbed has {len(testbed.routers)}")
    r = testbed.routers[0]
    if r.routing != ROUTER:
        raise UnsupportedError(f"{src}: routers[0].routing: {r.routing} is seed 000's testbed on "
                               "the embedded testbed's switches; a cloud routes with its own "
                               "router (leave routing out)")
    if mode == "existing":
        raise UnsupportedError(f"{src}: routers: the stack routes between the vnets it makes; "
                               "drop --existing-network")
    out = {f"router_ip_{side}": str(r.port(v.name).ip) if any(p.vnet == v.name for p in r.ports) else ""
           for side, v in zip("ab", testbed.vnets)}
    if r.gateway is not None:
        if not options.external_network:
            raise UnsupportedError(f"{src}: routers[0].external_gateway: name the cloud's external "
                                   "network with --external-network NAME ('external_network:' in "
                                   "the Rally context; the AIO's is vnetbench-flat)")
        if len(testbed.external_hosts) > 1:
            raise UnsupportedError(f"{src}: external_hosts: the openstack backend has one outside "
                                   f"host (--outside); this testbed has {len(testbed.external_hosts)}")
        if testbed.external_hosts and not options.outside.startswith("netns:"):
            raise UnsupportedError(
                f"{src}: external_hosts: {testbed.external_hosts[0].name!r} is a machine on the "
                "cloud's external network; pass --outside netns:NAME (a namespace of this "
                "machine there; the AIO makes one: 'aio status' names it)")
        out.update(external_network=options.external_network, enable_snat=r.snat)
    return out


def _security_groups(testbed: Testbed, run_id: str, params: dict, mgmt: bool) -> dict:
    """The stack's security groups and each port's (secgroups.py): the VMs in no pair say
    theirs in vm_layout; every pair's ports share one setting (the template's)."""
    from vnetbench.testbed.openstack import secgroups
    sg = secgroups.parameters(testbed, run_id, params["port_overrides"], mgmt)
    ports = sg.pop("ports")
    for entry in params["vm_layout"]:
        secured, groups = ports[entry["name"]]
        entry.update(secured=secured, security_groups=groups)
    paired = [ports[vm] for p in stacked_pairs(testbed) for vm in p.vms]
    if len({(on, tuple(g)) for on, g in paired}) > 1:
        raise VnetbenchError(f"{testbed.source}: the template gives every pair's ports one set of "
                             "security groups; this testbed's pairs differ (give their VMs the "
                             "same security_groups, or declare them under 'vms:' without pairs)")
    secured, groups = next(iter(paired), (False, []))
    return {**sg, "pair_secured": secured, "pair_security_groups": ",".join(groups),
            "mgmt_security_groups": ",".join(sg["mgmt_security_groups"])}


def without_pairs(testbed: Testbed, names) -> Testbed:
    """TESTBED without the pairs NAMES and their VMs (their servers stay in the stack,
    unused, and go with it)."""
    import dataclasses
    drop = set(names)
    gone = {vm for p in testbed.pairs if p.name in drop for vm in p.vms}
    return dataclasses.replace(testbed, pairs=tuple(p for p in testbed.pairs if p.name not in drop),
                               vms=tuple(v for v in testbed.vms if v.name not in gone))


def unpaired(testbed: Testbed) -> list:
    """The VMs in no template-built pair (VNB::Vm each), in the testbed's order."""
    paired = {vm for p in stacked_pairs(testbed) for vm in p.vms}
    return [v for v in testbed.vms if v.name not in paired]


def vm_parameters(testbed: Testbed, run_id: str, options: Options, fixed_ips: bool) -> dict:
    """testbed.yaml's VNB::Vm group for the VMs in no pair: each on its vnet (a or b), in
    its testbed host's affinity server group (and on host_a / host_b, in the testbed's
    host order, when given), with the testbed's MAC and, on the stack's own networks,
    its IP (two vnets with the same addresses: the isolation tests)."""
    loose = unpaired(testbed)
    hosts = list(dict.fromkeys(v.host for v in loose))
    explicit = options.named_hosts
    if explicit and len(hosts) > len(explicit):
        raise VnetbenchError(f"{testbed.source}: its VMs are on {len(hosts)} hosts "
                             f"({', '.join(hosts)}); compute_hosts names {len(explicit)}: name one "
                             "per testbed host")
    vm_index = {v.name: i for i, v in enumerate(testbed.vms)}
    layout = []
    for v in loose:
        if len(v.nics) != 1:
            raise VnetbenchError(f"{testbed.source}: VM {v.name!r} has {len(v.nics)} NICs; the "
                                 "openstack backend builds VMs with one port")
        nic, h = v.nics[0], hosts.index(v.host)
        layout.append({"name": v.name, "vnet": "a" if nic.vnet == testbed.vnets[0].name else "b",
                       "host": h, "zone_host": f"{options.zone}:{explicit[h]}" if explicit else "",
                       "mac": mac(run_id, vm_index[v.name]),
                       "ip": str(nic.ip) if fixed_ips else "", "qos": nic.qos is not None,
                       "fip": testbed.floating_ip(v.name, nic.vnet) is not None})
    out = {"vm_count": len(loose), "vm_layout": layout, "host_count": len(hosts),
           "mgmt_network": options.mgmt_network}
    if options.mgmt_network and stacked_pairs(testbed):
        raise VnetbenchError(f"{testbed.source}: --mgmt-network gives VMs declared under 'vms:' a "
                             "second NIC; its pairs have none (reach pairs with "
                             "--existing-network or --gateway)")
    if loose and fixed_ips:
        # the stack's own subnets: static addresses from the config drive (the image reads
        # them there), not a DHCP agent the cloud may not run on a network without router
        out.update(enable_dhcp=False, config_drive=True)
    if len(testbed.vnets) > 1 and testbed.vnets[1].cidr != testbed.vnets[0].cidr:
        out["cidr_b"] = str(testbed.vnets[1].cidr)
    return out


def vm_outputs(testbed: Testbed, options: Options, pairs_out: list,
               vms_out: list = ()) -> dict[str, dict]:
    """{testbed VM: {server, name, port, ip, mac}} from the stack's ``pairs`` output
    (groups in GROUPS order, each in index order) and its ``vms`` output (the VMs in no
    pair, in the testbed's order)."""
    loose = unpaired(testbed)
    if len(vms_out) != len(loose) or any(got.get("name") != v.name for got, v in zip(vms_out, loose)):
        raise VnetbenchError(f"stack output 'vms' names {[g.get('name') for g in vms_out]}, the "
                             f"testbed's VMs in no pair are {[v.name for v in loose]}; the "
                             "template and the backend disagree")
    groups = grouped(testbed, options)
    expected = sum(len(v) for v in groups.values())
    if len(pairs_out) != expected:
        raise VnetbenchError(f"stack output 'pairs' has {len(pairs_out)} pairs, the testbed "
                             f"{expected}; the template and the backend disagree")
    out, k = {}, 0
    for g in GROUPS:
        for pair in groups[g]:
            got = pairs_out[k]
            out[pair.vms[0]], out[pair.vms[1]] = got["a"], got["b"]
            k += 1
    return {**out, **{v.name: got for v, got in zip(loose, vms_out)}}


def realised(testbed: Testbed, vms: dict[str, dict], cidrs: dict[str, str], mtu: int) -> Testbed:
    """TESTBED with the addresses, MACs, CIDRs (per vnet) and MTU the cloud gave: every
    later user of the testbed (battery, static ARP, reports) sees what is really there."""
    vnets = tuple(dataclasses.replace(v, cidr=ipaddress.ip_network(cidrs[v.name]))
                  for v in testbed.vnets)
    new_vms = []
    for v in testbed.vms:
        got = vms[v.name]
        nic = dataclasses.replace(v.nics[0], ip=ipaddress.ip_address(got["ip"]), mac=got["mac"])
        new_vms.append(dataclasses.replace(v, nics=(nic, *v.nics[1:])))
    network = dataclasses.replace(testbed.network, tenant_mtu=mtu)
    return dataclasses.replace(testbed, vnets=vnets, vms=tuple(new_vms), network=network)


def realised_routing(testbed: Testbed, vms: dict[str, dict], router_gateway: str,
                     external_cidr: str, external_gateway: str, outside_ip: str) -> Testbed:
    """TESTBED with the north-south addresses the cloud gave: the external subnet (its
    CIDR, its gateway), the router's gateway address, each VM's floating IP, the external
    host's address there (the outside namespace's). The battery then reaches a VM's
    floating IP (``reach``) and checks SNAT against the cloud's own addresses."""
    if not testbed.routers or testbed.routers[0].gateway is None:
        return testbed
    net = ipaddress.ip_network(external_cidr)
    fips = []
    for f in testbed.floating_ips:
        got = vms[f.vm].get("floating_ip") or ""
        if not got:
            raise VnetbenchError(f"stack output: no floating IP for {f.vm}; the template and the "
                                 "backend disagree")
        fips.append(dataclasses.replace(f, ip=ipaddress.ip_address(got)))
    router = dataclasses.replace(testbed.routers[0], gateway=ipaddress.ip_address(router_gateway))
    hosts = tuple(dataclasses.replace(h, ip=ipaddress.ip_address(outside_ip))
                  for h in testbed.external_hosts[:1])
    gateway = ipaddress.ip_address(external_gateway) if external_gateway else testbed.external.gateway
    return dataclasses.replace(testbed, routers=(router, *testbed.routers[1:]), floating_ips=tuple(fips),
                               external=dataclasses.replace(testbed.external, cidr=net, gateway=gateway),
                               external_hosts=hosts)
