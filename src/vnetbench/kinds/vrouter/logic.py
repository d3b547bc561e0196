"""The vRouter agent's decisions (OpenContrail 2013 model), without a switch.

``Agent`` turns what it knows -- its host's VM interfaces (from the builder's
config, as Nova/Neutron would tell the real agent), the ports OVS reports, and the
routes the control node distributes -- into OpenFlow entries described as plain
``Flow`` records; ``vrouter_agent`` sends them with os-ken. Tables:

0 classify: per VM port: proxy ARP answered in the datapath with the vRouter MAC,
  DHCP to the agent, broadcast/multicast IP to the VRF's flood table, unicast IP to
  the flow table with the VRF in the metadata; from the fabric: MPLS label ->
  the VM interface (or the VRF's broadcast label -> every local port of the VRF).
1 flows: one entry per 5-tuple (forward and reverse), set up by the agent on a
  miss at its configured rate; a new flow's first packets (``flow_hold_packets``)
  are held and sent on once it is set up, the rest are dropped. With security
  groups (a port with port security on) the agent evaluates the rules at set-up,
  as Contrail's agent does: the sending port's egress rules, the receiving port's
  ingress rules where that port is local; a denied flow's entries drop (forward and
  reverse: stateful both ways), and a rule change re-evaluates the flows set up. A
  port with port security takes what arrives for it from the fabric through this
  table too, so its own host judges its ingress.
2 routes: per VRF, destination /32 -> local port (MAC rewrite) or MPLS over GRE
  to the host that announced it, with its label. A router joining vnets makes the
  control node leak each one's VM routes into the others' VRFs (``leaked``): those
  routes decrement the TTL (the vRouter's ``vr_forward``), and one to a VM of this
  host delivers to its port, in its own VRF's flow and zone on the way back.
3 flood: per VRF, ingress replication: local ports + one copy per remote host
  that has the VRF, with that host's broadcast label.
North-south (``northsouth``): the public VN is one more VRF. A floating IP is a
  route of it announced by its VM's host with a label of its own; that host's tables do
  the NAT, statically per floating IP: from the label (or the public VRF's route to the
  floating IP) DNAT to the fixed address, a hop, on into the VM's VRF and its flow
  lookup; from the VM (source its fixed address, no more specific route) SNAT to the
  floating IP, a hop, on in the public VRF. The SDN gateway's host has the external link
  as a port: what comes in from it is routed in the public VRF (ARP answered for the
  public addresses), and the public VRF's way out (its neighbours, its default) leaves
  by it; the other hosts reach it by the default route it announces with its label.
  Routes are ordered by prefix length (``priority``).
4-5 datapath set-up (``flow_setup: datapath``, the default): a packet of a port
  without port security (from its VM, or from the fabric for it) passes the VRF's
  conntrack zone; a new connection is committed there and every packet routed on,
  with no agent in the path. Only a flow to a local port with port security still
  goes to table 1 and the agent.
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import time

from vnetbench.kinds.vrouter.northsouth import DEFAULT, PUBLIC
from vnetbench.testbed import secgroups
from vnetbench.testbed.codec import rule_from_dict

VROUTER_MAC = "00:00:5e:00:01:00"        # the vRouter's MAC, as in Contrail
T_CLASSIFY, T_FLOW, T_ROUTE, T_FLOOD = 0, 1, 2, 3
T_TRACK, T_TRACKED = 4, 5               # datapath set-up: conntrack, then its verdict
ZONE = "reg2"                            # the conntrack zone: the VRF
CT_NEW = 0x21                            # ct_state +trk+new
COOKIE_BASE = 0x00C0_471A_0000_0000      # pipeline set up from config
COOKIE_FLOW = 0x00C0_471A_0000_0001      # reactive 5-tuple flows
COOKIE_LEARNED = 0x00C0_471A_0000_0002   # routes learned from the control node
LABEL_BASE = 16                          # labels 0..15 are reserved (RFC 3032)
BCAST_LABEL_BASE = 100_000               # per-VRF broadcast label: BASE + vrf
FIP_LABEL_BASE = 200_000                 # a floating IP's label: BASE + its VM port's number
GATEWAY_LABEL = 300_000                  # the SDN gateway's: the public VRF's way out
FIP_SNAT_PRIORITY = 31                   # above a default route (30), below any other prefix
MAX_PENDING = 1024                       # flows waiting for set-up; more are dropped
MAX_TRACKED = 65536                      # flows whose verdict a rule change re-evaluates
PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp"}
RECENT_S = 1.0                           # a miss this soon after a set-up is the datapath's
                                         # cache not yet revalidated: entries sent again with
                                         # the packet, not counted as a set-up
IP, ARP, MPLS = 0x0800, 0x0806, 0x8847
BROADCAST = "ff:ff:ff:ff:ff:ff"


@dataclasses.dataclass(frozen=True)
class Flow:
    """One OpenFlow entry; actions are tuples ('output', port), ('set_field', name,
    value), ('push_mpls', ethertype), ('pop_mpls', ethertype), ('goto', table),
    ('metadata', value), ('meter', id), ('move', src, dst, bits), ('controller',),
    ('in_port',), ('resubmit', table), ('ct', commit, recirculate-to-table or None),
    ('dec_ttl',)."""
    table: int
    priority: int
    match: tuple
    actions: tuple
    cookie: int = COOKIE_BASE
    idle_timeout: int = 0


@dataclasses.dataclass(frozen=True)
class Delete:
    """Delete entries of ``table`` matching ``match`` (and ``cookie`` when given); with
    ``priority`` only the entry of exactly that match and priority (a prefix route's
    match would otherwise take every more specific route with it)."""
    table: int
    match: tuple = ()
    cookie: int | None = None
    priority: int | None = None


@dataclasses.dataclass(frozen=True)
class Meter:
    """An OpenFlow meter (kbit/s, drop band): a VM interface's egress limit; id 0 means
    delete every meter (a fresh pipeline)."""
    id: int
    kbps: int
    burst_kbits: int


@dataclasses.dataclass(frozen=True)
class Iface:
    """A VM interface the agent serves (from the builder's config); ``egress``: its
    [kbit/s, burst kbit] limit on what the VM sends, or None."""
    port: str
    vm: str
    vnet: str
    mac: str
    ip: str
    prefixlen: int
    egress: tuple | None = None
    port_security: bool = False
    groups: tuple = ()


def _m(**kw) -> tuple:
    return tuple(sorted(kw.items()))


def priority(ip: str) -> int:
    """A route's priority in the route table: longest prefix first (a /32: 100)."""
    return 100 if "/" not in ip else 30 + 2 * int(ip.split("/")[1])


def unroute(table: int, match: tuple, ip: str, cookie: int | None = None) -> Delete:
    """The deletion of a route entry to IP: strict for a prefix (see ``Delete``)."""
    return Delete(table, match, cookie, priority(ip) if "/" in ip else None)


#: the vRouter's proxy ARP, answered in the datapath: the requester gets VROUTER_MAC
PROXY_ARP = (("move", "eth_src", "eth_dst", 48), ("set_field", "eth_src", VROUTER_MAC),
             ("set_field", "arp_op", 2), ("move", "arp_sha", "arp_tha", 48),
             ("set_field", "arp_sha", VROUTER_MAC), ("move", "arp_tpa", "reg0", 32),
             ("move", "arp_spa", "arp_tpa", 32), ("move", "reg0", "arp_spa", 32),
             ("in_port",))


class FlowSetup:
    """The agent's flow-setup queue: a token bucket of ``rate`` set-ups per second
    (burst: a tenth of a second's worth) in front of a FIFO of held flows."""

    def __init__(self, rate: int, hold: int, now=time.monotonic):
        self.rate, self.hold, self.now = rate, hold, now
        self.reverse = reverse         # the agent's: a flow across VRFs comes back in another
        self.burst = max(1.0, rate / 10)
        self.tokens, self.stamp = self.burst, now()
        self.pending: "collections.OrderedDict[tuple, list]" = collections.OrderedDict()
        self.recent: "collections.OrderedDict[tuple, float]" = collections.OrderedDict()
        self.dropped = self.set_up = 0

    def trap(self, key: tuple, packet) -> bool | None:
        """A packet of a flow without an entry: True held, False dropped, None when the
        flow (or its reverse) was just set up -- send the packet on, no new set-up."""
        t = self.now()
        while self.recent and next(iter(self.recent.values())) < t - RECENT_S:
            self.recent.popitem(last=False)
        if key in self.recent:
            return None
        held = self.pending.get(key)
        if held is None:
            if len(self.pending) >= MAX_PENDING:
                self.dropped += 1
                return False
            held = self.pending[key] = []
        if len(held) >= self.hold:
            self.dropped += 1
            return False
        held.append(packet)
        return True

    def due(self) -> list[tuple[tuple, list]]:
        """Flows whose set-up the rate now allows, oldest first, with their held packets."""
        t = self.now()
        if not self.rate:
            out = list(self.pending.items())
            self.pending.clear()
        else:
            self.tokens = min(self.burst, self.tokens + (t - self.stamp) * self.rate)
            self.stamp = t
            out = []
            while self.pending and self.tokens >= 1.0 - 1e-9:
                self.tokens -= 1.0
                out.append(self.pending.popitem(last=False))
        for key, _ in out:
            self.recent[key] = self.recent[self.reverse(key)] = t
        self.set_up += len(out)
        return out

    def wait(self) -> float:
        """Seconds until the next set-up can happen (0 when one can now)."""
        if not self.rate or self.tokens >= 1.0 - 1e-9:
            return 0.0
        return (1.0 - self.tokens) / self.rate


#: ICMP requests and their replies, both ways (as conntrack pairs them): an ICMP flow's
#: key carries the type and code where TCP and UDP carry the ports, and a reply's reverse
#: is its request, so a miss on either finds the verdict the flow was given
ICMP_REPLY = {8: 0, 13: 14, 15: 16, 17: 18}
ICMP_REPLY.update({reply: request for request, reply in list(ICMP_REPLY.items())})


def reverse(key: tuple) -> tuple:
    vrf, src, dst, proto, sport, dport = key
    if proto == 1:
        return (vrf, dst, src, proto, ICMP_REPLY.get(sport, sport), dport)
    return (vrf, dst, src, proto, dport, sport)


def flow_key(vrf: int, fields: dict) -> tuple:
    """The 5-tuple of a packet in a VRF: ICMP type and code in the ports' places, 0 for
    protocols without either."""
    return (vrf, fields["ip_src"], fields["ip_dst"], fields["ip_proto"],
            fields.get("l4_src", 0), fields.get("l4_dst", 0))


class Agent:
    """What one host's vRouter agent decides; ``config`` comes from the builder."""

    def __init__(self, config: dict):
        self.host = config["host"]
        self.opts = config["options"]
        self.vrfs = {name: i + 1 for i, name in enumerate(config["vnets"])}
        self.vnet_of = {i: name for name, i in self.vrfs.items()}
        self.underlay_ip = config.get("underlay_ip")
        self.gateways = dict(config.get("gateways", {}))    # vnet -> its router's interface
        self.cidrs = dict(config["cidrs"])
        self.ifaces = {p: Iface(**{**i, "egress": tuple(i["egress"]) if i.get("egress") else None,
                                   "groups": tuple(i.get("groups", ()))})
                       for p, i in config["ifaces"].items()}
        security = config.get("security") or {}
        self.members = {g: frozenset(ipaddress.IPv4Address(a) for a in ips)
                        for g, ips in security.get("members", {}).items()}
        self.rules: dict[str, tuple] = {}
        self.tracked: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
        self._set_rules(security.get("groups", {}))
        self.tunnels = dict(config["tunnels"])       # peer underlay IP -> GRE port name
        self.ofports: dict[str, int] = {}            # port name -> OpenFlow port number
        self.learned: dict[tuple, dict] = {}         # route key -> route from the control node
        self.setup = FlowSetup(self.opts["flow_setup_rate"], self.opts["flow_hold_packets"])
        self.setup.reverse = self.reverse_of
        # north-south (``northsouth``): VM port -> its floating IP; the SDN gateway's part
        self.fips = {f["port"]: f for f in config.get("floating_ips", ())}
        self.gateway = config.get("gateway")

    # -- local interfaces ---------------------------------------------------------

    def label(self, port: str) -> int:
        """The interface's MPLS label: stable while the port keeps its number."""
        return LABEL_BASE + self.ofports[port]

    def local(self) -> list[Iface]:
        return [i for p, i in self.ifaces.items() if p in self.ofports]

    def local_routes(self, underlay_ip: str) -> list[dict]:
        """What this agent announces: a route per VM interface, a broadcast route per VRF."""
        routes = [{"kind": "vm", "vnet": i.vnet, "ip": i.ip, "label": self.label(i.port),
                   "nh": underlay_ip} for i in self.local()]
        for vnet in sorted({i.vnet for i in self.local()}):
            routes.append({"kind": "bcast", "vnet": vnet, "ip": underlay_ip,
                           "label": BCAST_LABEL_BASE + self.vrfs[vnet], "nh": underlay_ip})
        routes += [{"kind": "vm", "vnet": PUBLIC, "ip": f["ip"], "label": FIP_LABEL_BASE + self.ofports[p],
                    "nh": underlay_ip} for p, f in sorted(self.fips.items()) if p in self.ofports]
        if self.gateway and self.gateway["port"] in self.ofports:
            routes.append({"kind": "vm", "vnet": PUBLIC, "ip": DEFAULT, "label": GATEWAY_LABEL,
                           "nh": underlay_ip})
        return routes

    def base(self) -> list:
        """The pipeline's skeleton: defaults of every table, the fabric side."""
        out = [Delete(table=t) for t in (T_CLASSIFY, T_FLOW, T_ROUTE, T_FLOOD)] + [Meter(0, 0, 0)]
        out += [Flow(T_CLASSIFY, 0, (), ()), Flow(T_ROUTE, 0, (), ()), Flow(T_FLOOD, 0, (), ()),
                Flow(T_FLOW, 0, (), (("controller",),))]
        out += [Delete(table=t) for t in (T_TRACK, T_TRACKED)]
        return out + (self.datapath_setup() if self.in_datapath else [])

    @property
    def in_datapath(self) -> bool:
        return self.opts["flow_setup"] == "datapath"

    def datapath_setup(self) -> list[Flow]:
        """``flow_setup: datapath``: the flow table is the datapath's connection tracker,
        one zone per VRF. A flow between ports without port security is allowed within its
        VRF whatever its 5-tuple, so no agent needs to see it: the first packet commits the
        entry (both directions) and is routed on, in the datapath, as the real vRouter's
        kernel module holds its flow table. Both hosts of a cross-host flow hold it (what
        arrives from the fabric is tracked too). A Python agent behind OpenFlow packet-ins
        sets up some hundreds of flows a second on this machine: the seed's 10,000/s would
        measure the emulation, not the model."""
        return [Flow(T_TRACK, 0, _m(eth_type=IP), (("move", "metadata", ZONE, 16), ("ct", False, T_TRACKED))),
                Flow(T_TRACKED, 10, _m(eth_type=IP, ct_state=(CT_NEW, CT_NEW)),
                     (("ct", True, None), ("resubmit", T_ROUTE))),
                Flow(T_TRACKED, 0, (), (("resubmit", T_ROUTE),))]

    def port_up(self, port: str, ofport: int) -> list:
        """A port appeared: a VM interface gets its classification, label and local route."""
        self.ofports[port] = ofport
        iface = self.ifaces.get(port)
        if self.gateway and port == self.gateway["port"]:
            return self._gateway_up(ofport)
        if iface is None:
            return self._via_tunnel(port)
        vrf, n = self.vrfs[iface.vnet], ofport
        cidr = self.cidrs[iface.vnet]
        limit = (("meter", n),) if iface.egress else ()     # what the VM sends, metered
        # a secured port's flows are the agent's (it judges the rules at set-up)
        lookup = T_TRACK if self.in_datapath and not iface.port_security else T_FLOW
        out = [Flow(T_CLASSIFY, 300, _m(in_port=n, eth_type=ARP, arp_op=1, arp_tpa=cidr), PROXY_ARP),
               Flow(T_CLASSIFY, 290, _m(in_port=n, eth_type=ARP), ()),
               Flow(T_CLASSIFY, 270, _m(in_port=n, eth_type=IP, eth_dst=("01:00:00:00:00:00",
                                                                         "01:00:00:00:00:00")),
                    limit + (("metadata", vrf), ("goto", T_FLOOD))),
               Flow(T_CLASSIFY, 260, _m(in_port=n, eth_type=IP),
                    limit + (("metadata", vrf), ("goto", lookup))),
               Flow(T_CLASSIFY, 250, _m(in_port=n), ()),
               Flow(T_CLASSIFY, 200, _m(eth_type=MPLS, mpls_label=self.label(port)),
                    (("pop_mpls", IP), ("metadata", vrf), ("goto", lookup))
                    if iface.port_security or self.in_datapath else (("pop_mpls", IP),) + self.deliver(iface)),
               Flow(T_ROUTE, priority(iface.ip), self._to(iface), self.deliver(iface))]
        out += self._floating_ip(iface)
        if self.in_datapath and iface.port_security:
            out.append(Flow(T_TRACK, 50, self._to(iface), (("resubmit", T_FLOW),)))
        if iface.egress:
            out.insert(0, Meter(n, *iface.egress))
        if self.opts["dhcp"]:
            out.append(Flow(T_CLASSIFY, 280, _m(in_port=n, eth_type=IP, ip_proto=17, udp_src=68,
                                                udp_dst=67), (("controller",),)))
        return out + self.flood(iface.vnet) + [f for r in self.leaked_to(iface) for f in self._route(r)]

    def _floating_ip(self, iface: Iface, delete: bool = False) -> list:
        """A local VM interface's floating IP (none: nothing): its label and the public
        VRF's route to it DNAT into the VM's VRF and its flow lookup; what the VM sends with
        no more specific route is SNAT'd to the floating IP and routed in the public VRF.
        Each crossing between the VRFs is a router hop (``dec_ttl``). Static 1:1 NAT, as
        the agent's floating-IP flows rewrite every flow of the interface alike."""
        fip = self.fips.get(iface.port)
        if fip is None:
            return []
        vrf, pub, n = self.vrfs[iface.vnet], self.vrfs[PUBLIC], self.ofports[iface.port]
        label = _m(eth_type=MPLS, mpls_label=FIP_LABEL_BASE + n)
        to_fip = _m(metadata=pub, eth_type=IP, ipv4_dst=fip["ip"])
        from_vm = _m(metadata=vrf, eth_type=IP, ipv4_src=fip["fixed"])
        if delete:
            return [Delete(T_CLASSIFY, label), Delete(T_ROUTE, to_fip),
                    Delete(T_ROUTE, from_vm, priority=FIP_SNAT_PRIORITY)]
        lookup = T_TRACK if self.in_datapath else T_FLOW
        return [Flow(T_CLASSIFY, 200, label, (("pop_mpls", IP), ("metadata", pub), ("goto", T_ROUTE))),
                Flow(T_ROUTE, 100, to_fip, (("set_field", "ipv4_dst", fip["fixed"]), ("dec_ttl",),
                                            ("set_field", "metadata", vrf), ("resubmit", lookup))),
                Flow(T_ROUTE, FIP_SNAT_PRIORITY, from_vm,
                     (("set_field", "ipv4_src", fip["ip"]), ("dec_ttl",), ("set_field", "metadata", pub),
                      ("resubmit", T_ROUTE)))]

    def _gateway_up(self, n: int) -> list:
        """The SDN gateway's external port (``northsouth.gateway``): ARP for the public
        addresses answered, everything else from outside routed in the public VRF; the
        public VRF's neighbours and default out of it; its label (the default route it
        announces) into the public VRF."""
        gw, pub = self.gateway, self.vrfs[PUBLIC]
        out = [Flow(T_CLASSIFY, 300, _m(in_port=n, eth_type=ARP, arp_op=1, arp_tpa=a), PROXY_ARP)
               for a in gw["answers"]]
        out += [Flow(T_CLASSIFY, 290, _m(in_port=n, eth_type=ARP), ()),
                Flow(T_CLASSIFY, 260, _m(in_port=n, eth_type=IP), (("metadata", pub), ("goto", T_ROUTE))),
                Flow(T_CLASSIFY, 250, _m(in_port=n), ()),
                Flow(T_CLASSIFY, 200, _m(eth_type=MPLS, mpls_label=GATEWAY_LABEL),
                     (("pop_mpls", IP), ("metadata", pub), ("goto", T_ROUTE)))]
        nexthops = dict(gw["neighbours"])
        if gw["default"] in nexthops:
            nexthops[DEFAULT] = nexthops[gw["default"]]
        for ip, mac in sorted(nexthops.items()):
            out.append(Flow(T_ROUTE, priority(ip), _m(metadata=pub, eth_type=IP, ipv4_dst=ip),
                            (("set_field", "eth_src", VROUTER_MAC), ("set_field", "eth_dst", mac),
                             ("output", n))))
        return out

    def leaked_to(self, iface: Iface) -> list[dict]:
        """The routes other VRFs hold to this host's ``iface`` (leaked by the control node
        through a router; they arrive whether or not the port is up yet)."""
        return [r for r in self.learned.values() if r.get("origin") == iface.vnet
                and r["nh"] == self.underlay_ip and r["ip"] == iface.ip]

    def _to(self, iface: Iface) -> tuple:
        """The match of what a VRF routes to ``iface``."""
        return _m(metadata=self.vrfs[iface.vnet], eth_type=IP, ipv4_dst=iface.ip)

    def deliver(self, iface: Iface) -> tuple:
        """The actions that hand a routed packet to a local VM interface."""
        return (("set_field", "eth_src", VROUTER_MAC), ("set_field", "eth_dst", iface.mac),
                ("output", self.ofports[iface.port]))

    def _via_tunnel(self, port: str) -> list:
        """A GRE port reported after routes through it were learned: those routes and
        their VRFs' floods are programmed now (until then they had no port to use)."""
        peers = {nh for nh, p in self.tunnels.items() if p == port}
        via = [r for r in self.learned.values() if r["nh"] in peers]
        out = [f for r in via if r["kind"] == "vm" for f in self._route(r)]
        for vnet in sorted({r["vnet"] for r in via}):
            out += self.flood(vnet)
        return out

    def port_down(self, port: str) -> list:
        """A port left (deleted, or the VM migrated away): its entries go."""
        n = self.ofports.get(port)
        iface = self.ifaces.get(port)
        if n is None or iface is None:
            self.ofports.pop(port, None)
            return []
        setup = [Delete(T_TRACK, self._to(iface))] if self.in_datapath and iface.port_security else []
        gone = self._floating_ip(iface, delete=True)
        self.ofports.pop(port)
        return [Delete(T_CLASSIFY, _m(in_port=n)),
                Delete(T_CLASSIFY, _m(eth_type=MPLS, mpls_label=LABEL_BASE + n)),
                unroute(T_ROUTE, self._to(iface), iface.ip)] + setup + gone + self.flood(iface.vnet) + \
            [d for r in self.leaked_to(iface) for d in self._unroute(r)]

    # -- routes from the control node -------------------------------------------------

    @staticmethod
    def route_key(r: dict) -> tuple:
        return (r["kind"], r["vnet"], r["ip"])

    def learn(self, add=(), delete=(), full=False) -> list:
        """Apply a control-node update (``full``: the whole table, stale routes go)."""
        add = [r for r in add if r["vnet"] in self.vrfs and (r["nh"] in self.tunnels or (
            r["nh"] == self.underlay_ip and r.get("origin") in self.vrfs))]   # a leak may lead here
        keep = {self.route_key(r) for r in add}
        gone = [self.learned[k] for k in list(self.learned)
                if (full and k not in keep) or k in {self.route_key(r) for r in delete}]
        out, vnets = [], set()
        for r in gone:
            del self.learned[self.route_key(r)]
            vnets.add(r["vnet"])
            if r["kind"] == "vm":
                out += self._unroute(r)
        for r in add:
            if self.learned.get(self.route_key(r)) == r:
                continue
            self.learned[self.route_key(r)] = r
            vnets.add(r["vnet"])
            if r["kind"] == "vm":
                out += self._route(r)
        for vnet in sorted(vnets):
            out += self.flood(vnet)
        return out

    def _route(self, r: dict) -> list[Flow]:
        """A learned VM route: its label pushed, out of the tunnel to its host; nothing
        while that tunnel's port (or, for a route leaked to a VM here, its port) is not up.
        A leaked route (``origin``: the vnet it was leaked from) is a router hop: the
        vRouter decrements the TTL when it forwards by route lookup (``vr_forward``:
        ``vr_ip_decrement_ttl``, since contrail-vrouter c88c40e7, 2014); a VM's own VRF
        takes no hop (proxy ARP stands in for bridging there)."""
        match = self._route_match(r)
        hop = (("dec_ttl",),) if r.get("origin") else ()
        if r["nh"] == self.underlay_ip:
            iface = self.iface_at(self.vrfs[r["origin"]], r["ip"])
            if iface is None:
                return []
            out = [Flow(T_ROUTE, priority(r["ip"]), match, hop + self.deliver(iface), COOKIE_LEARNED)]
            if self.in_datapath and iface.port_security:    # its agent judges the rules
                out.append(Flow(T_TRACK, 50, match, (("resubmit", T_FLOW),), COOKIE_LEARNED))
            return out
        port = self.tunnel_port(r["nh"])
        if port is None:
            return []
        return [Flow(T_ROUTE, priority(r["ip"]), match,
                     hop + (("push_mpls", MPLS), ("set_field", "mpls_label", r["label"]), ("output", port)),
                     COOKIE_LEARNED)]

    def _unroute(self, r: dict) -> list[Delete]:
        """A learned VM route withdrawn: its entries go."""
        match = self._route_match(r)
        return [unroute(T_ROUTE, match, r["ip"], COOKIE_LEARNED)] + \
            ([Delete(T_TRACK, match, COOKIE_LEARNED, 50 if "/" in r["ip"] else None)]
             if r["nh"] == self.underlay_ip and self.in_datapath else [])

    def _route_match(self, r: dict) -> tuple:
        return _m(metadata=self.vrfs[r["vnet"]], eth_type=IP, ipv4_dst=r["ip"])

    def tunnel_port(self, nh: str) -> int | None:
        """The OpenFlow port of the GRE tunnel to ``nh`` (None before OVS reported it)."""
        return self.ofports.get(self.tunnels.get(nh, ""))

    def flush(self) -> list:
        """The control node is lost (not headless): every learned route goes."""
        return self.learn(full=True)

    def flood(self, vnet: str) -> list:
        """The VRF's ingress replication and the receive side of its broadcast label."""
        vrf = self.vrfs[vnet]
        ports = sorted(self.ofports[i.port] for i in self.local() if i.vnet == vnet)
        actions = [("output", p) for p in ports]
        remote = sorted((self.tunnel_port(r["nh"]), r["label"]) for r in self.learned.values()
                        if r["kind"] == "bcast" and r["vnet"] == vnet
                        and self.tunnel_port(r["nh"]) is not None)
        if remote:
            actions.append(("push_mpls", MPLS))
            for port, label in remote:
                actions += [("set_field", "mpls_label", label), ("output", port)]
        rx = [("pop_mpls", IP), ("set_field", "eth_src", VROUTER_MAC),
              ("set_field", "eth_dst", BROADCAST)] + [("output", p) for p in ports]
        return [Flow(T_FLOOD, 100, _m(metadata=vrf), tuple(actions)),
                Flow(T_CLASSIFY, 200, _m(eth_type=MPLS, mpls_label=BCAST_LABEL_BASE + vrf), tuple(rx))]

    # -- reactive flows --------------------------------------------------------------

    def vrf_of(self, ofport: int) -> int | None:
        iface = self.iface_of(ofport)
        return None if iface is None else self.vrfs[iface.vnet]

    def flow_entries(self, key: tuple, allow: bool = True) -> list[Flow]:
        """Forward and reverse entries of a 5-tuple; both continue to the routes, or both
        drop (a flow the security groups deny)."""
        timeout = self.opts["flow_idle_timeout"]
        actions = (("goto", T_ROUTE),) if allow else ()
        out = []
        for vrf, s, d, proto, sp, dp in (key, self.reverse_of(key)):
            match = dict(metadata=vrf, eth_type=IP, ipv4_src=s, ipv4_dst=d, ip_proto=proto)
            if proto == 6:
                match.update(tcp_src=sp, tcp_dst=dp)
            elif proto == 17:
                match.update(udp_src=sp, udp_dst=dp)
            elif proto == 1:
                match.update(icmpv4_type=sp, icmpv4_code=dp)
            out.append(Flow(T_FLOW, 100, _m(**match), actions, COOKIE_FLOW, timeout))
        return out

    # -- security groups (evaluated at flow set-up) ------------------------------------

    def _set_rules(self, groups: dict) -> None:
        self.rules = {g: tuple(rule_from_dict(r) for r in rules) for g, rules in groups.items()}

    def iface_at(self, vrf: int, ip: str) -> Iface | None:
        """The local VM interface VRF ``vrf`` routes ``ip`` to: one of its own, or one of a
        vnet joined to it by a router (a route leaked here); None: not here."""
        leak = self.learned.get(("vm", self.vnet_of.get(vrf), ip))
        vnet = leak["origin"] if leak and leak.get("origin") and leak["nh"] == self.underlay_ip else None
        for i in self.local():
            if i.ip == ip and (self.vrfs[i.vnet] == vrf or i.vnet == vnet):
                return i
        return None

    def reverse_of(self, key: tuple) -> tuple:
        """The reverse of a flow as it comes back: from a VM of this host in another VRF
        (a router between them) in that VM's VRF; otherwise in the same VRF (what comes
        from the fabric carries the label of the local sender, whose VRF it is). Contrail's
        agent gives a flow's reverse entry the destination's VRF likewise."""
        back = reverse(key)
        receiver = self.iface_at(key[0], key[2])
        return back if receiver is None else (self.vrfs[receiver.vnet],) + back[1:]

    def iface_of(self, ofport: int) -> Iface | None:
        return next((i for i in self.local() if self.ofports[i.port] == ofport), None)

    def _admits(self, iface: Iface, direction: str, pkt: secgroups.Packet) -> bool:
        """Whether a rule of ``iface``'s groups admits ``pkt`` in ``direction``."""
        if not iface.port_security:
            return True
        rules = (r for g in iface.groups for r in self.rules.get(g, ()))
        return secgroups.admitting(rules, direction, pkt, self.members.get) is not None

    def permits(self, key: tuple, in_port: int) -> bool:
        """The verdict on a new flow that entered at ``in_port``: the sending port's egress
        rules (when it entered from a local VM; with port security the source address
        must be the port's own), then the receiving port's ingress rules when that port
        is here."""
        vrf, src, dst, proto, sport, dport = key
        name = PROTOCOLS.get(proto, str(proto))
        pkt = secgroups.Packet(name, ipaddress.IPv4Address(src), ipaddress.IPv4Address(dst),
                               sport if name == "icmp" else dport, dport if name == "icmp" else None)
        sender = self.iface_of(in_port)
        if sender is not None and sender.port_security and sender.ip != src:
            return False                                  # anti-spoofing
        if sender is not None and not self._admits(sender, "egress", pkt):
            return False
        receiver = self.iface_at(vrf, dst)
        return receiver is None or self._admits(receiver, "ingress", pkt)

    def set_up(self, key: tuple, in_port: int) -> tuple[bool, list]:
        """A flow's set-up: its verdict and entries; remembered for re-evaluation."""
        allow = self.permits(key, in_port)
        self.tracked[key] = (in_port, allow)
        self.tracked.move_to_end(key)
        while len(self.tracked) > MAX_TRACKED:
            self.tracked.popitem(last=False)
        return allow, self.flow_entries(key, allow)

    def again(self, key: tuple, in_port: int) -> tuple[bool, list]:
        """A miss just after a set-up (the datapath's cache not yet revalidated): the
        entries again with the verdict given then (the key may be the reverse)."""
        t = self.tracked.get(key) or self.tracked.get(self.reverse_of(key))
        allow = t[1] if t else self.permits(key, in_port)
        return allow, self.flow_entries(key, allow)

    def security_update(self, groups: dict) -> list:
        """The groups' rules replaced (every group: name -> rule dicts): every flow set up is evaluated
        again, and those whose verdict changed get new entries (Contrail re-evaluates its
        flows on a policy change: an established connection a removed rule admitted
        stops)."""
        self._set_rules(groups)
        out = []
        for key, (in_port, allow) in list(self.tracked.items()):
            now = self.permits(key, in_port)
            if now != allow:
                self.tracked[key] = (in_port, now)
                out += self.flow_entries(key, now)
        return out

    def release(self, key: tuple, in_port: int) -> tuple | None:
        """How a held packet of an allowed flow goes on: None = through the tables again
        (it came from a VM); from the fabric (already past its label) = delivered to the
        local interface it is for."""
        if self.iface_of(in_port) is not None:
            return None
        receiver = self.iface_at(key[0], key[2])
        return self.deliver(receiver) if receiver is not None else ()


def in_vnet(ip: str, cidr: str) -> bool:
    return ipaddress.IPv4Address(ip) in ipaddress.IPv4Network(cidr)
