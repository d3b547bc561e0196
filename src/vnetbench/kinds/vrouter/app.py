"""The vRouter agent's os-ken app (see ``vrouter_agent``): OpenFlow side and the
control-node session. Decisions come from ``vnetbench.kinds.vrouter.logic.Agent``."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import NamedTuple

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import nicira_ext, ofproto_v1_3

from vnetbench.kinds.vrouter import dhcp, ofwire
from vnetbench.sdn.handshake import AFTER_PORT_DESC, PORT_DESC
from vnetbench.kinds.vrouter.logic import T_FLOW, ZONE, Agent, Delete, Flow, Meter, flow_key
from vnetbench.sdn.guard import guarded

LOG = logging.getLogger("vnetbench.vrouter")
SETTINGS: dict = {}          # set by vnetbench.kinds.vrouter.agent before the app starts
RECONNECT_S = 0.25
STATUS_S = 0.05


def _value(v):
    """Config strings 'a.b.c.d/len' become os-ken's (address, mask) pairs."""
    if isinstance(v, str) and "/" in v and v.count(".") == 3:
        import ipaddress
        net = ipaddress.IPv4Network(v, strict=False)
        return (str(net.network_address), str(net.netmask))
    return tuple(v) if isinstance(v, list) else v


@guarded
class VRouterAgent(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cfg = SETTINGS["config"]
        self.agent = Agent(cfg)
        self.underlay_ip = cfg["underlay_ip"]
        self.mtu = cfg["tenant_mtu"]
        self.dp, self.described = None, False
        self.desc = []
        self.session = None
        self.connected_since = None
        self.last_heard = 0.0
        self.lost_at = None
        self.record = open(SETTINGS["record"], "a") if SETTINGS.get("record") else None
        self._bundle = 0                 # id of the last round's bundle (``_send_setups``)
        self._state, self._state_lock = _read_state(SETTINGS["state"]), threading.Lock()
        # os-ken's native hub runs the OpenFlow events, the control session and the
        # set-up loop in threads of their own. Each decision (the agent's state changed,
        # its flow mods queued) happens whole under this lock: unserialised, a port's
        # flood computed before a route arrived was queued after the one computed with
        # it (os-ken's send queue blocks at 16 messages and lets the other thread in),
        # and 1 in 10 bring-ups left a VRF's broadcast without its remote copy.
        self._decide = threading.RLock()
        self._status()
        hub.spawn(self._control_loop)
        hub.spawn(self._setup_loop)

    # -- OpenFlow ---------------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        self.dp = ev.msg.datapath
        self.desc = []
        self.described = False

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, PORT_DESC)
    def _port_desc(self, ev):
        """(Re)connected switch: the whole pipeline again, then the learned routes (the
        ports of os-ken's own handshake request: ``vnetbench.sdn.handshake``)."""
        self.desc += ev.msg.body
        if ev.msg.flags & self.dp.ofproto.OFPMPF_REPLY_MORE:
            return
        ports, self.desc = self.desc, []
        with self._decide:
            self.agent.ofports.clear()
            out = self.agent.base()
            for p in ports:
                if p.port_no <= self.dp.ofproto.OFPP_MAX:
                    out += self.agent.port_up(p.name.decode(), p.port_no)
            learned = list(self.agent.learned.values())
            self.agent.learned.clear()
            out += self.agent.learn(add=learned)
            self._send(out)
            self.dp.send_msg(self.dp.ofproto_parser.OFPBarrierRequest(self.dp))
            self.described = True
            self._announce()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, AFTER_PORT_DESC)
    def _barrier(self, ev):
        self._status(programmed=time.time())

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _gone(self, ev):
        if ev.datapath is self.dp:
            self.dp, self.described = None, False

    @set_ev_cls(ofp_event.EventOFPPortStatus, AFTER_PORT_DESC)
    def _port_status(self, ev):
        """A port change after the port description (one sent before it is in it)."""
        msg = ev.msg
        if not self.described or msg.datapath is not self.dp:
            return
        name, no = msg.desc.name.decode(), msg.desc.port_no
        with self._decide:
            if msg.reason == msg.datapath.ofproto.OFPPR_DELETE:
                withdrawn = self.agent.local_routes(self.underlay_ip)
                self._send(self.agent.port_down(name))
                now = self.agent.local_routes(self.underlay_ip)
                self._update(add=now, delete=[r for r in withdrawn if r not in now])
            elif msg.reason == msg.datapath.ofproto.OFPPR_ADD:
                self._send(self.agent.port_up(name, no))
                self._update(add=self.agent.local_routes(self.underlay_ip), delete=[])

    @set_ev_cls(ofp_event.EventOFPPacketIn, AFTER_PORT_DESC)
    def _packet_in(self, ev):
        msg = ev.msg
        in_port, data = msg.match["in_port"], bytes(msg.data)
        if self.record:
            self.record.write(json.dumps({"table": msg.table_id, "in_port": in_port,
                                          "data": data.hex()}) + "\n")
            self.record.flush()
        fields = ofwire.packet_fields(data) if msg.table_id == T_FLOW else None
        with self._decide:
            if msg.table_id != T_FLOW:
                return self._dhcp(in_port, msg.data)
            # from a VM port its VRF; from the fabric (a port with security groups takes
            # its traffic through the flow table) the VRF its label wrote in the metadata
            vrf = self.agent.vrf_of(in_port) or msg.match.get("metadata")
            if vrf is None or fields is None:
                return
            key = flow_key(vrf, fields)
            if self.agent.setup.trap(key, (in_port, data)) is None:
                allow, entries = self.agent.again(key, in_port)
                if allow:                                  # again (idempotent): never loops
                    entries = [*entries, self._release_msg(key, in_port, data)]
                self._send(entries)

    def _dhcp(self, in_port, data):
        iface = self.agent.iface_of(in_port)
        answer = dhcp.reply(data, iface, self.mtu, self.agent.gateways.get(iface.vnet)) if iface else None
        if answer:
            self._packet_out(in_port, answer, to_port=True)

    def _setup_loop(self):
        """Set up held flows at the agent's rate; send their held packets on. The status
        file (counters) is rewritten at most every STATUS_S while set-ups happen."""
        written, shown = 0.0, (0, 0)
        while True:
            with self._decide:
                due = self.agent.setup.due() if self.dp else []
                flows, packets = [], []
                for key, held in due:
                    allow, entries = self.agent.set_up(key, held[0][0])
                    flows += entries
                    for in_port, data in held if allow else ():
                        packets.append(self._release_msg(key, in_port, data))
                self._send_setups(flows, packets)
                counts = (self.agent.setup.set_up, self.agent.setup.dropped)
            if counts != shown and time.monotonic() - written >= STATUS_S:
                self._status()
                shown, written = counts, time.monotonic()
            hub.sleep(max(0.001, min(0.02, self.agent.setup.wait())))

    def _release_msg(self, key, in_port, data):
        """A held packet of an allowed flow goes on (``Agent.release`` says how)."""
        return PacketOut(in_port, bytes(data), self.agent.release(key, in_port))

    def _packet_out(self, in_port, data, to_port=False):
        self._send([PacketOut(in_port, bytes(data), None, to_port)])

    def _send(self, decisions) -> None:
        """DECISIONS (flows, deletions, meters, packet-outs) as OpenFlow messages, in
        order, in one write to the switch: os-ken's ``send_msg`` queues every message to
        its send thread on its own, and at thousands of flow set-ups a second that
        per-message hand-off, not the decisions, was the agent's ceiling."""
        dp = self.dp
        if dp is None or not decisions:
            return
        dp.send(b"".join(self._encoded(dp, d) for d in decisions))

    def _send_setups(self, flows, packets) -> None:
        """A round of set-ups: every flow entry in one atomic bundle, then the held
        packets. OVS re-checks every datapath flow after each change of its tables; one
        commit for the round instead of one change per entry."""
        dp = self.dp
        if dp is None or not (flows or packets):
            return
        out = []
        if flows:
            self._bundle = (self._bundle + 1) & 0xFFFFFFFF
            flags = ofwire.ONF_BF_ATOMIC | ofwire.ONF_BF_ORDERED
            out.append(ofwire.bundle_control(_next_xid(dp), self._bundle, ofwire.ONF_BCT_OPEN_REQUEST, flags))
            for f in flows:
                out.append(ofwire.bundle_add(_next_xid(dp), self._bundle, flags, _wire(dp, f)))
            out.append(ofwire.bundle_control(_next_xid(dp), self._bundle, ofwire.ONF_BCT_COMMIT_REQUEST, flags))
        out += [self._encoded(dp, p) for p in packets]
        dp.send(b"".join(out))

    def _encoded(self, dp, d) -> bytes:
        """D on the wire: by ``ofwire`` on the set-up hot path, else built by os-ken."""
        fast = _wire(dp, d)
        if fast is not None:
            return fast
        msg = self._message(dp, d)
        dp.set_xid(msg)
        msg.serialize()
        return bytes(msg.buf)

    @staticmethod
    def _message(dp, d):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        if isinstance(d, PacketOut):
            if d.actions is None:
                actions = [parser.OFPActionOutput(ofp.OFPP_IN_PORT if d.to_port else ofp.OFPP_TABLE)]
            else:
                actions = [_action(ofp, parser, a) for a in d.actions]
            return parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=d.in_port,
                                       actions=actions, data=d.data)
        if isinstance(d, Meter):
            if d.id == 0:
                return parser.OFPMeterMod(dp, ofp.OFPMC_DELETE, 0, ofp.OFPM_ALL)
            band = parser.OFPMeterBandDrop(rate=d.kbps, burst_size=d.burst_kbits)
            return parser.OFPMeterMod(dp, ofp.OFPMC_ADD, ofp.OFPMF_KBPS | ofp.OFPMF_BURST, d.id, [band])
        match = parser.OFPMatch(**{k: _value(v) for k, v in d.match})
        if isinstance(d, Delete):
            kw = {"cookie": d.cookie, "cookie_mask": (1 << 64) - 1} if d.cookie is not None else {}
            if d.priority is not None:          # that entry only (a prefix route's)
                kw["priority"] = d.priority
            command = ofp.OFPFC_DELETE if d.priority is None else ofp.OFPFC_DELETE_STRICT
            return parser.OFPFlowMod(dp, table_id=d.table, command=command,
                                     out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=match, **kw)
        actions, inst = [], []
        for a in d.actions:
            op = a[0]
            if op == "goto":
                inst.append(parser.OFPInstructionGotoTable(a[1]))
            elif op == "metadata":
                inst.append(parser.OFPInstructionWriteMetadata(a[1], (1 << 64) - 1))
            elif op == "meter":
                inst.insert(0, parser.OFPInstructionMeter(a[1]))
            else:
                actions.append(_action(ofp, parser, a))
        if actions:       # after a meter instruction, before metadata/goto
            at = 1 if inst and isinstance(inst[0], parser.OFPInstructionMeter) else 0
            inst.insert(at, parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
        assert isinstance(d, Flow)
        return parser.OFPFlowMod(dp, table_id=d.table, priority=d.priority, cookie=d.cookie,
                                 idle_timeout=d.idle_timeout, match=match, instructions=inst)

    # -- control node ----------------------------------------------------------------

    def _announce(self):
        with self._decide:
            if self.dp is not None:
                self._update(add=self.agent.local_routes(self.underlay_ip), delete=[])

    def _update(self, add, delete):
        self._tell({"type": "update", "add": add, "delete": delete})

    def _tell(self, msg):
        if self.session is not None:
            try:
                self.session.sendall((json.dumps(msg) + "\n").encode())
            except OSError:
                pass

    def _control_loop(self):
        host, port = SETTINGS["control"].rsplit(":", 1)
        hold = self.agent.opts["hold_time"]
        while True:
            try:
                conn = socket.create_connection((host, int(port)), timeout=1.0)
            except OSError:
                self._check_hold(hold)
                hub.sleep(RECONNECT_S)
                continue
            conn.settimeout(min(hold / 3, 1.0))
            self.session, self.last_heard = conn, time.monotonic()
            self._tell({"type": "hello", "host": self.agent.host})
            self._announce()
            self._status(session="up")
            bye = self._read(conn, hold)
            self.session = None
            conn.close()
            if bye:
                self._lost("bye")
            self._status(session="down")
            self._check_hold(hold)
            hub.sleep(RECONNECT_S)

    def _read(self, conn, hold) -> bool:
        """Messages until the session ends; True when the node said ``bye``."""
        buf = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except socket.timeout:
                if time.monotonic() - self.last_heard > hold:
                    self._lost("hold time expired")
                    return False
                continue
            except OSError:
                return False
            if not chunk:
                return False
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.last_heard = time.monotonic()
                msg = json.loads(line)
                if msg["type"] == "bye":
                    return True
                if msg["type"] == "config":
                    with self._decide:
                        self._send(self.agent.security_update(msg["security"]["groups"]))
                    self._status(config=msg.get("generation"))
                    continue
                if msg["type"] == "update":
                    self.lost_at = None
                    full = msg.get("full", False)
                    with self._decide:
                        self._send(self.agent.learn(msg.get("add", []), msg.get("delete", []),
                                                    full=full))
                    self._status(**({"synced": time.time()} if full else {}))

    def _check_hold(self, hold):
        if self.lost_at is None and time.monotonic() - self.last_heard > hold:
            self._lost("hold time expired")

    def _lost(self, why):
        """The control node is gone: flush what it taught us unless headless."""
        if self.lost_at is not None:
            return
        self.lost_at = time.time()
        LOG.info("control node lost (%s); headless=%s", why, self.agent.opts["headless"])
        if not self.agent.opts["headless"]:
            with self._decide:
                self._send(self.agent.flush())
        self._status(lost=why)

    def _status(self, **extra):
        """The agent's state for the builder and tests (atomic replace). Called from
        the event, control and set-up threads (os-ken's native hub): one lock around
        the in-memory state and its file, else two writers lost each other's keys (a
        'programmed' overwritten by a concurrent 'synced': the bring-up then waited
        for it in vain)."""
        path = SETTINGS["state"]
        with self._state_lock:
            self._state.update(extra, learned=len(self.agent.learned),
                               flows_set_up=self.agent.setup.set_up,
                               flows_dropped=self.agent.setup.dropped, t=time.time())
            tmp = f"{path}.tmp"
            with open(tmp, "w") as f:
                json.dump(self._state, f)
            os.replace(tmp, path)


class PacketOut(NamedTuple):
    """A packet the agent sends on: ``actions`` None = through the tables (or back out
    of its port, ``to_port``), else those actions (``Agent.release``)."""
    in_port: int
    data: bytes
    actions: tuple | None
    to_port: bool = False


def _wire(dp, d) -> bytes | None:
    """D encoded by ``ofwire`` when it is a message of the flow-setup hot path (a flow
    entry, a held packet through the tables); None: os-ken builds it."""
    if (isinstance(d, Flow) and d.table == T_FLOW and all(a[0] == "goto" for a in d.actions)
            and all(k in ofwire.OXM for k, _ in d.match)):
        goto = d.actions[0][1] if d.actions else None
        return ofwire.flow_mod(_next_xid(dp), d.table, d.priority, d.cookie, d.idle_timeout,
                               d.match, goto)
    if isinstance(d, PacketOut) and d.actions is None:
        port = ofwire.OFPP_IN_PORT if d.to_port else ofwire.OFPP_TABLE
        return ofwire.packet_out(_next_xid(dp), d.in_port, d.data, port)
    return None


def _next_xid(dp) -> int:
    """The datapath's next transaction id, as os-ken's ``Datapath.set_xid`` counts."""
    dp.xid = (dp.xid + 1) & dp.ofproto.MAX_XID
    return dp.xid


def _read_state(path) -> dict:
    """What an earlier agent of this host wrote (kept across a restart)."""
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _action(ofp, parser, a):
    op = a[0]
    if op == "output":
        return parser.OFPActionOutput(a[1])
    if op == "in_port":
        return parser.OFPActionOutput(ofp.OFPP_IN_PORT)
    if op == "controller":
        return parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
    if op == "set_field":
        return parser.OFPActionSetField(**{a[1]: a[2]})
    if op == "dec_ttl":
        return parser.OFPActionDecNwTtl()
    if op == "push_mpls":
        return parser.OFPActionPushMpls(a[1])
    if op == "pop_mpls":
        return parser.OFPActionPopMpls(a[1])
    if op == "move":
        return parser.NXActionRegMove(src_field=a[1], dst_field=a[2], n_bits=a[3])
    if op == "resubmit":
        return parser.NXActionResubmitTable(in_port=NX_IN_PORT, table_id=a[1])
    if op == "ct":
        return _ct(parser, commit=a[1], table=a[2])
    raise ValueError(f"unknown action {a!r}")


NX_IN_PORT = 0xFFF8          # resubmit's in_port: keep the packet's (16-bit, OpenFlow 1.0's)
NX_CT_F_COMMIT, NX_CT_RECIRC_NONE = 1, 0xFF


def _ct(parser, commit: bool, table: int | None):
    """``ct(zone=reg2[0..15][,commit][,table=T])``: the VRF's connection-tracking zone."""
    return parser.NXActionCT(flags=NX_CT_F_COMMIT if commit else 0, zone_src=ZONE,
                             zone_ofs_nbits=nicira_ext.ofs_nbits(0, 15),
                             recirc_table=NX_CT_RECIRC_NONE if table is None else table,
                             alg=0, actions=[])
