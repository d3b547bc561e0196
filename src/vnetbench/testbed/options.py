"""The backend options a user gives on the command line (``testbed up``, ``functional``
and its pytest plugin): one definition of each, and the backend's build keywords made
from them (``deployment.build(backend, testbed, **options)``)."""

from __future__ import annotations

from pathlib import Path

from vnetbench.errors import VnetbenchError

BACKENDS = ("netns", "libvirt", "openstack")
DEFAULT_IMAGE_DIR = "vm-images/build"
DEFAULT_GLANCE_IMAGE = "vnetbench-guest"

# (flags, argparse keywords): every backend option, in the order --help shows them
ARGUMENTS = (
    (("--backend",), dict(choices=BACKENDS, default="netns",
                          help="VMs as namespaces (default), as QEMU guests through libvirt, or as "
                               "Nova servers of a Heat stack (heat-templates/)")),
    (("--image",), dict(help="libvirt: directory with vmlinuz and initrd.img (default "
                             f"{DEFAULT_IMAGE_DIR}, make image); openstack: Glance image (default "
                             f"{DEFAULT_GLANCE_IMAGE})")),
    (("--memory",), dict(type=int, default=256, help="libvirt, openstack: MiB per guest")),
    (("--libvirt-uri",), dict(action="append", metavar="[HOST=]URI",
                              help="libvirt: the hypervisor of every host, or of HOST (repeatable; "
                                   "default qemu:///system), e.g. qemu+ssh://root@localhost/system; "
                                   "a qemu+ssh:// URI to another machine puts the testbed on that "
                                   "KVM host's own OVS/Linux bridge")),
    (("--cloud",), dict(help="openstack: the cloud's name in clouds.yaml")),
    (("--existing-network",), dict(help="openstack: put the VMs on this existing network "
                                         "(default: the stack makes its vnets: provider networks "
                                         "as admin, tenant ones otherwise)")),
    (("--physical-network",), dict(help="openstack: the physical network of flat and VLAN "
                                        "provider networks (default: the SDN environment file's, "
                                        "physnet1)")),
    (("--flavor",), dict(help="openstack: an existing (pinned) flavor (default: the stack makes "
                              "a pinned one, admin only)")),
    (("--external-network",), dict(help="openstack: the cloud's external network, for a testbed's "
                                         "router gateway and floating IPs (the AIO's: vnetbench-flat)")),
    (("--outside",), dict(metavar="netns:NAME",
                          help="openstack: the testbed's external host, a network namespace of "
                               "this machine on the external network (the AIO makes one: "
                               "'aio status' names it)")),
    (("--gateway",), dict(help="openstack: SSH jump host [user@]host[:port] to the VMs")),
    (("--mgmt-network",), dict(help="openstack: a network this machine reaches; each VM of the "
                                    "testbed's 'vms:' gets a second NIC there for SSH while its "
                                    "first stays on its vnet (the functional suite's testbeds)")),
    (("--unpinned",), dict(action="store_true",
                           help="openstack: guests without CPU pinning (hw:cpu_policy=shared, or an "
                                "unpinned --flavor): the functional suite's testbeds on a cloud "
                                "with fewer dedicated CPUs than guests; recorded, and warned")),
    (("--prometheus",), dict(help="openstack: URL of the Prometheus that scrapes the collectors "
                                  "on the compute nodes (host-side CPU)")),
    (("--no-server-groups",), dict(action="store_true",
                                   help="openstack: cross-host pairs without anti-affinity server "
                                        "groups: boot, then pair VMs of distinct hostIds (Shaker's "
                                        "fallback for clouds whose policy refuses server groups)")),
    (("--timeout",), dict(type=float, default=900,
                          help="openstack: seconds for the stack to complete")),
)


def add_arguments(add) -> None:
    """Declare every backend option with ``add`` (argparse's add_argument, pytest's addoption)."""
    for flags, kwargs in ARGUMENTS:
        add(*flags, **kwargs)


def dest(flags) -> str:
    return flags[0].lstrip("-").replace("-", "_")


def forward(ns) -> list[str]:
    """The options of ``ns`` that differ from their defaults, as command-line arguments
    (``vnetbench functional`` hands them to its pytest run)."""
    out = []
    for flags, kwargs in ARGUMENTS:
        value = getattr(ns, dest(flags), None)
        if kwargs.get("action") == "store_true":
            out += [flags[0]] if value else []
        elif value is not None and value != kwargs.get("default"):
            out += [f"{flags[0]}={v}" for v in (value if isinstance(value, list) else [value])]
    return out


def libvirt_uris(items):
    """--libvirt-uri values: none (local), one URI for every host, or HOST=URI each."""
    if not items:
        return None
    named = {}
    for item in items:
        host, sep, uri = item.partition("=")
        if not sep or "://" in host or "://" not in uri:
            if len(items) > 1:
                raise VnetbenchError(f"--libvirt-uri {item!r}: with several, write each as "
                                     "HOST=URI, e.g. h2=qemu+ssh://root@h2/system")
            return item
        named[host] = uri
    return named


def build_options(ns, command: str = "testbed up") -> dict:
    """The keywords of ``deployment.build`` for ``ns.backend`` from the options in ``ns``;
    what is missing (an image, a cloud's name) is refused here, before anything is built."""
    if ns.backend == "libvirt":
        from vnetbench.image.build import boot_files
        image_dir = Path(ns.image or DEFAULT_IMAGE_DIR)
        boot_files(image_dir)
        return {"image_dir": image_dir, "memory_mib": ns.memory, "uris": libvirt_uris(ns.libvirt_uri)}
    if ns.backend == "openstack":
        if not ns.cloud:
            raise VnetbenchError(f"{command} --backend openstack: name the cloud with --cloud NAME "
                                 "(an entry of your clouds.yaml; OS_CLIENT_CONFIG_FILE points at it)")
        return {"cloud_name": ns.cloud, "image": ns.image or DEFAULT_GLANCE_IMAGE,
                "memory_mib": ns.memory, "network": ns.existing_network or "",
                "flavor": ns.flavor or "", "gateway": ns.gateway or "",
                "physical_network": ns.physical_network or "",
                "mgmt_network": ns.mgmt_network or "",
                "external_network": ns.external_network or "", "outside": ns.outside or "",
                "prometheus": ns.prometheus or "", "timeout_s": ns.timeout,
                "no_server_groups": bool(ns.no_server_groups), "pinned": not ns.unpinned}
    return {}
