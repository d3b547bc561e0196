"""Network namespaces without fork: created and entered by a short-lived thread.

pyroute2's ``netns.create`` and ``NetNS(name)`` fork a child per call. A signal
that lands while the child runs leaves it finishing a namespace after our
teardown has looked (a namespace no journal lists), or running the parent's own
exception handlers (tracebacks, a second teardown); and ``NetNS(name)`` silently
creates a namespace that is missing. ``unshare``/``setns`` act on the calling
thread only, so a thread of this process does the same work: nothing outlives
the call, and opening never creates.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

from pyroute2 import IPRoute, netns

from vnetbench.linux import proc

CLONE_NEWNET = 0x40000000
NETLINK_ROUTE = 0
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def on_thread(work):
    """``work()`` on a fresh thread; waits for it even through KeyboardInterrupt
    (it takes milliseconds), then re-raises the interrupt: never ignored, never
    left running behind a teardown."""
    box = {}

    def target():
        try:
            box["value"] = work()
        except BaseException as exc:   # handed to the caller
            box["error"] = exc
    t = threading.Thread(target=target, name="vnb-netns", daemon=True)
    t.start()
    proc.wait_through_interrupts(t.join)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def create(name: str, then=None) -> None:
    """A new named namespace (``/run/netns/<name>``); fails if it exists. ``then()``
    runs inside it on the same thread (its first requests: no second thread to enter)."""
    def work():
        _check(_libc.unshare(CLONE_NEWNET), f"unshare for {name}")
        netns.attach(name, f"self/task/{threading.get_native_id()}")
        if then is not None:
            then()
    on_thread(work)


def path(name: str) -> str:
    """The file that holds namespace ``name`` open."""
    return os.path.join(netns.NETNS_RUN_DIR, name)


def _enter(name: str) -> None:
    """This thread joins namespace ``name`` (on_thread's work only)."""
    target = os.open(path(name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(target, CLONE_NEWNET), f"setns to {name}")
    finally:
        os.close(target)


def in_netns(name: str, work):
    """``work()`` on a thread that entered namespace ``name``; its value or its error."""
    def entered():
        _enter(name)
        return work()
    return on_thread(entered)


def rtnl(name: str) -> IPRoute:
    """An IPRoute bound to namespace ``name``; a missing namespace is an error."""
    return IPRoute(fileno=in_netns(name, lambda: socket.socket(
        socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE).detach()))


def sysctl(name: str, path: str, value: str) -> None:
    """Write ``/proc/sys/<path>`` (e.g. ``net/ipv4/conf/eth0/arp_ignore``) as namespace
    ``name`` sees it: a net sysctl belongs to the namespace of the task that opens it."""
    def work():
        with open(os.path.join("/proc/sys", path), "w") as f:
            f.write(value)
    in_netns(name, work)
