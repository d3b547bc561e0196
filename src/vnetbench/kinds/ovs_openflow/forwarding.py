"""What the Floodlight v0.90 model decides for a packet-in: pure, no switch, no os-ken.

The decisions follow Floodlight's ``Forwarding`` + ``VirtualNetworkFilter`` (VNF)
modules of the 2013 era (docs/sdn.md lists the source of each):

* the device manager learns MAC -> attachment point (switch, port) from packet-ins
  on edge ports (never on inter-switch link ports);
* VNF: unicast between MACs of different virtual networks, or from a MAC in none
  (a deleted network's), is dropped, with no flow, so every such packet costs a
  packet-in; broadcast and multicast pass VNF
  (``broadcast_isolation`` turns that into per-vnet flooding, which Floodlight lacks);
* broadcast / unknown destination: packet-out on the asking switch to every edge
  port and every broadcast-tree link but the ingress, no flow; a broadcast arriving
  on a link that is not on the tree is dropped (``isIncomingBroadcastAllowed``);
* known destination: ``pushRoute`` installs one flow on every switch of the path,
  walking back from the destination, then packet-outs on the asking switch. Match:
  in_port, VLAN, Ethernet source/destination and type, IPv4 source/destination
  (``host-pair``, v0.90) or the 5-tuple (``connection``, v1.x);
* a MAC seen at a new attachment point, or whose port went away (a migrated VM),
  has the flows to and from it deleted on every switch, so the next packet sets up
  the new path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

ETH_IPV4 = 0x0800
IP_TCP, IP_UDP = 6, 17
OFPVID_NONE = 0x0000
OFPVID_PRESENT = 0x1000
FLOW_PRIORITY = 10           # forwarding flows; the packet-in flows sit below them


@dataclass(frozen=True)
class Frame:
    """The fields of a packet-in that the model looks at."""
    src: str
    dst: str
    eth_type: int
    vlan: int | None = None
    ip_src: str | None = None
    ip_dst: str | None = None
    ip_proto: int | None = None
    l4_src: int | None = None
    l4_dst: int | None = None

    @property
    def multicast(self) -> bool:
        """Broadcast or multicast: the group bit of the destination MAC."""
        return bool(int(self.dst.split(":")[0], 16) & 1)


@dataclass(frozen=True)
class FlowMod:
    dpid: int
    match: tuple            # sorted (field, value) pairs, os-ken OFPMatch names
    out_port: int
    idle_timeout: int
    hard_timeout: int
    priority: int = FLOW_PRIORITY
    push_vlan: int | None = None     # tag to push before the output (into a VLAN link)
    pop_vlan: bool = False           # untag before the output (out of a VLAN link)


@dataclass(frozen=True)
class PacketOut:
    dpid: int
    in_port: int
    out_ports: tuple                 # the frame as it came
    push: tuple = ()                 # ((vlan, (port, ...)), ...): tagged into VLAN links
    pop_ports: tuple = ()            # a tagged frame untagged to these edge ports


@dataclass(frozen=True)
class DeleteFlows:
    dpid: int
    match: tuple


@dataclass(frozen=True)
class Drop:
    dpid: int
    reason: str


@dataclass(frozen=True)
class Link:
    """One inter-switch link end as the builder wired it (a tunnel or a physnet)."""
    port: str
    peer: int
    peer_port: str
    vnet: str
    vlan: int | None = None          # VLAN networks: the links share the uplink, tagged

    @property
    def key(self) -> str:
        return link_key(self.port, self.vlan)


def link_key(port: str | None, vlan: int | None) -> str | None:
    """A link end by port name and, on a shared VLAN trunk, its tag."""
    return port if vlan is None or port is None else f"{port}.{vlan}"


@dataclass
class Topology:
    """Static knowledge Floodlight gets from its config/REST API and link discovery:
    VNF's MAC -> vnet map, VM port -> vnet (for broadcast isolation), and the links."""
    macs: dict                         # MAC -> vnet
    ports: dict                        # VM port name -> vnet
    links: dict                        # dpid -> [Link]
    vnets: tuple = ()                  # vnet order: the broadcast tree prefers the first

    @classmethod
    def from_config(cls, cfg: dict) -> "Topology":
        links = {int(d): [Link(**ln) for ln in s["links"]] for d, s in cfg["switches"].items()}
        return cls(macs=dict(cfg["macs"]), ports=dict(cfg["ports"]), links=links,
                   vnets=tuple(cfg.get("vnets", ())))


@dataclass
class Options:
    match: str = "host-pair"
    idle_timeout: int = 5
    hard_timeout: int = 0
    broadcast_isolation: bool = False


@dataclass
class Forwarding:
    topo: Topology
    opts: Options = field(default_factory=Options)
    port_no: dict = field(default_factory=dict)     # dpid -> {name: number}
    port_name: dict = field(default_factory=dict)   # dpid -> {number: name}
    ap: dict = field(default_factory=dict)          # MAC -> (dpid, port number)
    removed: set = field(default_factory=set)       # deleted vnets: their links carry nothing

    # -- switches and ports ----------------------------------------------------

    def switch_up(self, dpid: int, ports: dict) -> None:
        """``ports``: {number: name} from the port description."""
        self.port_name[dpid] = dict(ports)
        self.port_no[dpid] = {n: p for p, n in ports.items()}

    def switch_down(self, dpid: int) -> None:
        self.port_name.pop(dpid, None)
        self.port_no.pop(dpid, None)
        self.ap = {m: a for m, a in self.ap.items() if a[0] != dpid}

    def port_up(self, dpid: int, number: int, name: str) -> None:
        self.port_name.setdefault(dpid, {})[number] = name
        self.port_no.setdefault(dpid, {})[name] = number

    def port_down(self, dpid: int, number: int) -> list:
        """Forget the port; the devices attached there lose their attachment point and
        the flows to and from them go (else traffic to a migrated VM would keep its old,
        never idle path)."""
        name = self.port_name.get(dpid, {}).pop(number, None)
        self.port_no.get(dpid, {}).pop(name, None)
        gone = sorted(m for m, a in self.ap.items() if a == (dpid, number))
        for mac in gone:
            del self.ap[mac]
        return [d for mac in gone for d in self._forget_flows(mac)]

    def remove_vnet(self, vnet: str) -> list:
        """VNF's network deletion: the vnet's MACs and VM ports are forgotten, its links
        leave the broadcast tree (they stay link ports: nothing is learned on them), and
        the flows to and from its MACs go from every switch (else ongoing traffic, which
        never idles out, would keep its installed path)."""
        gone = sorted(m for m, v in self.topo.macs.items() if v == vnet)
        self.topo.macs = {m: v for m, v in self.topo.macs.items() if v != vnet}
        self.topo.ports = {p: v for p, v in self.topo.ports.items() if v != vnet}
        self.removed.add(vnet)
        for mac in gone:
            self.ap.pop(mac, None)
        return [d for mac in gone for d in self._forget_flows(mac)]

    def link_ports(self, dpid: int) -> set:
        """Link ends (``Link.key``) of the switch."""
        return {ln.key for ln in self.topo.links.get(dpid, ())}

    def trunks(self, dpid: int) -> set:
        return {ln.port for ln in self.topo.links.get(dpid, ()) if ln.vlan is not None}

    # -- the packet-in -----------------------------------------------------------

    def packet_in(self, dpid: int, in_port: int, frame: Frame) -> list:
        raw = self.port_name.get(dpid, {}).get(in_port)
        trunk = raw in self.trunks(dpid)
        name = link_key(raw, frame.vlan) if trunk else raw
        out = []
        if not trunk and name not in self.link_ports(dpid) and not int(frame.src.split(":")[0], 16) & 1:
            out += self._learn(frame.src, (dpid, in_port))
        if not frame.multicast and frame.src not in self.topo.macs:
            return out + [Drop(dpid, f"VNF: {frame.src} is in no vnet")]   # srcNetwork == null
        if frame.multicast or frame.dst not in self.ap:
            return out + [self._flood(dpid, in_port, name, frame)]
        src_vnet, dst_vnet = self.topo.macs.get(frame.src), self.topo.macs.get(frame.dst)
        if src_vnet is None or src_vnet != dst_vnet:
            return out + [Drop(dpid, f"VNF: {frame.src} ({src_vnet}) -> {frame.dst} ({dst_vnet})")]
        return out + self._push_route(dpid, in_port, frame, src_vnet)

    def _learn(self, mac: str, where: tuple) -> list:
        old = self.ap.get(mac)
        self.ap[mac] = where
        if old is None or old == where:
            return []
        return self._forget_flows(mac)

    def _forget_flows(self, mac: str) -> list:
        return [DeleteFlows(d, ((key, mac),)) for d in sorted(self.port_name)
                for key in ("eth_dst", "eth_src")]

    def _flood(self, dpid, in_port, in_name, frame) -> PacketOut | Drop:
        vnet = self.topo.macs.get(frame.src) if self.opts.broadcast_isolation else None
        if self.opts.broadcast_isolation and vnet is None:
            return Drop(dpid, f"broadcast isolation: {frame.src} is in no vnet")
        tree = self.tree_ports(vnet).get(dpid, set())
        links = self.link_ports(dpid)
        if in_name in links and in_name not in tree:
            return Drop(dpid, f"broadcast on link port {in_name} off the broadcast tree")
        outs, edge, push = [], [], {}
        trunks = self.trunks(dpid)
        for ln in self.topo.links.get(dpid, ()):          # tree links out of VLAN trunks
            number = self.port_no.get(dpid, {}).get(ln.port)
            if ln.vlan is not None and ln.key in tree and ln.key != in_name and number is not None:
                if frame.vlan == ln.vlan:
                    outs.append(number)
                else:
                    push.setdefault(ln.vlan, []).append(number)
        for number, name in sorted(self.port_name.get(dpid, {}).items()):
            if number == in_port or number > 0xffffff00 or name in trunks:   # LOCAL, reserved
                continue
            if name in links:
                if name in tree:
                    outs.append(number)
            elif vnet is None or self.topo.ports.get(name) == vnet:
                edge.append(number)
        if frame.vlan is None:
            outs += edge
        return PacketOut(dpid, in_port, tuple(outs), tuple((v, tuple(p)) for v, p in push.items()),
                         () if frame.vlan is None else tuple(edge))

    def tree_ports(self, vnet: str | None = None) -> dict:
        """dpid -> link port names on the broadcast tree: a BFS from the lowest dpid,
        preferring the first vnet's link between two switches (only ``vnet``'s when given)."""
        order = {v: i for i, v in enumerate(self.topo.vnets)}
        dpids = sorted(self.topo.links)
        if not dpids:
            return {}
        tree, seen, queue = {d: set() for d in dpids}, {dpids[0]}, deque([dpids[0]])
        while queue:
            d = queue.popleft()
            cands = sorted((ln for ln in self.topo.links[d] if (vnet is None or ln.vnet == vnet)
                            and ln.vnet not in self.removed),
                           key=lambda ln: (order.get(ln.vnet, 99), ln.peer))
            for ln in cands:
                if ln.peer in seen:
                    continue
                seen.add(ln.peer)
                tree[d].add(ln.key)
                tree.setdefault(ln.peer, set()).add(link_key(ln.peer_port, ln.vlan))
                queue.append(ln.peer)
        return tree

    def _push_route(self, dpid, in_port, frame, vnet) -> list:
        dst_dpid, dst_port = self.ap[frame.dst]
        if (dst_dpid, dst_port) == (dpid, in_port):
            return [Drop(dpid, "destination is on the ingress port")]
        hops = self._route(dpid, in_port, dst_dpid, dst_port, vnet, frame.vlan)
        if hops is None:
            return [Drop(dpid, f"no route from switch {dpid} to {dst_dpid} on vnet {vnet}")]
        flows = [FlowMod(d, self.match(frame, i, vin), o, self.opts.idle_timeout,
                         self.opts.hard_timeout,
                         push_vlan=vout if vin is None and vout is not None else None,
                         pop_vlan=vin is not None and vout is None)
                 for d, i, o, vin, vout in reversed(hops)]   # walk back from the destination
        first = flows[-1]
        if first.push_vlan is not None:
            return flows + [PacketOut(dpid, in_port, (), ((first.push_vlan, (first.out_port,)),))]
        if first.pop_vlan:
            return flows + [PacketOut(dpid, in_port, (), (), (first.out_port,))]
        return flows + [PacketOut(dpid, in_port, (first.out_port,))]

    def _route(self, dpid, in_port, dst_dpid, dst_port, vnet, frame_vlan=None):
        """[(dpid, in port, out port, VLAN in, VLAN out)] from the asking switch to the
        destination, over the vnet's links (a BFS: the shortest path, as Floodlight's
        routing); the VLANs are the tags the frame carries on each side (None: untagged)."""
        prev, queue = {dpid: None}, deque([dpid])
        while queue and dst_dpid not in prev:
            d = queue.popleft()
            for ln in self.topo.links.get(d, ()):
                if ln.vnet == vnet and ln.peer not in prev and ln.peer in self.port_no:
                    prev[ln.peer] = (d, ln)
                    queue.append(ln.peer)
        if dst_dpid not in prev:
            return None
        path, d = [], dst_dpid
        while prev[d] is not None:
            path.append(prev[d])
            d = prev[d][0]
        path.reverse()
        hops, cur_in, cur_vlan = [], in_port, frame_vlan
        for d, ln in path:
            hops.append((d, cur_in, self.port_no[d][ln.port], cur_vlan, ln.vlan))
            cur_in, cur_vlan = self.port_no[ln.peer][ln.peer_port], ln.vlan
        hops.append((dst_dpid, cur_in, dst_port, cur_vlan, None))
        return hops

    def match(self, frame: Frame, in_port: int, vlan: int | None = None) -> tuple:
        """The flow's match at a hop where the frame carries tag ``vlan`` (None: untagged)."""
        m = {"in_port": in_port, "eth_src": frame.src, "eth_dst": frame.dst,
             "eth_type": frame.eth_type,
             "vlan_vid": OFPVID_NONE if vlan is None else vlan | OFPVID_PRESENT}
        if frame.eth_type == ETH_IPV4 and frame.ip_src:
            m.update(ipv4_src=frame.ip_src, ipv4_dst=frame.ip_dst)
            if self.opts.match == "connection" and frame.ip_proto is not None:
                m["ip_proto"] = frame.ip_proto
                l4 = {IP_TCP: "tcp", IP_UDP: "udp"}.get(frame.ip_proto)
                if l4 and frame.l4_src is not None:
                    m.update({f"{l4}_src": frame.l4_src, f"{l4}_dst": frame.l4_dst})
        return tuple(sorted(m.items()))
