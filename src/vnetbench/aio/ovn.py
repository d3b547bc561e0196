"""The all-in-one cloud's OVN (--ml2 ovn): the NB and SB databases and ovn-northd on the
controller (node 1), and on every compute node an ovn-controller on that node's own OVS
(netdev datapath, Geneve between the nodes' underlay addresses) and Neutron's OVN
metadata agent.

Why the chassis come before Nova: Neutron's OVN driver puts the binding's
``datapath_type`` into the VIF details only when the host's SB Chassis says netdev; a
binding without it makes os-vif add the integration bridge as a kernel (system) bridge,
which flips the node's br-int off the userspace datapath. So `up` waits for every
node's Chassis before any nova-compute starts.

A part of ``cloud.Aio`` (with ``nodes``, ``services`` and ``resources``)."""

from __future__ import annotations

import time
from pathlib import Path

from vnetbench.aio import conf
from vnetbench.aio.conf import Node
from vnetbench.aio.procs import command
from vnetbench.errors import VnetbenchError

SCHEMAS = {"nb": "/usr/share/ovn/ovn-nb.ovsschema", "sb": "/usr/share/ovn/ovn-sb.ovsschema"}
CHASSIS_TIMEOUT_S = 90


class Ovn:
    def sbctl(self, *args, what="ovn-sbctl") -> str:
        return command(self.rx(["ovn-sbctl", f"--db={self.lay.ovn_db('sb')}", "--timeout=20", *args]), what)

    def nbctl(self, *args, what="ovn-nbctl") -> str:
        return command(self.rx(["ovn-nbctl", f"--db={self.lay.ovn_db('nb')}", "--timeout=20", *args]), what)

    def _ovn(self) -> None:
        """OVN's central part, then each node's chassis, registered in the SB."""
        run = self.lay.ovn_run
        run.mkdir(parents=True, exist_ok=True)
        for which, schema in SCHEMAS.items():
            db = run / f"ovn{which}_db.db"
            command(self.rx(["ovsdb-tool", "create", db, schema]), f"ovsdb-tool create {db.name}")
            self._socket(self._start(f"ovsdb-server-{which}", [
                "ovsdb-server", db, f"--remote=punix:{run / f'ovn{which}_db.sock'}",
                f"--unixctl={run / f'ovsdb-server-{which}.ctl'}",
                f"--pidfile={run / f'ovsdb-server-{which}.pid'}"]),
                run / f"ovn{which}_db.sock", f"ovsdb-server-{which}")
        self._start("ovn-northd", [
            "ovn-northd", f"--ovnnb-db={self.lay.ovn_db('nb')}", f"--ovnsb-db={self.lay.ovn_db('sb')}",
            f"--unixctl={run / 'ovn-northd.ctl'}", f"--pidfile={run / 'ovn-northd.pid'}"],
            env={"OVN_RUNDIR": str(run)})
        for node in self.lay.nodes:
            self._chassis(node)
        self._wait_chassis()

    def _socket(self, entry: dict, sock: Path, name: str, timeout_s: float = 30) -> None:
        t0 = time.monotonic()
        while not sock.exists():
            self.daemons.check(name, entry)
            if time.monotonic() - t0 > timeout_s:
                raise VnetbenchError(f"aio: {name} made no socket {sock} in {timeout_s:g} s")
            time.sleep(0.05)

    def _chassis(self, node: Node) -> None:
        """NODE's OVS told what OVN needs (its chassis name = its host, the SB, its tunnel
        endpoint, its integration bridge and datapath, the physnet's bridge; node 1 may
        host routers' gateways), then its ovn-controller."""
        ids = {"system-id": node.host, "hostname": node.host, "ovn-remote": self.lay.ovn_db("sb"),
               "ovn-encap-type": "geneve", "ovn-encap-ip": node.local_ip,
               "ovn-bridge": node.br_int, "ovn-bridge-datapath-type": "netdev",
               "ovn-bridge-mappings": f"{conf.PHYSNET}:{node.br_phys}",
               **({"ovn-cms-options": "enable-chassis-as-gw"} if node.primary else {})}
        self.vsctl("set", "open_vswitch", ".", *(f'external_ids:{k}="{v}"' for k, v in ids.items()),
                   what=f"OVN settings of node {node.name}", node=node)
        run = node.ovs_run
        self._node_start(node, "ovn-controller", [
            "ovn-controller", node.ovsdb, f"--unixctl={run / 'ovn-controller.ctl'}",
            f"--pidfile={run / 'ovn-controller.pid'}"],
            env={**self.ovs_env(node), "OVN_RUNDIR": str(run)})

    def _wait_chassis(self) -> None:
        want = {node.host for node in self.lay.nodes}
        t0, seen = time.monotonic(), set()
        while time.monotonic() - t0 < CHASSIS_TIMEOUT_S:
            seen = set(self.sbctl("--bare", "--columns=name", "list", "Chassis").split())
            if want <= seen:
                return
            for e in self.current():
                if e["name"].endswith("ovn-controller"):
                    self.daemons.check(e["name"], e)
            time.sleep(0.2)
        raise VnetbenchError(f"aio: no OVN chassis of {', '.join(sorted(want - seen))} in the SB "
                             f"after {CHASSIS_TIMEOUT_S} s (logs: {self.lay.logs}/*ovn-controller.log)")

    def _metadata_agent(self, node: Node, neutron: list[str]) -> None:
        """NODE's OVN metadata agent in its namespaces and in a mount namespace of its own
        whose /run/netns is the node's dir of the AIO: the ovnmeta-<network> namespaces it
        makes are the AIO's by place, never another program's to see or remove."""
        netns = self.lay.netns_dir / node.name
        netns.mkdir(parents=True, exist_ok=True)
        Path("/run/netns").mkdir(parents=True, exist_ok=True)
        full = "neutron-ovn-metadata-agent" if node.primary else f"{node.name}-neutron-ovn-metadata-agent"
        self._start(full, [
            *self._in(node), "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /run/netns && exec "$@"', str(netns),
            *self.rx(["neutron-ovn-metadata-agent", *neutron, "--config-file",
                      node.etc / "ovn_metadata_agent.ini"])], env=self.ovs_env(node))
