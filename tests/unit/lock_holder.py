"""Another live process holding a run directory's lock (flock), as a concurrent `up`,
`down` or `cleanup` would: for the tests of what a busy run refuses."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path


@contextlib.contextmanager
def held(path: Path):
    """PATH locked (LOCK_EX) by a child process for the block; the lock goes with it."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.kill()
        holder.wait()
