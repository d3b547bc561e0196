"""``vnetbench_testbed``: build the testbed before the scenario, tear it down after
(also when the scenario fails). Workers get plain data and re-attach by run id.

Workloads of one task that name the same ``share`` key measure one testbed, as the seed
measured every test on the same VMs: the first builds it, each leaves it up while it says
``keep``, the first that does not tears it down (and so does the end of the Rally process,
for a task that stopped before that workload)."""

from __future__ import annotations

import atexit
import json
import sys

from rally import consts
from rally.task import context

from vnetbench import kinds
from vnetbench.state import state_root
from vnetbench.testbed.model import PATHS   # what lies between a pair's two ends (Pair.path)
# a column's ``routing``: one of seed 000's inter-VLAN testbeds instead of a pair per placement
from vnetbench.testbed.model import SWITCH_ROUTINGS as ROUTINGS

PLACEMENTS = ("same-host", "cross-host")


def testbed_yaml(vswitch: str, network: str, underlay_mtu: int | None, placements,
                 security_groups: bool = False, path: str | list = "l2", routing: str = "") -> str:
    """The context's testbed: a pair per placement on one vnet; with ``path``
    l3-east-west, the pairs' second VMs on a second vnet, a router on h1 between them; a
    list of paths: a pair per placement and path (a seed's bridge beside its router);
    with ``routing``, seed 000's four PCs instead (``seed000_yaml``)."""
    net = f"{{type: {network}" + (f", underlay_mtu: {underlay_mtu}" if underlay_mtu else "") + "}"
    if routing:
        return seed000_yaml(vswitch, net, routing, placements, path, security_groups)
    paths = [path] if isinstance(path, str) else list(path)
    routed = any(p != "l2" for p in paths)
    pairs = "\n".join(f"  - {{placement: {p}" + (f", path: {pa}}}" if pa != "l2" else "}")
                       for pa in paths for p in placements)
    # on: every port in Neutron's default group (the pairs reach each other through it);
    # a floating IP is reached from outside only where a rule admits the external network
    sg = "security_groups: []\n" if security_groups else ""
    if security_groups and "floating-ip" in paths:
        from vnetbench.testbed.loader import DEFAULT_EXTERNAL
        sg = ("security_groups:\n  - name: default\n    rules:\n"
              "      - {direction: ingress, remote_group: default}\n"
              f"      - {{direction: ingress, remote_ip_prefix: {DEFAULT_EXTERNAL}}}   # the external network\n")
    gateway = ", external_gateway: true" if {"north-south", "floating-ip"} & set(paths) else ""
    l3 = ("vnets: [{name: vnet1}, {name: vnet2}]\n"
          f"routers: [{{name: r1, host: h1, vnets: [vnet1, vnet2]{gateway}}}]\n" if routed else "")
    return f"vswitch: {vswitch}\nnetwork: {net}\n{sg}{l3}pairs:\n{pairs}\n"


def seed000_yaml(vswitch: str, net: str, routing: str, placements, path, security_groups: bool) -> str:
    """Seed 000's testbed (examples/seed000-svi.yaml, -stick.yaml): four PCs on one switch,
    PC1 and PC2 in VLAN 10, PC3 and PC4 in VLAN 20, routed by an SVI per VLAN or a router on
    a trunk; its two measured pairs, inside VLAN 10 (PC1-PC2) and across (PC1-PC3, path
    l3-east-west), are both: the seed measured both on each testbed. One switch: same-host."""
    paths = {path} if isinstance(path, str) else set(path)
    if routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r} is not one of {', '.join(ROUTINGS)}")
    if not paths <= {"l2", "l3-east-west"}:
        raise ValueError(f"routing {routing}: seed 000's routers are east-west only, path "
                         f"{sorted(paths - {'l2', 'l3-east-west'})} cannot be measured on them")
    if "same-host" not in placements:
        raise ValueError(f"routing {routing}: seed 000's testbed is four PCs on one switch: its pairs "
                         f"are same-host, and placements {list(placements)} has none")
    sg = "security_groups: []\n" if security_groups else ""
    return (f"vswitch: {vswitch}\nnetwork: {net}\n{sg}hosts: [{{name: sw}}]\n"
            "vnets: [{name: vlan10, segmentation_id: 10}, {name: vlan20, segmentation_id: 20}]\n"
            "vms:\n" + "".join(f"  - {{name: pc{i}, host: sw, vnets: [vlan{10 * (1 + (i > 2))}]}}\n"
                               for i in range(1, 5)) +
            f"routers: [{{name: {routing}, host: sw, vnets: [vlan10, vlan20], routing: {routing}}}]\n"
            "pairs:\n  - {name: intra, placement: same-host, vms: [pc1, pc2]}\n"
            "  - {name: inter, placement: same-host, vms: [pc1, pc3]}\n")


def _backend_options(cfg) -> dict:
    backend = cfg.get("backend", "netns")
    if backend == "openstack":
        best_effort = bool(cfg.get("scale")) and _best_effort(cfg["scale"].get("accommodation"))
        return {"cloud_name": cfg.get("cloud") or "", "image": cfg.get("image") or "vnetbench-guest",
                "memory_mib": cfg.get("memory_mib", 256),
                "network": cfg.get("existing_network") or "",
                **({"pinned": False} if cfg.get("unpinned") else {}),
                **({"drop_misplaced": True} if best_effort else {}),
                **{k: cfg[k] for k in OPENSTACK_KEYS if cfg.get(k)}}
    if backend != "libvirt":
        return {}
    from pathlib import Path
    repo = Path(__file__).resolve().parents[3]
    return {"image_dir": Path(cfg.get("image") or repo / "vm-images" / "build"),
            "memory_mib": cfg.get("memory_mib", 256), "uris": cfg.get("libvirt_uri")}


def _best_effort(accommodation) -> bool:
    """Shaker's best_effort among the accommodation words: on a cloud, a pair that landed
    wrong is then left out and named (``drop_misplaced``) instead of failing the build."""
    from vnetbench.scale import plan
    return plan.accommodation(accommodation).best_effort


# context key -> the openstack backend's option of the same name (stack.Options)
OPENSTACK_KEYS = ("flavor", "gateway", "prometheus", "cpu_thread_policy", "no_server_groups",
                  "physical_network", "compute_hosts", "mgmt_network", "external_network", "outside")


@context.configure(name="vnetbench_testbed", platform="default", order=100)
class VnetbenchTestbed(context.Context):
    """An embedded testbed (network namespaces) from a file or from a configuration."""

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "additionalProperties": False,
        "properties": {
            "file": {"type": "string", "description": "testbed YAML; overrides the keys below"},
            "vswitch": {"enum": list(kinds.names())},
            "network": {"enum": ["flat", "vlan", "vxlan", "gre", "geneve"]},
            "underlay_mtu": {"type": "integer", "minimum": 576, "maximum": 65535},
            "placements": {"type": "array", "minItems": 1, "uniqueItems": True,
                           "items": {"enum": list(PLACEMENTS)}},
            "results": {"type": "string", "description": "JSON-lines file for result records"},
            "monitor": {"type": "string", "description": "id of a running 'vnetbench monitor' "
                        "to attach collectors to and push results to (default: $VNETBENCH_MONITOR)"},
            "skip_unsupported": {"type": "boolean",
                                 "description": "record N/A (with the missing feature) instead of failing"},
            "backend": {"enum": ["netns", "libvirt", "openstack"],
                        "description": "netns: VMs are namespaces; libvirt: QEMU guests from the "
                                       "project's image on the same emulated hosts; openstack: "
                                       "Nova servers of a Heat stack on the cloud named by 'cloud'"},
            "image": {"type": "string", "description": "libvirt: directory with vmlinuz and "
                      "initrd.img (default vm-images/build, made by 'make image'); openstack: "
                      "Glance image (default vnetbench-guest)"},
            "memory_mib": {"type": "integer", "minimum": 128, "maximum": 65536,
                           "description": "libvirt, openstack: memory per guest"},
            "cloud": {"type": "string", "description": "openstack: the cloud's name in clouds.yaml"},
            "existing_network": {"type": "string", "description": "openstack: an existing "
                                 "network for the VMs (default: the stack makes its own)"},
            "physical_network": {"type": "string", "description": "openstack: the physical "
                                 "network of flat and VLAN provider networks (default: the SDN "
                                 "environment file's)"},
            "flavor": {"type": "string", "description": "openstack: an existing pinned flavor "
                       "(default: the stack makes one, admin only)"},
            "cpu_thread_policy": {"enum": ["prefer", "isolate"],
                                  "description": "openstack: of the pinned flavor the stack makes"},
            "gateway": {"type": "string", "description": "openstack: SSH jump host to the VMs"},
            "mgmt_network": {"type": "string", "description": "openstack: a network the runner "
                             "reaches; each VM gets a second NIC there for SSH (routed paths: "
                             "their vnets are the stack's own)"},
            "external_network": {"type": "string", "description": "openstack: the cloud's "
                                 "external network (routers' gateways, floating IPs)"},
            "outside": {"type": "string", "pattern": "^netns:.+",
                        "description": "openstack: the external host, netns:NAME (a namespace of "
                                       "this machine on the external network)"},
            "unpinned": {"type": "boolean", "description": "openstack: guests with shared vCPUs "
                         "(a cloud with fewer dedicated CPUs than the testbed's guests)"},
            "compute_hosts": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "description": "openstack (admin): the compute host of each testbed "
                                             "host, in order (availability_zone zone:host, Shaker's "
                                             "way); default: the scheduler, with a server group per "
                                             "testbed host"},
            "no_server_groups": {"type": "boolean", "description": "openstack: cross-host pairs "
                                 "by Shaker's hostId fallback instead of anti-affinity groups"},
            "prometheus": {"type": "string", "description": "openstack: URL of the Prometheus "
                           "scraping the collectors on the compute nodes"},
            "libvirt_uri": {"description": "libvirt: the hypervisor URI of every host (a string) "
                            "or of some ({host: URI}); default qemu:///system",
                            "oneOf": [{"type": "string"}, {"type": "object",
                                                           "additionalProperties": {"type": "string"}}]},
            "scale": {"type": "object", "additionalProperties": False,
                      "description": "a testbed computed for many pairs (vnetbench.scale.plan): "
                                     "Shaker's accommodation words, hosts, density",
                      "properties": {"accommodation": {"type": ["array", "object", "string"]},
                                     "hosts": {"type": "integer", "minimum": 1, "maximum": 512},
                                     "density": {"type": "integer", "minimum": 1, "maximum": 512}}},
            "path": {"oneOf": [{"enum": list(PATHS)},
                               {"type": "array", "minItems": 1, "uniqueItems": True,
                                "items": {"enum": list(PATHS)}}],
                     "description": "l2 (default): each pair on one vnet; l3-east-west: its second "
                     "VM on a second vnet, a router on h1 between them; north-south: a VM to an "
                     "external host through the router's SNAT (docs/routers.md); a list: a pair "
                     "per placement and path in one testbed"},
            "routing": {"enum": list(ROUTINGS),
                        "description": "seed 000's testbed instead of a pair per placement: four PCs "
                        "on one switch in VLANs 10 and 20, routed by an SVI per VLAN on the switch "
                        "(svi, its L3 switch) or by a router on a trunk (stick); its pairs PC1-PC2 "
                        "(l2) and PC1-PC3 (l3-east-west), same-host (docs/routers.md)"},
            "security_groups": {"type": "boolean", "description": "every port with port security "
                                "on, in Neutron's default group (egress anywhere, ingress from the "
                                "group): the kind's firewall in every figure; default off"},
            "share": {"type": "string", "description": "workloads of the task with this key "
                      "and the same configuration measure one testbed (the first builds it); "
                      "every family still starts with settle()"},
            "keep": {"type": "boolean", "description": "with share: leave the testbed up for "
                     "the next workload (the last one of the key says false)"},
            "run": {"type": "string", "description": "measure the running testbed of this run "
                    "(id or name, in $VNETBENCH_STATE_DIR) instead of building one; it is left up "
                    "(slow-booting guests: boot once, run every task file)"},
        },
    }
    DEFAULT_CONFIG = {"vswitch": kinds.DEFAULT, "network": "vxlan", "placements": list(PLACEMENTS),
                      "results": "results/records.jsonl", "skip_unsupported": True}

    def setup(self):
        _unwind_on_interrupts()
        if _INTERRUPTED:                # the task was interrupted: no further workload
            raise KeyboardInterrupt
        cfg = self.config
        if cfg.get("run"):
            return self._borrow(cfg)
        shared = _SHARED.get(cfg.get("share"))
        if shared and shared[0] == _fingerprint(cfg):
            self.context["vnetbench"] = dict(shared[1])
            return
        if shared:                  # the key's configuration changed: a testbed of its own
            _down(_SHARED.pop(cfg["share"])[1])
        self._build(cfg)
        info = self.context["vnetbench"]
        if cfg.get("share") and "run_id" in info:
            _SHARED[cfg["share"]] = (_fingerprint(cfg), dict(info))

    def _build(self, cfg):
        import os

        from vnetbench.monitor import server, watch
        from vnetbench.testbed import capabilities
        from vnetbench.testbed.loader import load, loads
        cpus = sorted(os.sched_getaffinity(0))
        if cfg.get("file"):
            tb = load(cfg["file"], online_cpus=cpus)
        elif cfg.get("scale"):
            import yaml

            from vnetbench.scale import plan
            sc = cfg["scale"]
            acc = plan.accommodation(sc.get("accommodation"), hosts=sc.get("hosts"),
                                     density=sc.get("density"))
            tb = loads(yaml.safe_dump(plan.testbed(acc, cfg["vswitch"], cfg["network"], cpus,
                                                   name=f"scale-{cfg['vswitch']}-{cfg['network']}")),
                       source=f"<rally scale {cfg['vswitch']}-{cfg['network']}>", online_cpus=cpus)
        else:
            tb = loads(testbed_yaml(cfg["vswitch"], cfg["network"], cfg.get("underlay_mtu"),
                                    cfg["placements"], cfg.get("security_groups", False),
                                    cfg.get("path", "l2"), cfg.get("routing", "")),
                       source=f"<rally {cfg['vswitch']}-{cfg['network']}" +
                       (f" {cfg['routing']}>" if cfg.get("routing") else ">"), online_cpus=cpus)
        caps = capabilities.probe()
        # a cloud's vSwitch is the cloud's: this machine's kernel does not limit it
        reason = None if cfg.get("backend") == "openstack" else \
            (caps.why_not(tb.vswitch.kind, tb.network.type, tb.vswitch.datapath)
             or caps.why_not_security_groups(tb) or caps.why_not_routers(tb))
        if reason and caps.root and cfg["skip_unsupported"]:
            self.context["vnetbench"] = {"unsupported": reason, "results": cfg["results"],
                                         "vswitch": tb.vswitch.kind.value,
                                         "network": tb.network.type.value,
                                         **({"routing": cfg["routing"]} if cfg.get("routing") else {})}
            return
        monitor = cfg.get("monitor") or os.environ.get("VNETBENCH_MONITOR")
        mon = server.attach(monitor) if monitor else None
        dep = watch.up(tb, mon, backend=cfg.get("backend", "netns"), caps=caps,
                       **_backend_options(cfg))
        self.context["vnetbench"] = {"run_id": dep.run_id, "state_dir": str(state_root()),
                                     "results": cfg["results"], "testbed": tb.name,
                                     "monitor": mon and mon.id}

    def _borrow(self, cfg):
        """An existing testbed: measured as it is, never torn down by this context."""
        from vnetbench.testbed import deployment
        dep = deployment.attach(cfg["run"])
        # the placements asked for still hold: the borrowed testbed's other pairs are left out
        self.context["vnetbench"] = {"run_id": dep.run_id, "state_dir": str(state_root()),
                                     "results": cfg["results"], "testbed": dep.testbed.name,
                                     "monitor": dep.run.meta().get("monitor"), "borrowed": True,
                                     "placements": list(cfg.get("placements") or PLACEMENTS)}

    def cleanup(self):
        info = self.context.get("vnetbench")
        if not info or "run_id" not in info or info.get("borrowed"):
            return
        share = self.config.get("share")
        # an interrupted task (Ctrl-C, SIGTERM) unwinds now: no next workload will come
        interrupted = isinstance(sys.exc_info()[1], KeyboardInterrupt)
        if share in _SHARED and self.config.get("keep") and not interrupted:
            _settle(info)                      # the next workload's now
            return
        _SHARED.pop(share, None)
        if interrupted:
            _down(info, settle=False)          # no scrape to wait for: the task is over
        else:
            _down(info)


#: signals received by this (Rally) process; a workload that starts after one refuses to
_INTERRUPTED: list = []


def _unwind_on_interrupts() -> None:
    """SIGTERM to Rally (``timeout``, CI runners and service managers send it to the main
    process only) unwinds the task as Ctrl-C does: by default it would end the process at
    once, every testbed left up. Both are noted too: an interrupt that Rally's bookkeeping
    lost (seen once at a workload's end: the task ran on) is raised again by the next
    workload's setup, so the task stops there. Only handlers nobody else chose, on the main
    thread."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        if signal.getsignal(sig) is default:
            signal.signal(sig, _interrupt)


def _interrupt(signum, frame):
    """The first interrupt unwinds; a later one is only noted, so it cannot cut the
    unwinding (the shared testbed's teardown at exit) short. It comes unasked, too: a
    parent killed outright delivers the parent-death signal once per thread of it that
    exits after the one that started Rally (the kernel reparents Rally to each in turn)."""
    from vnetbench import signals
    _INTERRUPTED.append(signum)
    if len(_INTERRUPTED) == 1:
        signals.handler(signum, frame)


#: share key -> (configuration fingerprint, context info) of a testbed left up
_SHARED: dict = {}


def _fingerprint(cfg) -> str:
    """What decides the testbed: the configuration but the sharing flags."""
    return json.dumps({k: v for k, v in cfg.items() if k != "keep"}, sort_keys=True, default=str)


def _settle(info):
    """The testbed of INFO once its vSwitch has caught up (``watch.settle``)."""
    from vnetbench.monitor import watch
    from vnetbench.testbed import deployment
    dep = deployment.attach(info["run_id"])
    watch.settle(dep)
    return dep


def _down(info, settle: bool = True) -> None:
    if settle:
        dep = _settle(info)
    else:
        from vnetbench.testbed import deployment
        dep = deployment.attach(info["run_id"])
    errors = dep.down()
    if errors:
        raise RuntimeError(f"teardown of run {info['run_id']} incomplete: {errors}; "
                           f"run 'vnetbench cleanup --run {info['run_id']}'")


def _down_shared() -> None:
    """A task that ended before a shared testbed's last workload (an interrupt between two
    workloads): down with the process."""
    while _SHARED:
        _, (_, info) = _SHARED.popitem()
        try:
            _down(info)
        except Exception as e:          # the others still go down; cleanup finds the rest
            print(f"vnetbench: {e}")


def _at_exit(func) -> None:
    """FUNC at the interpreter's exit, before concurrent.futures refuses new work (the
    teardown runs a thread pool; a plain atexit hook comes after that refusal): threading's
    exit hooks run in reverse order of registration, so ours is registered after its."""
    import concurrent.futures.thread  # noqa: F401  (registers its exit hook first)
    import threading
    register = getattr(threading, "_register_atexit", None)
    (register or atexit.register)(func)


_at_exit(_down_shared)
