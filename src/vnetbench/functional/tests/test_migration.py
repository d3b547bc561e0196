"""VM migration (seed 003) through the fault API: cold (shut down, move, boot), live
(ping continues; downtime from 5 ms probes), and a migration while the controller
is down (kinds with a controller). On a cloud Nova moves the servers between compute
nodes (admin; each testbed host's servers on a node of their own), and the controller
row is N/A: the cloud's controllers are not vnetbench's (ML2/OVS has none)."""

import time
from types import SimpleNamespace

import pytest

from vnetbench.errors import VnetbenchError
from vnetbench.faults import LOCAL_HOSTS, MIGRATABLE, Faults, control, unsupported
from vnetbench.functional import measure, verdict
from vnetbench.functional.plugin import deployment_fixture, one_vnet

TESTBED = one_vnet(3)

PER_KIND = True      # controller faults and migration hardly depend on the encapsulation:
                     # one network per kind unless --every-network
dep = deployment_fixture(TESTBED, "migration")


@pytest.fixture(scope="module", autouse=True)
def migratable(target):
    """N/A with the backend's reason before any guest is booted for nothing."""
    unsupported(SimpleNamespace(backend=target[0]), "VM migration", MIGRATABLE)


@pytest.mark.row("migration.cold")
def test_cold_migration_ping_works(dep, record):
    measure.ping_once(dep, "red-1", dep.ip("red-3"))
    t0 = time.monotonic()
    moved = Faults(dep).migrate("red-3", "h2", live=False)
    m = {"change_ms": (time.monotonic() - t0) * 1000, **moved,
         **measure.ping_once(dep, "red-1", dep.ip("red-3"))}
    record(verdict.reachable(m), m)


@pytest.mark.row("migration.live")
def test_live_migration_ping_continues(dep, record):
    m = Faults(dep).migrate("red-2", "h1", live=True, peer="red-1")
    m["ping_after"] = measure.ping_once(dep, "red-1", dep.ip("red-2"))
    record(verdict.live_migration(m), m)


@pytest.mark.row("migration.controller-down")
def test_migration_with_the_controller_down(dep, record):
    """red-3 (on h2 since the cold migration) goes back to h1 while the controller is
    down; then the controller starts again and red-1 pings it."""
    try:
        control.components(dep)
    except VnetbenchError as exc:       # a kind without a controller (ML2/OVS on a cloud too)
        pytest.skip(str(exc))
    unsupported(dep, "controller fault", LOCAL_HOSTS)      # a cloud's controllers are its own
    f = Faults(dep)
    measure.ping_once(dep, "red-1", dep.ip("red-3"))
    f.controller_stop()
    try:
        t0 = time.monotonic()
        f.migrate("red-3", "h1", live=False)
    finally:
        f.controller_start()
    m = {"change_ms": (time.monotonic() - t0) * 1000,
         **measure.ping_once(dep, "red-1", dep.ip("red-3"))}
    record(verdict.reachable(m), m)
