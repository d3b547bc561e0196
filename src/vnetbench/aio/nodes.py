"""The all-in-one cloud's compute nodes and Open vSwitch instances: node 1 is this
machine (its OVS, provider bridge and the outside host on the external network); nodes
2..N are emulated, each a network namespace with veths to node 1 and mount + UTS
namespaces of its own, with its own OVS, libvirtd and virtlogd. Node 1's bridges are the
others' underlay and provider switch.

A part of ``cloud.Aio`` (which composes it with ``services`` and ``resources``): it uses
the Aio's layout (``lay``), journal, daemons and ``_start``."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import time
from pathlib import Path

from vnetbench.aio import conf
from vnetbench.aio.conf import Node
from vnetbench.aio.procs import alive, command, stop
from vnetbench.errors import VnetbenchError
from vnetbench.linux import libvirtd

OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVS_DAEMONS = ("ovsdb-server", "ovs-vswitchd")


class Nodes:
    def ovs_env(self, node: Node | None = None) -> dict:
        run = (node or self.lay.nodes[0]).ovs_run
        return {"OVS_RUNDIR": str(run), "OVS_LOGDIR": str(run), "OVS_DBDIR": str(run)}

    def vsctl(self, *args, what="ovs-vsctl", node: Node | None = None) -> str:
        node = node or self.lay.nodes[0]
        return command(self.rx(["ovs-vsctl", f"--db={node.ovsdb}", "--timeout=20", *args]), what,
                    env=self.ovs_env(node))

    def _in(self, node: Node, net: bool = True) -> list[str]:
        """argv prefix: run in NODE's network (unless not NET), mount and UTS namespaces
        (those of its holder process); nothing for node 1, this machine."""
        if node.primary:
            return []
        holder = next(e for e in reversed(self.processes()) if e["name"] == f"{node.name}-node")
        return ["nsenter", f"--target={holder['pid']}", "--mount", "--uts", *(["--net"] if net else []), "--"]

    def _node_start(self, node: Node, name: str, argv, env=None, port=None, net: bool = True):
        """A daemon of NODE, in its namespaces, journaled as '<node>-NAME' (node 1: NAME)."""
        full = name if node.primary else f"{node.name}-{name}"
        return self._start(full, [*self._in(node, net), *self.rx(argv)], env=env, port=port)

    def _node_shell(self) -> Path:
        """The nova-computes' remote shell (RSYNC_RSH): 'HOST COMMAND...' runs COMMAND in
        the mount namespace of that node (ssh between compute nodes, which Nova uses to copy
        a config drive before a block migration, by the node's host name, and a cold
        migration's disk, by its my_ip); node 1's is that of its ovsdb-server."""
        first = next(e for e in reversed(self.processes()) if e["name"] == "ovsdb-server")
        node1 = self.lay.nodes[0]
        cases = [f'  {node1.host}|{node1.my_ip}) exec nsenter --target={first["pid"]} --mount -- "$@" ;;']
        for node in self.lay.nodes[1:]:
            cases.append(f'  {node.host}|{node.my_ip}) exec {" ".join(self._in(node, net=False))} "$@" ;;')
        path = self.lay.state / "nodes" / "rsh"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n# nova-compute's RSYNC_RSH between the AIO's nodes (aio/cloud.py)\n"
                        'host="$1"; shift\ncase "$host" in\n' + "\n".join(cases) +
                        '\n  *) echo "rsh: no AIO node $host" >&2; exit 255 ;;\nesac\n')
        path.chmod(0o755)
        return path

    def _nodes(self) -> None:
        """Each emulated node's namespaces and links, before RabbitMQ (it listens on this
        machine's end of their management links)."""
        if len(self.lay.nodes) > 1:
            libvirtd.connect().close()           # the machine's libvirtd (node 1's): its /run/libvirt
        for node in self.lay.nodes[1:]:
            self._node_namespaces(node)

    def _node_namespaces(self, node: Node) -> None:
        """A network namespace with three veths to this machine (management: RabbitMQ;
        underlay: tenant tunnels; provider: the physnet's flat and VLAN networks) and a
        mount + UTS namespace held by a process of its own: the node's hostname, and its
        own /run/libvirt, /var/lib/libvirt, /var/log/libvirt and /etc/libvirt/qemu."""
        ns = node.netns
        self.journal.record("netns", name=ns, node=node.name)
        command(["ip", "netns", "add", ns], f"netns {ns}")
        inside = ["ip", "netns", "exec", ns]
        for kind, inner in Node.INNER.items():
            link = node.link(kind)
            self.journal.record("link", name=link)
            command(["ip", "link", "add", link, "type", "veth", "peer", "name", inner, "netns", ns],
                 f"veth {link}")
            command(["ip", "link", "set", link, "up"], f"{link} up")
            if kind != "m":     # in OVS netdev bridges: no checksum left to offload
                command(["ethtool", "-K", link, "tx", "off"], f"ethtool on {link}")
                command([*inside, "ethtool", "-K", inner, "tx", "off"], f"ethtool on {inner} in {ns}")
        ours, theirs = node.mgmt
        command(["ip", "addr", "add", f"{ours}/30", "dev", node.link("m")], f"address on {node.link('m')}")
        command([*inside, "ip", "addr", "add", f"{theirs}/30", "dev", Node.INNER["m"]], f"address in {ns}")
        for dev in ("lo", *Node.INNER.values()):
            command([*inside, "ip", "link", "set", dev, "up"], f"{dev} up in {ns}")
        # node 1's migration address (its end of node 2's link) from every node
        command([*inside, "ip", "route", "add", "default", "via", ours], f"default route in {ns}")
        binds = []
        first = self.lay.nodes[0]
        if first.migration_addr:    # the machine's libvirtd for a peer-to-peer migration to node 1
            binds += ["/run/libvirt", str(first.libvirt_sock_dir)]
            first.libvirt_sock_dir.mkdir(parents=True, exist_ok=True)
        for point, src in node.hidden():
            src.mkdir(parents=True, exist_ok=True)
            binds += [str(src), point]
        node.libvirt_sock_dir.mkdir(parents=True, exist_ok=True)
        ready = node.dir / "ready"
        ready.unlink(missing_ok=True)
        script = ('hostname "$1" && shift && while [ "$#" -gt 1 ]; do mkdir -p "$2" && mount --bind "$1" "$2" '
                  '&& shift 2 || exit 1; done && touch "$1" && exec sleep infinity')
        entry = self._start(f"{node.name}-node", [
            *inside, "unshare", "--mount", "--uts", "--propagation", "private", "--",
            "sh", "-c", script, "node", node.host, *binds, str(ready)])
        for _ in range(100):
            if ready.exists():
                return
            self.daemons.check(f"{node.name}-node", entry)
            time.sleep(0.05)
        raise VnetbenchError(f"aio: node {node.name}'s namespaces not ready after 5 s")

    def _node_ovs(self, node: Node) -> None:
        """The node's own OVS (in its namespaces): provider bridge with its provider link,
        underlay bridge with its underlay link and tunnel endpoint address."""
        run = node.ovs_run
        run.mkdir(parents=True, exist_ok=True)
        command(self.rx(["ovsdb-tool", "create", run / "conf.db", OVS_SCHEMA]), "ovsdb-tool create")
        self._start_ovs(node)
        self.vsctl("--no-wait", "set", "open_vswitch", ".",
                   f"external_ids:vnetbench-aio={self.lay.run_id}", node=node)
        own = f"external_ids:vnetbench-aio={self.lay.run_id}"
        self.vsctl("add-br", node.br_phys, "--", "set", "bridge", node.br_phys, "datapath_type=netdev", own,
                   "--", "add-port", node.br_phys, Node.INNER["p"],
                   "--", "add-br", node.br_underlay, "--", "set", "bridge", node.br_underlay,
                   "datapath_type=netdev", own, "--", "add-port", node.br_underlay, Node.INNER["u"],
                   what=f"bridges of node {node.name}", node=node)
        inside = ["ip", "netns", "exec", node.netns]
        self._underlay_address(node, inside)
        command([*inside, "ip", "link", "set", node.br_phys, "up"], f"{node.br_phys} up")

    def _underlay_address(self, node: Node, inside: list[str]) -> None:
        br = node.br_underlay
        plen = ipaddress.ip_network(self.lay.underlay_cidr).prefixlen
        command([*inside, "ip", "addr", "add", f"{node.underlay_ip}/{plen}", "dev", br], f"address on {br}")
        command([*inside, "ip", "link", "set", br, "up"], f"{br} up")
        command([*inside, "ethtool", "-K", br, "tx", "off"], f"ethtool on {br}")

    def _node_underlay_hub(self) -> None:
        """Node 1's underlay bridge (its tunnel endpoint) and the other nodes' underlay and
        provider links' ends in node 1's bridges: node 1 is their switch."""
        first = self.lay.nodes[0]
        own = f"external_ids:vnetbench-aio={self.lay.run_id}"
        self.journal.record("bridge", name=first.br_underlay)
        tx = ["add-br", first.br_underlay, "--", "set", "bridge", first.br_underlay,
              "datapath_type=netdev", own]
        for node in self.lay.nodes[1:]:
            tx += ["--", "add-port", first.br_underlay, node.link("u"),
                   "--", "add-port", first.br_phys, node.link("p")]
        self.vsctl(*tx, what="underlay bridge")
        self._underlay_address(first, [])

    def _tunnel_neighbours(self) -> None:
        """Each node's OVS told its peers' tunnel endpoint MACs: userspace tunnels resolve
        the outer MAC in their own cache (filled only from ARP replies they see) and drop
        the packet that misses (kinds/ovs/netns.tunnel_neighbours)."""
        nodes = self.lay.nodes
        if len(nodes) < 2:
            return
        macs = {}
        for node in nodes:
            inside = [] if node.primary else ["ip", "netns", "exec", node.netns]
            macs[node.index] = command([*inside, "cat", f"/sys/class/net/{node.br_underlay}/address"],
                                    f"MAC of {node.br_underlay}").strip()
        for node in nodes:
            ctl = ["ovs-appctl", "-t", str(node.ovs_run / "ovs-vswitchd.ctl")]
            for peer in nodes:
                if peer is not node:
                    command(self.rx([*ctl, "tnl/neigh/set", node.br_underlay, peer.underlay_ip, macs[peer.index]]),
                         f"tnl/neigh/set on node {node.name}")

    def _node_libvirt(self, node: Node) -> None:
        """virtlogd and libvirtd of the node, in its namespaces (its hostname: libvirt's,
        so Placement's resource provider's), their sockets by path."""
        self._node_start(node, "virtlogd", ["virtlogd", "-p", str(node.dir / "virtlogd.pid")])
        entry = self._node_start(node, "libvirtd", ["libvirtd", "-f", str(node.etc / "libvirtd.conf"),
                                                    "-p", str(node.dir / "libvirtd.pid")])
        sock = node.libvirt_sock_dir / "libvirt-sock"
        for _ in range(300):
            if sock.exists():
                break
            self.daemons.check(f"{node.name}-libvirtd", entry)
            time.sleep(0.1)
        name = command(["virsh", "-c", node.libvirt_uri, "hostname"], f"virsh hostname of {node.name}",
                    timeout_s=60).strip()
        if name != node.host:
            raise VnetbenchError(f"aio: node {node.name}'s libvirtd says its hostname is {name!r}, "
                                 f"not {node.host!r}: Placement would name its provider wrong")

    def _ovs(self) -> None:
        run = self.lay.ovs_run
        run.mkdir(parents=True, exist_ok=True)
        db = run / "conf.db"
        command(self.rx(["ovsdb-tool", "create", db, OVS_SCHEMA]), "ovsdb-tool create")
        self._start_ovs()
        for node in self.lay.nodes[1:]:
            self._node_ovs(node)
        self.vsctl("--no-wait", "set", "open_vswitch", ".",
                   f"external_ids:vnetbench-aio={self.lay.run_id}")
        br = self.lay.br_phys
        self.journal.record("bridge", name=br)
        self.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
                   f"external_ids:vnetbench-aio={self.lay.run_id}", what=f"creating bridge {br}")
        command(["ip", "addr", "add", self.lay.host_cidr, "dev", br], f"address on {br}")
        command(["ip", "link", "set", br, "up"], f"{br} up")
        # the userspace datapath does not fill in checksums the kernel left to offload
        command(["ethtool", "-K", br, "tx", "off"], f"ethtool on {br}")
        self._outside()
        if len(self.lay.nodes) > 1:
            self._node_underlay_hub()
        # the VM taps stay up (a tap's IFF_UP can be lost as ovs-vswitchd opens it)
        for node in self.lay.nodes:
            self._node_start(node, "tapkeeper", [sys.executable, "-m", "vnetbench.aio.tapkeeper", "--db",
                                                 node.ovsdb, "--bridge", node.br_int], env=self.ovs_env(node))

    def _outside(self) -> None:
        """A machine outside the cloud, on its external network (the provider network the
        routers' gateways and floating IPs are on): a namespace with a veth into the
        provider bridge, at the subnet's second address. North-south traffic runs between
        it and the guests' floating IPs, never through the runner's own namespace."""
        lay = self.lay
        ns, link = lay.outside_netns, lay.outside_link
        self.journal.record("netns", name=ns)
        command(["ip", "netns", "add", ns], f"netns {ns}")
        command(["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns],
             f"veth {link}")
        inside = ["ip", "netns", "exec", ns]
        command([*inside, "ip", "addr", "add", lay.outside_cidr, "dev", "eth0"], f"address in {ns}")
        for dev in ("lo", "eth0"):
            command([*inside, "ip", "link", "set", dev, "up"], f"{dev} up in {ns}")
        # its own TCP segments leave with full checksums (the userspace datapath fills none in)
        command([*inside, "ethtool", "-K", "eth0", "tx", "off"], f"ethtool in {ns}")
        command(["ip", "link", "set", link, "up"], f"{link} up")
        # an access port of the external network's VLAN on the provider bridge
        self.vsctl("add-port", lay.br_phys, link, "--", "set", "port", link,
                   f"tag={conf.EXTERNAL_VLAN}", what=f"port {link} on {lay.br_phys}")

    def _start_ovs(self, node: Node | None = None) -> None:
        node = node or self.lay.nodes[0]
        run = node.ovs_run
        env = self.ovs_env(node)
        pre = "" if node.primary else f"{node.name}-"
        entry = self._node_start(node, "ovsdb-server", [
            "ovsdb-server", str(run / "conf.db"), f"--remote=punix:{run / 'db.sock'}",
            f"--unixctl={run / 'ovsdb-server.ctl'}", f"--pidfile={run / 'ovsdb-server.pid'}"], env=env)
        for _ in range(100):
            if (run / "db.sock").exists():
                break
            self.daemons.check(f"{pre}ovsdb-server", entry)
            time.sleep(0.1)
        self.vsctl("--no-wait", "init", node=node)
        entry = self._node_start(node, "ovs-vswitchd", [
            "ovs-vswitchd", node.ovsdb, f"--unixctl={run / 'ovs-vswitchd.ctl'}",
            f"--pidfile={run / 'ovs-vswitchd.pid'}"], env=env)
        # answers once vswitchd reads the db
        self.vsctl("--if-exists", "del-br", "vnb-aio-probe", node=node)
        self.daemons.check(f"{pre}ovs-vswitchd", entry)

    def _ovs_clear(self, ovs: list[dict]) -> list[str]:
        """Delete every bridge of this AIO's own OVS instance (the netdev datapath keeps
        their taps, and its ovs-netdev, in the root namespace after vswitchd exits), then
        stop it. After a crash that killed OVS, it is restarted from its database for this."""
        run = self.lay.ovs_run
        if not (run / "conf.db").exists():
            return stop(ovs, marker=None)
        problems = []
        try:
            if not all(alive(e) for e in ovs) or len(ovs) < 2:
                problems += stop(ovs, marker=None)
                (run / "db.sock").unlink(missing_ok=True)
                self._start_ovs()
                ovs = [e for e in self.processes() if e["name"] in OVS_DAEMONS]
            for br in self.vsctl("list-br").split():
                self.vsctl("--if-exists", "del-br", br, what=f"deleting bridge {br}")
            # with no bridge left the netdev datapath is usually gone already, and then
            # dump-dps answers with an error: nothing to delete
            ctl = ["ovs-appctl", "-t", str(run / "ovs-vswitchd.ctl")]
            dps = subprocess.run(self.rx([*ctl, "dpctl/dump-dps"]), capture_output=True, text=True, timeout=30)
            for dp in dps.stdout.split() if dps.returncode == 0 else []:
                command(self.rx([*ctl, "dpctl/del-dp", dp]), f"deleting datapath {dp}", timeout_s=30)
        except VnetbenchError as exc:
            problems.append(str(exc))
        return problems + stop(ovs, marker=None)
