"""Unix sockets at paths of any length.

A socket address holds at most 107 bytes, and a run's directory under a test's
temporary root (or a deep ``VNETBENCH_STATE_DIR``) makes longer paths. Binding or
connecting through ``/proc/self/fd/N/NAME``, N an open descriptor of the directory,
keeps the address short while the socket file lives where its owner's files do
(removed with the run's directory)."""

from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager


@contextmanager
def _short(path) -> str:
    path = os.fspath(path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)


def bind(sock: socket.socket, path) -> None:
    with _short(path) as p:
        sock.bind(p)


def connect(sock: socket.socket, path) -> None:
    with _short(path) as p:
        sock.connect(p)


def request(path, msg: dict, timeout: float) -> dict | None:
    """One JSON line to the server at ``path`` and its one-line JSON reply (None: it
    closed without one); OSError and ValueError as they come."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        connect(s, path)
        with s.makefile("rw") as stream:
            stream.write(json.dumps(msg) + "\n")
            stream.flush()
            line = stream.readline()
    return json.loads(line) if line.strip() else None
