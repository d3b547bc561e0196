"""Undo a journaled Heat stack (``testbed.unwind`` reads ``STEPS``): only a stack
that carries the run's tag is deleted, and the call waits for Heat to finish (bounded;
teardown defers signals until it returns)."""

from __future__ import annotations

import subprocess
import time

from vnetbench.testbed.openstack import cloud, ports
from vnetbench.testbed.unwind import Step

DELETE_TIMEOUT_S = 600         # Heat deletes servers, ports, networks, flavor, key in turn
POLL_S = 2.0
DELETE_ATTEMPTS = 3            # a DELETE_FAILED is deleted again (DeleteFailed)


def undo_stack(run, entry, conn=None, sleep=time.sleep, clock=time.monotonic) -> None:
    conn = conn or cloud.connect(entry["cloud"], entry.get("clouds_yaml"))
    name, tag = entry["name"], f"run-{run.run_id}"
    try:
        stack = conn.orchestration.find_stack(name, ignore_missing=True)
    except Exception as exc:
        raise cloud.error(exc, f"stack {name} (cloud {entry['cloud']})") from None
    if stack is None:
        return                  # never created (killed before the API call), or gone
    if tag not in (stack.tags or []):
        raise ValueError(f"stack {name} ({stack.id}) has tags {stack.tags}, not {tag}: "
                         "not this run's; left alone")
    for attempt in range(DELETE_ATTEMPTS):
        if stack.status != "DELETE_IN_PROGRESS":
            try:
                conn.orchestration.delete_stack(stack)
            except Exception as exc:
                raise cloud.error(exc, f"deleting stack {name} ({stack.id})") from None
        try:
            return wait_deleted(conn, stack.id, name, sleep=sleep, clock=clock)
        except DeleteFailed:
            if attempt == DELETE_ATTEMPTS - 1:
                raise
            stack = conn.orchestration.find_stack(stack.id, ignore_missing=False)


class DeleteFailed(RuntimeError):
    """DELETE_FAILED: Heat may fail a delete that races the stack's own creation (seen on
    the AIO under load after a SIGKILL mid-create: its nested stack's row still referenced,
    MySQL IntegrityError 1451); a new delete then finishes it, as Heat's docs advise."""


def wait_deleted(conn, stack_id: str, name: str, timeout_s: float = DELETE_TIMEOUT_S,
                 sleep=time.sleep, clock=time.monotonic) -> None:
    deadline = clock() + timeout_s
    while True:
        stack = conn.orchestration.find_stack(stack_id, ignore_missing=True)
        if stack is None or stack.status == "DELETE_COMPLETE":
            return
        if stack.status == "DELETE_FAILED":
            raise DeleteFailed(f"stack {name} ({stack_id}): DELETE_FAILED: "
                               f"{(stack.status_reason or '')[:200]}; retry with "
                               "'vnetbench cleanup --backend openstack' or see heat-engine's log")
        if clock() > deadline:
            raise RuntimeError(f"stack {name} ({stack_id}) still {stack.status} after "
                               f"{timeout_s:.0f} s; retry 'vnetbench cleanup --backend openstack'")
        sleep(POLL_S)


def undo_cloud_port(run, entry, conn=None) -> None:
    """A port added to a running testbed (openstack/ports.py): off its node's bridge (when
    that OVSDB still answers), then out of Neutron -- found by its name, which carries the
    run id, so nothing else is ever deleted."""
    name = entry["name"]
    if not name.startswith(f"vnb-{run.run_id}-p"):
        raise ValueError(f"port {name}: its name does not carry run {run.run_id}; left alone")
    conn = conn or cloud.connect(entry["cloud"], entry.get("clouds_yaml"))
    try:
        found = list(conn.network.ports(name=name))
    except Exception as exc:
        raise cloud.error(exc, f"port {name} (cloud {entry['cloud']})") from None
    for port in found:
        subprocess.run(["ovs-vsctl", f"--db={entry['ovsdb']}", "--timeout=10", "--if-exists",
                        "del-port", ports.tap(port.id)], capture_output=True, timeout=20)
        try:
            conn.network.delete_port(port.id, ignore_missing=True)
        except Exception as exc:
            raise cloud.error(exc, f"deleting port {name} ({port.id})") from None


STEPS = {"stack": Step(undo_stack), "cloud_port": Step(undo_cloud_port)}
