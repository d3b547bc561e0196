"""Unix sockets at paths of any length.

A socket address holds at most 107 bytes, and a run's directory under a test's
temporary root (or a deep ``VNETBENCH_STATE_DIR``) makes longer paths. Binding or
connecting through ``/proc/self/fd/N/NAME``, N an open descriptor of the directory,
keeps the address short while the socket file lives where its owner's files do
(removed with the run's directory)."""

from __future__ import annotations

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
