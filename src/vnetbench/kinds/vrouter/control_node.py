"""The vRouter control node: ``python -m vnetbench.kinds.vrouter.control_node``.

OpenContrail's control node reflects the routes each agent announces (over XMPP)
to every other agent. Here the protocol is JSON lines over TCP on the management
network: an agent sends ``hello`` and ``update`` (add/delete routes); the node
answers with the whole table of the other agents' routes (``full``) and then
forwards every change; ``ka`` keepalives go out every third of the hold time. When
an agent's session ends its routes are withdrawn from the others. SIGTERM is a
graceful stop: every agent gets ``bye`` (its routes are withdrawn) before the node
exits; SIGKILL or a partition leaves agents to notice the silence after the hold time.

Configuration (Contrail's API server -> control node -> agents, over IF-MAP and XMPP):
a client of ``--config-socket`` (a Unix socket, reachable from any namespace) sends one
line ``{"type": "config", "security": {...}}`` -- the security groups' rules, every
group -- and reads ``{"ok": true}`` once the node has sent it on to every agent; an
agent that (re)connects gets the latest configuration after its route table.

Routers (``--routers``, and ``{"type": "config", "routers": [[vnet, ...], ...]}`` on the
same socket): the vnets one logical router joins. Contrail's Neutron plugin connects
them and the control node leaks routes between their VRFs (route-target import and
export): each VM route of one is sent, as a route of every other, to every agent --
the announcing one included, whose other VRFs then reach its own VMs. So each host's
vRouter routes between them itself, distributed. A router's interface removed: the
new list; the node withdraws what no longer leaks and acknowledges once it has.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import threading

PROCESS_NAME = b"contrail-control"
PR_SET_NAME = 15


def joined(groups) -> dict[str, tuple[str, ...]]:
    """vnet -> the other vnets a router joins it to (the VRFs that import its routes)."""
    out: dict[str, set] = {}
    for group in groups:
        for vnet in group:
            out.setdefault(vnet, set()).update(v for v in group if v != vnet)
    return {v: tuple(sorted(o)) for v, o in out.items() if o}


def leaked(routes, links: dict) -> list[dict]:
    """Copies of the VM routes in ``routes`` in every VRF ``links`` joins theirs to
    (``origin``: the vnet each came from); broadcast routes stay in their VRF (a router
    ends the broadcast domain)."""
    return [{**r, "vnet": other, "origin": r["vnet"]} for r in routes if r["kind"] == "vm"
            for other in links.get(r["vnet"], ())]


class ControlNode:
    def __init__(self, keepalive_s: float, routers=()):
        self.keepalive_s = keepalive_s
        self.lock = threading.Lock()
        self.sessions: dict[socket.socket, str] = {}
        self.routes: dict[str, dict[str, dict]] = {}      # host -> key -> route
        self.config: dict | None = None                    # the latest configuration
        self.links = joined(routers)

    @staticmethod
    def key(r: dict) -> str:
        return f"{r['kind']}|{r['vnet']}|{r['ip']}"

    def every_route(self) -> list[dict]:
        return [r for rs in self.routes.values() for r in rs.values()]

    def reroute(self, routers) -> None:
        """A router's vnets changed: every agent gets the leaks that end withdrawn and the
        new ones added."""
        before = leaked(self.every_route(), self.links)
        self.links = joined(routers)
        after = leaked(self.every_route(), self.links)
        gone, new = [r for r in before if r not in after], [r for r in after if r not in before]
        if gone or new:
            for c in list(self.sessions):
                self.send(c, {"type": "update", "add": new, "delete": gone})

    def send(self, conn, msg: dict) -> None:
        try:
            conn.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            pass

    def others(self, host: str):
        return [c for c, h in self.sessions.items() if h != host]

    def serve(self, conn: socket.socket) -> None:
        host = None
        try:
            for line in conn.makefile("r"):
                msg = json.loads(line)
                with self.lock:
                    host = self.handle(conn, host, msg)
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                self.sessions.pop(conn, None)
                gone = list(self.routes.pop(host, {}).values()) if host and \
                    host not in self.sessions.values() else []
                gone += leaked(gone, self.links)
                for c in self.others(host):
                    if gone:
                        self.send(c, {"type": "update", "add": [], "delete": gone})
            conn.close()

    def handle(self, conn, host, msg) -> str | None:
        if msg["type"] == "hello":
            host = msg["host"]
            self.sessions[conn] = host
            self.routes[host] = {}
            table = [r for h, rs in self.routes.items() if h != host for r in rs.values()]
            table += leaked(self.every_route(), self.links)
            self.send(conn, {"type": "update", "add": table, "delete": [], "full": True})
            if self.config is not None:
                self.send(conn, self.config)
        elif msg["type"] == "update" and host:
            mine = self.routes.setdefault(host, {})
            for r in msg.get("delete", []):
                mine.pop(self.key(r), None)
            for r in msg.get("add", []):
                mine[self.key(r)] = r
            for c in self.others(host):
                self.send(c, {"type": "update", "add": msg.get("add", []),
                              "delete": msg.get("delete", [])})
            add, delete = leaked(msg.get("add", []), self.links), leaked(msg.get("delete", []), self.links)
            if add or delete:                  # to its own agent too: its other VRFs
                for c in list(self.sessions):
                    self.send(c, {"type": "update", "add": add, "delete": delete})
        return host

    def configure(self, conn: socket.socket) -> None:
        """One configuration from the API side: kept, sent to every agent, acknowledged."""
        try:
            with conn, conn.makefile("rw") as f:
                msg = json.loads(f.readline())
                if msg.get("type") != "config" or not (isinstance(msg.get("security"), dict)
                                                       or isinstance(msg.get("routers"), list)):
                    raise ValueError("expected {\"type\": \"config\", \"security\": {...}} "
                                     "or {\"type\": \"config\", \"routers\": [[vnet, ...], ...]}")
                with self.lock:
                    if isinstance(msg.get("routers"), list):
                        self.reroute(msg["routers"])
                    if isinstance(msg.get("security"), dict):
                        self.config = {"type": "config", "security": msg["security"],
                                       "generation": msg.get("generation")}
                        for c in list(self.sessions):
                            self.send(c, self.config)
                f.write(json.dumps({"ok": True, "agents": len(self.sessions)}) + "\n")
        except (OSError, ValueError) as e:
            try:
                conn.sendall((json.dumps({"ok": False, "error": str(e)}) + "\n").encode())
            except OSError:
                pass

    def serve_config(self, srv: socket.socket) -> None:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=self.configure, args=(conn,), daemon=True).start()

    def keepalives(self) -> None:
        while True:
            threading.Event().wait(self.keepalive_s)
            with self.lock:
                for c in list(self.sessions):
                    self.send(c, {"type": "ka"})

    def bye(self, *_):
        """Graceful stop: withdraw everything from every agent, then exit."""
        with self.lock:
            for c in list(self.sessions):
                self.send(c, {"type": "bye"})
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        os._exit(0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="vnetbench.kinds.vrouter.control_node")
    p.add_argument("--pidfile", required=True)
    p.add_argument("--listen", required=True, help="ADDRESS:PORT")
    p.add_argument("--hold-time", type=float, default=90.0)
    p.add_argument("--config-socket", help="Unix socket for configuration (security groups)")
    p.add_argument("--routers", type=json.loads, default=[],
                   help="JSON list of the vnet lists each router joins")
    args = p.parse_args(argv)
    ctypes.CDLL(None).prctl(PR_SET_NAME, PROCESS_NAME, 0, 0, 0)
    node = ControlNode(args.hold_time / 3, args.routers)
    addr, port = args.listen.rsplit(":", 1)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, int(port)))
    srv.listen(64)
    signal.signal(signal.SIGTERM, node.bye)
    if args.config_socket:
        if os.path.exists(args.config_socket):      # a restarted node's old socket
            os.unlink(args.config_socket)
        from vnetbench import unixsock
        cfg = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unixsock.bind(cfg, args.config_socket)
        cfg.listen(8)
        threading.Thread(target=node.serve_config, args=(cfg,), daemon=True).start()
    tmp = f"{args.pidfile}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(tmp, args.pidfile)
    threading.Thread(target=node.keepalives, daemon=True).start()
    while True:
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=node.serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
