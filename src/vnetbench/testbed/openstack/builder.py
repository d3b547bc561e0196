"""Bring an OpenStack testbed up: journal the stack, create it from heat-templates/, wait
with a deadline, read the outputs, verify placement and pinning through Nova, open one
SSH master per guest. A failure or interrupt unwinds (deletes the stack); a SIGKILL
leaves the journal, and 'vnetbench cleanup' deletes the stack from it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

from vnetbench import kinds, signals
from vnetbench.errors import BuildError, VnetbenchError
from vnetbench.linux import proc
from vnetbench.state import Run, new_run_id, state_root
from vnetbench.testbed.codec import to_dict
from vnetbench.testbed.deployment import unwind
from vnetbench.testbed.openstack import cloud, facts, secgroups, stack as st, verify
from vnetbench.testbed.openstack.deployment import OpenstackDeployment, mux_dir

POLL_S = 3.0


def up(testbed, cloud_name: str = "", progress=lambda msg: None, caps=None,
       **options) -> OpenstackDeployment:
    """Build TESTBED on CLOUD (a clouds.yaml entry); OPTIONS are stack.Options' fields."""
    opts = st.Options(cloud=cloud_name, clouds_yaml=options.pop("clouds_yaml", None) or cloud.config_file(),
                      **options)
    conn = cloud.connect(opts.cloud, opts.clouds_yaml)
    admin = is_admin(conn)
    found = _facts_agree(testbed, conn)
    run = Run(new_run_id(), state_root())
    run.create(status="building", name=testbed.name, backend="openstack", created=time.time(),
               builder_pid=os.getpid(), testbed=to_dict(testbed), cloud=opts.cloud,
               admin=admin, options=dataclasses.asdict(opts), cloud_facts=found)
    try:
        with signals.deferred():
            try:
                tb = _Build(run, testbed, conn, opts, admin).build(progress)
                signals.checkpoint()
            except BaseException as exc:
                unwind(run, exc, testbed.source)
    finally:
        run.unlock()
        conn.close()
    return OpenstackDeployment(run, tb)


def _facts_agree(testbed, conn) -> dict:
    """The cloud's facts (testbed.openstack.facts), once the testbed's kind is known to be
    the cloud's driver: refused before anything is made otherwise."""
    found = facts.collect(conn)
    kind = kinds.of(testbed)
    if problem := facts.mismatch(kind.name, kind.openstack_environment or "", found):
        conn.close()
        raise VnetbenchError(f"{testbed.source}: {problem}")
    return found


def is_admin(conn) -> bool:
    """Whether the token carries the admin role (placement by host name, pinning)."""
    try:
        return "admin" in (conn.session.auth.get_access(conn.session).role_names or [])
    except Exception as exc:
        raise cloud.error(exc, f"authenticating to cloud (Keystone {conn.config.auth.get('auth_url')})") from None


class _Build:
    def __init__(self, run, testbed, conn, opts: st.Options, admin: bool):
        self.run, self.tb, self.conn, self.opts, self.admin = run, testbed, conn, opts, admin
        self.notes: list[str] = []          # warnings found before the verification

    def build(self, progress) -> "st.Testbed":
        t0 = time.monotonic()
        key = self._key()
        params = st.parameters(self.tb, self.run.run_id, self.opts, self.admin, key,
                               owner=self._owns_network())
        name = st.stack_name(self.run.run_id)
        self.run.record("stack", name=name, cloud=self.opts.cloud, clouds_yaml=self.opts.clouds_yaml)
        self.run.write_meta(stack=name, security_groups=secgroups.filtering(params))
        progress(f"openstack: creating stack {name} on cloud {self.opts.cloud} "
                 f"({'admin' if self.admin else 'not admin'})")
        try:
            # Heat's API takes the tags of a new stack comma-separated (a list is a 400)
            self.conn.create_stack(name, tags=",".join(st.tags(self.run.run_id)),
                                   template_file=str(st.TEMPLATE),
                                   environment_files=[str(st.environment(self.tb))],
                                   rollback=False, wait=False,
                                   timeout=max(60, int(self.opts.timeout_s)), **params)
        except Exception as exc:
            raise cloud.error(exc, f"creating stack {name}") from None
        stack = wait_created(self.conn, name, self.opts.timeout_s)
        progress(f"openstack: stack {name} complete ({time.monotonic() - t0:.0f} s)")
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs or []}
        vms = st.vm_outputs(self.tb, self.opts, outputs.get("pairs") or [], outputs.get("vms") or [])
        servers = self._servers(vms)
        vms, servers = self._fallback(vms, servers)
        tb = st.realised(self.tb, vms, *self._network(vms, outputs.get("networks") or {}))
        tb = self._routing(tb, vms, outputs.get("router") or {})
        tb = self._verify(tb, servers)
        self.run.write_meta(testbed=to_dict(tb), servers={v: s["server"] for v, s in vms.items()},
                            mgmt={v: s["mgmt_ip"] for v, s in vms.items() if s.get("mgmt_ip")},
                            ports={v: s["port"] for v, s in vms.items()},
                            flow_flush="not available on a cloud: 'deferred' echoes are spaced "
                                       "by gap_s only")
        self._channels(tb, vms, progress, t0)
        self.run.write_meta(status="up", up_seconds=time.monotonic() - t0)
        return tb

    def _key(self) -> str:
        path = self.run.dir / "guest-key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                        f"vnetbench-{self.run.run_id}", "-f", str(path)], check=True, capture_output=True)
        return path.with_suffix(".pub").read_text().strip()

    def _owns_network(self) -> bool:
        """Whether the project owns the existing network (without admin, Neutron lets only
        the owner fix MACs or turn port security off on it); else a warning says so."""
        if self.admin or not self.opts.network:
            return True
        try:
            net = self.conn.network.find_network(self.opts.network, ignore_missing=False)
        except Exception as exc:
            raise cloud.error(exc, f"network {self.opts.network}") from None
        if net.project_id == self.conn.current_project_id:
            return True
        self.notes.append(f"network {self.opts.network} is not the project's: its ports keep "
                          "Neutron's MACs and port security (the project's security groups "
                          "must admit SSH and the tests' traffic)")
        return False

    def _servers(self, vms) -> dict[str, dict]:
        out = {}
        for vm, got in vms.items():
            try:
                s = self.conn.compute.get_server(got["server"])
            except Exception as exc:
                raise cloud.error(exc, f"server {got.get('name')} ({got['server']})") from None
            out[vm] = {"host": s.compute_host, "host_id": s.host_id, "id": s.id}
        return out

    def _fallback(self, vms, servers):
        """Non-admin cross-host without server groups: re-pair the unplaced VMs so each
        pair spans two hostIds (Shaker's way); too few distinct hosts is an error."""
        pairs = st.grouped(self.tb, self.opts)["unplaced"]
        if not pairs:
            return vms, servers
        names = [vm for p in pairs for vm in p.vms]
        found = verify.distinct_host_pairs([(vm, servers[vm]["host_id"]) for vm in names], len(pairs))
        if len(found) < len(pairs):
            raise BuildError(f"cloud {self.opts.cloud}: only {len(found)} of {len(pairs)} "
                             "cross-host pairs landed on distinct hosts without server groups; "
                             "use server groups (drop no_server_groups) or more compute nodes")
        new_vms, new_servers = dict(vms), dict(servers)
        for p, (a, b) in zip(pairs, found):
            for mine, theirs in zip(p.vms, (a, b)):
                new_vms[mine], new_servers[mine] = vms[theirs], servers[theirs]
        return new_vms, new_servers

    def _network(self, vms, networks: dict) -> tuple[dict[str, str], int]:
        """Per vnet, the CIDR of the subnet its first VM's port is on (a vnet without VMs,
        e.g. a routed pair's other side: its network's subnet, the stack's ``networks``
        output); the smallest MTU of those networks."""
        cidrs, mtus = {}, []
        for side, vnet in zip("ab", self.tb.vnets):
            vm = next((v.name for v in self.tb.vms if v.nics[0].vnet == vnet.name), None)
            try:
                if vm is None:
                    net = self.conn.network.get_network(networks[side])
                    subnet = self.conn.network.get_subnet(net.subnet_ids[0])
                else:
                    port = self.conn.network.get_port(vms[vm]["port"])
                    subnet = self.conn.network.get_subnet(port.fixed_ips[0]["subnet_id"])
                    net = self.conn.network.get_network(port.network_id)
            except Exception as exc:
                what = f"network {networks.get(side)} of vnet {vnet.name}" if vm is None else \
                    f"port {vms[vm]['port']} of {vm} and its network"
                raise cloud.error(exc, what) from None
            cidrs[vnet.name] = subnet.cidr
            mtus.append(net.mtu or self.tb.network.tenant_mtu)
        return cidrs, min(mtus)

    def _routing(self, tb, vms, router: dict):
        """TB with the cloud's north-south addresses (``stack.realised_routing``): its
        external subnet, the router's gateway, the floating IPs, the outside host's."""
        if not tb.routers or tb.routers[0].gateway is None:
            return tb
        name = self.opts.external_network
        try:
            net = self.conn.network.find_network(name, ignore_missing=False)
            subnet = next(iter(self.conn.network.subnets(network_id=net.id, ip_version=4)))
        except StopIteration:
            raise BuildError(f"external network {name}: no IPv4 subnet") from None
        except Exception as exc:
            raise cloud.error(exc, f"external network {name}") from None
        outside = outside_address(self.opts.outside, subnet.cidr) if tb.external_hosts else ""
        self.run.write_meta(router=router.get("id"))
        return st.realised_routing(tb, vms, router.get("gateway_ip") or "", subnet.cidr,
                                   subnet.gateway_ip or "", outside)

    def _verify(self, tb, servers):
        """TB as verified: with ``drop_misplaced``, without the pairs Nova placed wrong
        (named in the run's meta, ``dropped_pairs``); any other problem fails the build."""
        # a pair with the outside host: where the router runs is the cloud's choice
        pairs = [(p.name, p.placement, *p.vms) for p in tb.pairs
                 if not any(tb.external_host(v) for v in p.vms)]
        place = verify.placement(pairs, servers, self.admin)
        dropped = dict(place.misplaced) if self.opts.drop_misplaced else {}
        if dropped:
            if len(dropped) == len(tb.pairs):
                raise BuildError(f"cloud {self.opts.cloud}: every pair landed where its placement "
                                 "says it must not: " + "; ".join(dropped.values()))
            place.problems = [p for p in place.problems if p not in dropped.values()]
            place.warnings += [f"{why}: left out (best_effort)" for why in dropped.values()]
            tb = st.without_pairs(tb, dropped)
            servers = {vm: s for vm, s in servers.items() if vm in {v.name for v in tb.vms}}
        loose = [(v.name, v.host) for v in st.unpaired(tb)]
        groups = verify.host_groups(loose, servers, self.admin, self.opts.named_hosts)
        place.facts.update(groups.facts)
        place.problems += groups.problems
        place.warnings += groups.warnings
        if self.opts.pinned:
            topo = {vm: topology(self.conn, s["id"]) for vm, s in servers.items()}
            hosts = {vm: s["host"] or s["host_id"] for vm, s in servers.items()}
            pins = verify.pinning(topo, {v.name: len(v.cpus) for v in tb.vms}, hosts, self.admin)
        else:
            pins = verify.unpinned()
        warnings = self.notes + place.warnings + pins.warnings
        self.run.write_meta(placement=place.facts, pinning=pins.facts, warnings=warnings,
                            dropped_pairs=dropped)
        for w in warnings:
            print(f"vnetbench: warning: {w}", file=sys.stderr, flush=True)
        problems = place.problems + pins.problems
        if problems:
            raise BuildError(f"cloud {self.opts.cloud}: " + "; ".join(problems))
        return tb

    def _channels(self, tb, vms, progress, t0) -> None:
        mux = mux_dir(self.run.run_id)
        self.run.record("muxdir", path=str(mux))
        mux.mkdir(mode=0o700, exist_ok=True)
        dep = OpenstackDeployment(self.run, tb)
        deadline = time.monotonic() + self.opts.ready_timeout_s
        for v in tb.vms:             # one master connection per guest, owned by the run
            master = _open(dep.ssh(v.name), deadline, self.conn, vms[v.name])
            self.run.record("process", pid=master.pid, starttime=proc.starttime(master.pid),
                            vm=v.name, argv=["ssh", "master"])
        progress(f"openstack: {len(tb.vms)} guests answer over SSH ({time.monotonic() - t0:.0f} s)")


def outside_address(outside: str, cidr: str) -> str:
    """The address of the outside host (``netns:NAME``) on the external subnet CIDR."""
    import ipaddress
    ns = outside.removeprefix("netns:")
    try:
        out = subprocess.run(["ip", "-n", ns, "-j", "-4", "addr", "show"], capture_output=True,
                             text=True, timeout=10, check=True).stdout
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"--outside {outside}: no such network namespace here ({exc})") from None
    import json
    net = ipaddress.ip_network(cidr)
    for link in json.loads(out or "[]"):
        for a in link.get("addr_info", []):
            if ipaddress.ip_address(a["local"]) in net:
                return a["local"]
    raise BuildError(f"--outside {outside}: no address on the external subnet {cidr}; put the "
                     "namespace on the external network")


def _open(ssh, deadline: float, conn, got: dict):
    """The SSH master once the guest's sshd answers (guests boot after ACTIVE)."""
    last = "no attempt"
    while time.monotonic() < deadline:
        signals.checkpoint()
        try:
            return ssh.open(timeout_s=max(5.0, min(30.0, deadline - time.monotonic())))
        except VnetbenchError as exc:
            last = str(exc)
        time.sleep(2)
    try:
        console = conn.compute.get_server_console_output(got["server"], length=5)
        tail = (console.get("output") or "").strip().splitlines()[-1:] or ["empty"]
    except Exception:
        tail = ["unavailable"]
    raise BuildError(f"server {got.get('name')} ({got['server']}) at {ssh.address}: no SSH "
                     f"before the deadline ({last}); console: {tail[0][:120]}; check that the "
                     "runner reaches the network (or set a gateway) and the image's key source")


def wait_created(conn, name: str, timeout_s: float, sleep=time.sleep, clock=time.monotonic):
    """The stack once CREATE_COMPLETE; a failure names the failed resources and why, a
    time-out what was still in progress."""
    deadline = clock() + timeout_s
    while True:
        try:
            stack = conn.orchestration.find_stack(name, ignore_missing=False)
        except Exception as exc:
            raise cloud.error(exc, f"stack {name}") from None
        if stack.status == "CREATE_COMPLETE":
            return stack
        if stack.status != "CREATE_IN_PROGRESS":
            raise BuildError(f"stack {name}: {stack.status}: {failed_resources(conn, stack)}")
        if clock() > deadline:
            busy = resources(conn, stack, "IN_PROGRESS")
            raise BuildError(f"stack {name} not complete after {timeout_s:.0f} s (still in "
                             f"progress: {busy or 'nothing reported'}); raise the timeout "
                             "(--timeout) or check nova-compute / heat-engine")
        signals.checkpoint()
        sleep(POLL_S)


def resources(conn, stack, status_part: str) -> str:
    try:
        found = [r for r in conn.orchestration.resources(stack, nested_depth=3)
                 if status_part in (r.status or "")]
    except Exception:
        return ""
    return ", ".join(f"{r.name} ({r.resource_type})" + (f": {(r.status_reason or '')[:160]}"
                                                        if status_part == "FAILED" else "")
                     for r in found)


def failed_resources(conn, stack) -> str:
    return resources(conn, stack, "FAILED") or (stack.status_reason or "no reason given")[:300]


def topology(conn, server_id: str) -> dict | None:
    """The server topology API reply (microversion 2.78), None where the cloud lacks it."""
    try:
        reply = conn.compute.get(f"/servers/{server_id}/topology", microversion="2.78",
                                 raise_exc=False)
    except Exception as exc:
        raise cloud.error(exc, f"topology of server {server_id}") from None
    if reply.status_code in (404, 406):
        return None
    if reply.status_code >= 400:
        raise cloud.CloudError(f"topology of server {server_id}: HTTP {reply.status_code}: "
                               f"{reply.text[:200]}; check the compute API")
    return reply.json()
