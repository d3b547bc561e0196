"""One AIO per machine (tools/aio/README.md), as the tests live with it: the session's AIO
(conftest.aio_cloud) while it is up, the wait for another session's AIO to go, and the
order that runs a test bringing up an AIO of its own (marker ``own_aio``) before the
session's comes up: it could not run beside it, nor wait for it (that one goes at the
session's end)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

MARK = "own_aio"
# the session AIO's state dir, while aio_cloud holds it up (or a developer's, by
# VNETBENCH_AIO_CLOUDS)
SESSION_AIO = pytest.StashKey[Path]()
# the netdev datapath's tap: one per network namespace, so one AIO per machine
DATAPATH = Path("/sys/class/net/ovs-netdev")


def own_aio_first(items: list) -> None:
    """Move the tests marked ``own_aio`` just before the first test that uses aio_cloud
    (directly or through another fixture), keeping every other order."""
    own = [i for i in items if i.get_closest_marker(MARK)]
    if not own:
        return
    rest = [i for i in items if not i.get_closest_marker(MARK)]
    first = next((n for n, i in enumerate(rest) if "aio_cloud" in getattr(i, "fixturenames", ())),
                 len(rest))
    items[:] = rest[:first] + own + rest[first:]


def wait_for_other_aio(timeout_s: float) -> None:
    """Give another session's AIO that is being torn down a bounded time to go; `up`
    then says which is in the way if it is still up."""
    deadline = time.monotonic() + timeout_s
    while DATAPATH.exists() and time.monotonic() < deadline:
        time.sleep(5)


def alone(config) -> None:
    """Before a test brings up an AIO of its own: none of this session's may be up (a
    skip when the developer's is used, a failure when the order went wrong), another
    session's gets VNETBENCH_AIO_WAIT_S (300) seconds to go."""
    if os.environ.get("VNETBENCH_AIO_CLOUDS"):
        pytest.skip("VNETBENCH_AIO_CLOUDS: the tests use an AIO of yours, and this test brings "
                    "up its own (one AIO per machine)")
    if SESSION_AIO in config.stash:
        pytest.fail(f"the session's AIO ({config.stash[SESSION_AIO]}) is up: a test marked "
                    f"{MARK} must run before the tests that use aio_cloud (aio_alone.own_aio_first)")
    wait_for_other_aio(float(os.environ.get("VNETBENCH_AIO_WAIT_S", "300")))
    if DATAPATH.exists():
        pytest.fail(f"another AIO is up on this machine ({DATAPATH} exists) after "
                    "VNETBENCH_AIO_WAIT_S seconds; take it down first ('aio down --state ITS_DIR')")
