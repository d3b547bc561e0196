"""Entry point of one OpenFlow controller instance: ``python -m vnetbench.sdn.controller
--app MODULE`` (the ``ovs-openflow`` kind's Floodlight model; ``run_osken`` also boots the
vRouter agent).

os-ken 4.2 ships no ``osken-manager``: patch eventlet, import ``app_manager`` then
``os_ken.controller.controller`` (the other order is a circular import) and the app
module (they register their options), then parse ``os_ken.cfg.CONF``, then
``AppManager.run_apps``. The process names itself ``osken-manager`` (what the
collector's component list calls an os-ken controller) and writes its own pidfile;
``--pidfile=PATH`` stays in its argv so teardown can prove the process is the run's.

The Floodlight controller listens **before** importing os-ken (about 1 s, more under
load): the switches' TCP connections then wait in the kernel's backlog instead of
being refused, and a refused switch retries only after OVS's minimum back-off of 1 s
(measured: that back-off was a third of the ``ovs-openflow`` bring-up,
bench/README.md). os-ken's server is handed that socket (``hub.listen`` for the
listen address).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import sys

PROCESS_NAME = b"osken-manager"
PR_SET_NAME = 15


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="vnetbench.sdn.controller")
    p.add_argument("--app", required=True, help="the os-ken application module to run")
    p.add_argument("--pidfile", required=True)
    p.add_argument("--config", required=True, help="JSON written by the testbed builder")
    p.add_argument("--instance", type=int, default=0)
    p.add_argument("--lock", help="lock file of the instances (master election)")
    p.add_argument("--ready-dir", help="the master touches DIR/<dpid> once a switch is set up")
    p.add_argument("--record", help="append raw packet-in/port-desc messages (JSON lines)")
    p.add_argument("--removed", help="JSON list of deleted vnets the app watches (deprovisioning)")
    p.add_argument("--listen", required=True, help="ADDRESS:PORT for OpenFlow")
    args = p.parse_args(argv)
    host, port = args.listen.rsplit(":", 1)
    server = listening((host, int(port)))          # before os-ken: nothing is refused
    with open(args.config) as f:
        config = json.load(f)
    run_osken(PROCESS_NAME, args.pidfile, args.listen, args.app,
              dict(config=config, instance=args.instance, lock=args.lock, record=args.record,
                   ready_dir=args.ready_dir, removed=args.removed), server=server)
    return 0


def run_osken(name: bytes, pidfile: str, listen: str, app: str, settings: dict,
              server: socket.socket | None = None) -> None:
    """Name the process, boot os-ken in the order 4.2 needs, hand ``settings`` to the
    app module's SETTINGS, write the pidfile, run the app until it is stopped.
    ``server``: an already listening socket for ``listen`` (``listening``)."""
    import faulthandler
    import importlib
    import signal
    ctypes.CDLL(None).prctl(PR_SET_NAME, name, 0, 0, 0)
    faulthandler.enable()        # a crash (e.g. in greenlet's C code) leaves its stack in the log
    faulthandler.register(signal.SIGUSR1, all_threads=True)   # asked for by a builder that waits
    from os_ken.lib import hub
    hub.patch(thread=False)                 # eventlet before anything opens a socket
    if server is not None:
        hub.listen = _handing(hub.listen, server)
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager   # before controller: circular import
    import os_ken.controller.controller  # noqa: F401,E402  (registers the ofp-* options)

    importlib.import_module(app).SETTINGS.update(settings)
    host, port = listen.rsplit(":", 1)
    cfg.CONF(args=["--ofp-listen-host", host, "--ofp-tcp-listen-port", port],
             project="os_ken", default_config_files=[])
    tmp = f"{pidfile}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(tmp, pidfile)
    AppManager.run_apps([app])


def listening(addr, backlog: int = 128, rcvbuf: int | None = None) -> socket.socket:
    """The OpenFlow listening socket, bound at once (connections queue meanwhile);
    ``rcvbuf``: a fixed receive buffer for the switches' connections (they inherit it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind(addr)
    sock.listen(backlog)
    return sock


def _handing(listen, server: socket.socket):
    """os-ken's ``hub.listen``, giving out ``server`` for its own address."""
    from os_ken.lib import hub
    if hub.HUB_TYPE == "eventlet":          # OSKEN_HUB_TYPE=eventlet: a green socket
        from eventlet.greenio import GreenSocket
        server = GreenSocket(server)

    def hand(addr, *args, **kwargs):
        if tuple(addr) == server.getsockname():
            return server
        return listen(addr, *args, **kwargs)
    return hand

if __name__ == "__main__":
    sys.exit(main())
