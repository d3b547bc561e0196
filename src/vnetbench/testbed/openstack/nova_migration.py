"""Nova moves a testbed VM's server to another compute node: the openstack backend's
``Deployment.migrate_vm`` (the fault API measures around it: faults/migrate.py).

A testbed host stands for the compute node its servers run on (each testbed host's VMs
share an affinity server group: heat-templates/vm.yaml); moving a VM to testbed host H
asks Nova for the node where H's other servers are now, read from Nova at the call.

* live: ``live_migrate_server(host=node, block_migration="auto")`` (Nova copies the disk
  where the nodes share no storage), done once Nova reports the server ACTIVE on that node
  with no task left;
* cold: ``migrate_server(host=node)`` (Nova stops the guest, copies it, boots it there),
  VERIFY_RESIZE, ``confirm_server_resize``, ACTIVE on that node.

Admin only: Nova shows the compute host of a server (OS-EXT-SRV-ATTR:host) and moves one
to a named host for admins alone. A member's run is refused before anything changes.

The server's affinity group goes first. Nova's scheduler (ServerGroupAffinityFilter:
a group's node is where its members are, the moving one included) and the target
node's own check (``_validate_instance_group_policy``) refuse to move a member away from
its group, and Nova has no call that takes one server out of a group; deleting the
group releases its members (a request spec whose group is gone is scheduled without it).
The group is the run's stack's own: found by the server's membership and the run's name
prefix, never by name alone; Heat's stack delete passes over it later. The testbed
host's other servers stay where they are, unbound from then on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.testbed.openstack import cloud, stack as st

POLL_S = 1.0
MOVE_TIMEOUT_S = 900.0      # a cold move copies the disk and boots on the target (TCG: minutes)
RUNNING = 1                 # Nova's power_state of a running guest (OS-EXT-STS:power_state)


@dataclass(frozen=True)
class Move:
    vm: str
    server: str             # Nova's server id
    source: str             # the compute node it runs on
    target: str             # the compute node of the testbed host it goes to


def refuse_member(meta: dict, vm: str) -> None:
    """A run brought up without the admin role cannot name a compute node."""
    if not meta.get("admin"):
        raise UnsupportedError(
            f"openstack: no VM migration of {vm}: cloud {meta.get('cloud')!r} was used without "
            "the admin role, and Nova shows a server's compute host (OS-EXT-SRV-ATTR:host) and "
            "moves one to a named host for admins only; bring the testbed up with an admin "
            "entry of clouds.yaml")


def plan(conn, testbed, meta: dict, vm: str, to_host: str) -> Move:
    """Where VM's server goes to run on testbed host TO_HOST: the compute node of that
    host's other servers, as Nova reports them now. Refuses, before anything changes, what
    cannot be moved there."""
    refuse_member(meta, vm)
    v, h = testbed.vm(vm), testbed.host(to_host)
    servers = meta.get("servers") or {}
    others = [o.name for o in testbed.vms if o.host == h.name and o.name != v.name]
    if not others:
        raise UnsupportedError(
            f"openstack: no VM migration of {vm} to {h.name}: testbed host {h.name} has no "
            "server left, so no compute node stands for it (it is where a host's servers run); "
            "migrate to a host that has a VM on it")
    nodes = {o: _server(conn, servers[o], o).compute_host for o in others}
    if not all(nodes.values()):
        raise UnsupportedError(
            f"openstack: no VM migration of {vm}: Nova reports no compute host for "
            f"{', '.join(o for o, n in nodes.items() if not n)} (OS-EXT-SRV-ATTR:host is shown to "
            "admins only); use an admin entry of clouds.yaml")
    if len(set(nodes.values())) > 1:
        raise VnetbenchError(
            f"openstack: testbed host {h.name}'s servers run on several compute nodes "
            f"({', '.join(f'{o} on {n}' for o, n in nodes.items())}); no one node to move {vm} to")
    target = next(iter(nodes.values()))
    s = _server(conn, servers[vm], vm)
    if s.compute_host == target:
        raise UnsupportedError(
            f"openstack: no VM migration of {vm} to {h.name}: {vm} already runs on compute node "
            f"{target}, where {h.name}'s servers are (the testbed's hosts share one node: a "
            "one-node cloud, or the scheduler put them together)")
    if s.status != "ACTIVE" or s.task_state:
        raise VnetbenchError(f"openstack: server {s.id} of {vm} is {s.status}"
                             f"{f' ({s.task_state})' if s.task_state else ''}; Nova migrates an "
                             "ACTIVE server with no task in progress")
    return Move(v.name, s.id, s.compute_host, target)


def _server(conn, server_id: str | None, vm: str):
    if not server_id:
        raise VnetbenchError(f"openstack: the run recorded no server of {vm}")
    try:
        return conn.compute.get_server(server_id)
    except Exception as exc:
        raise cloud.error(exc, f"server {server_id} of {vm}") from None


def release(conn, move: Move, run_id: str) -> list[str]:
    """Delete the run's affinity groups the server is a member of (the module's note);
    their names. Anti-affinity groups stay: they refuse only a node where another member
    is, and Nova then says so."""
    prefix = f"{st.stack_name(run_id)}-"
    gone = []
    try:
        for g in conn.compute.server_groups():
            policy = getattr(g, "policy", None) or next(iter(getattr(g, "policies", None) or []), None)
            if move.server in (g.member_ids or []) and policy == "affinity" \
                    and (g.name or "").startswith(prefix):
                conn.compute.delete_server_group(g, ignore_missing=True)
                gone.append(g.name)
    except Exception as exc:
        raise cloud.error(exc, f"server groups of server {move.server} ({move.vm})") from None
    return gone


def live(conn, move: Move, **wait) -> None:
    try:
        conn.compute.live_migrate_server(move.server, host=move.target, block_migration="auto")
    except Exception as exc:
        raise cloud.error(exc, f"live migration of server {move.server} ({move.vm}) to {move.target}") from None
    _wait(conn, move, "live migration", lambda s: s.status == "ACTIVE", **wait)


def cold(conn, move: Move, **wait) -> float | None:
    """The cold move, confirmed; when Nova first reported the guest powered off (our
    monotonic clock, polled every POLL_S; None if no poll saw it)."""
    try:
        conn.compute.migrate_server(move.server, host=move.target)
    except Exception as exc:
        raise cloud.error(exc, f"cold migration of server {move.server} ({move.vm}) to {move.target}") from None
    off = []

    def verify(s) -> bool:
        if not off and s.power_state not in (None, RUNNING):
            off.append(time.monotonic())
        return s.status == "VERIFY_RESIZE"
    _wait(conn, move, "cold migration", verify, **wait)
    try:
        conn.compute.confirm_server_resize(move.server)
    except Exception as exc:
        raise cloud.error(exc, f"confirming the cold migration of server {move.server} ({move.vm})") from None
    _wait(conn, move, "cold migration (confirmed)", lambda s: s.status == "ACTIVE", **wait)
    return off[0] if off else None


def _wait(conn, move: Move, what: str, arrived, timeout: float = MOVE_TIMEOUT_S,
          sleep=time.sleep, clock=time.monotonic):
    """Poll the server until ``arrived(server)`` on the target node with no task left; an
    ERROR, a server back on its source with no task (Nova rolled the move back) or the
    deadline is a CloudError that names it."""
    deadline = clock() + timeout
    while True:
        s = _server(conn, move.server, move.vm)
        settled = not s.task_state
        if s.status == "ERROR":
            fault = (getattr(s, "fault", None) or {}).get("message") or "no fault recorded"
            raise cloud.CloudError(f"{what} of server {move.server} ({move.vm}) to {move.target}: "
                                   f"ERROR: {fault[:200]}; see nova-compute's log on both nodes")
        if arrived(s) and settled and s.compute_host == move.target:
            return s
        if settled and s.status == "ACTIVE" and s.compute_host == move.source:
            raise cloud.CloudError(f"{what} of server {move.server} ({move.vm}) to {move.target}: "
                                   f"Nova left it ACTIVE on {move.source} (the move failed and was "
                                   "rolled back); 'openstack server migration list --server "
                                   f"{move.server}' and nova-conductor's log say why")
        if clock() > deadline:
            raise cloud.CloudError(f"{what} of server {move.server} ({move.vm}) to {move.target}: "
                                   f"not done after {timeout:.0f} s (status {s.status}, task "
                                   f"{s.task_state}, on {s.compute_host})")
        sleep(POLL_S)
