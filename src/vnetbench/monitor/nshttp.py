"""HTTP to a service that listens inside one of the suite's namespaces.

The monitoring plane (Prometheus, Pushgateway, collectors) binds 127.0.0.1 inside
its own namespace, so no traffic touches the root namespace. A client socket is
created inside that namespace by a short-lived thread that enters it (setns
affects only the calling thread) and the connected socket is then used from
anywhere in this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import socket
import threading
import urllib.parse
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def _fd(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)


def connect(ns: str, host: str, port: int, timeout: float = 5.0) -> socket.socket:
    """A TCP socket connected to host:port as seen from inside namespace ``ns``."""
    out: dict = {}

    def work():
        try:
            with _fd(NETNS_DIR / ns) as target, _fd("/proc/thread-self/ns/net") as own:
                _setns(target)
                try:
                    out["sock"] = socket.create_connection((host, port), timeout=timeout)
                finally:
                    _setns(own)
        except OSError as exc:
            out["error"] = exc
    t = threading.Thread(target=work, name=f"netns-{ns}")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["sock"]


class Connection(http.client.HTTPConnection):
    """http.client connection whose socket lives in namespace ``ns``."""

    def __init__(self, ns: str, host: str, port: int, timeout: float = 10.0):
        super().__init__(host, port, timeout=timeout)
        self.ns = ns

    def connect(self):
        self.sock = connect(self.ns, self.host, self.port, self.timeout)


def request(ns: str, port: int, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    conn = Connection(ns, "127.0.0.1", port, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get_json(ns: str, port: int, path: str, params: dict | None = None) -> dict:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    status, body = request(ns, port, "GET", path + query)
    data = json.loads(body or b"{}")
    if status != 200:
        raise RuntimeError(f"GET {path} -> {status}: {data.get('error', body[:200])}")
    return data
