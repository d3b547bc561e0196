"""The os-ken application: Floodlight v0.90 Forwarding + VNF behind IVS's packet-in limit.

This module is the OpenFlow 1.3 side only: it turns switch events into calls of
``forwarding.Forwarding`` (the decisions) and the decisions into OpenFlow
messages. Per switch it installs the packet-in path IVS gives: one OpenFlow 1.3
meter per ingress port (``packet_in_rate`` packets/s, ``packet_in_burst``) in front
of a per-port "send to controller" flow, below every forwarding flow; then, as IVS's
overall limiter (``PKTIN_INTERVAL`` 3000 us, burst 32: ~333/s per switch), every
packet for the controller goes on to table 1, whose one flow passes a bridge-wide
meter (``packet_in_global_rate``, ``packet_in_global_burst``) and sends it.

Several instances: the one holding the lock file is master, the others connect as
slaves (OpenFlow roles: a slave gets no packet-ins) and take over, with a newer
generation id, when the master's lock is released (it died or stopped).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time

from os_ken.base import app_manager
from os_ken.controller import event, ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.lib.packet import ethernet, ipv4, packet, tcp, udp, vlan
from os_ken.ofproto import ofproto_v1_3

from vnetbench.sdn.handshake import AFTER_PORT_DESC, PORT_DESC
from vnetbench.kinds.ovs_openflow.forwarding import (
    DeleteFlows, Drop, FlowMod, Forwarding, Frame, Options, PacketOut, Topology,
)
from vnetbench.sdn.guard import guarded

LOG = logging.getLogger("vnetbench.floodlight")
COOKIE_FORWARDING = 0x00F1_00D1_1600_0090       # flows pushed by Forwarding
COOKIE_PACKET_IN = 0x00F1_00D1_1600_0001        # the metered send-to-controller flows
PACKET_IN_PRIORITY = 1
PACKET_IN_TABLE = 1          # the bridge-wide packet-in meter's table
GLOBAL_METER = 0xFFFF        # its meter id (per-port meters are numbered by port, < 0xFF00)
SETTINGS: dict = {}          # set by vnetbench.sdn.controller before the app starts
POLL_S = 0.02                # the deleted-vnets watcher's period


class EventRemoveVnets(event.EventBase):
    """The deleted-vnets file changed (posted by its watcher thread)."""

    def __init__(self, vnets: list):
        super().__init__()
        self.vnets = vnets


class EventMaster(event.EventBase):
    """This instance took the instances' lock (posted by the election thread)."""


def parse_frame(data: bytes) -> Frame | None:
    """The model's view of a packet (None when it is not Ethernet)."""
    pkt = packet.Packet(data)
    eth = pkt.get_protocol(ethernet.ethernet)
    if eth is None:
        return None
    tag = pkt.get_protocol(vlan.vlan)
    eth_type = tag.ethertype if tag else eth.ethertype
    fields = {"src": eth.src, "dst": eth.dst, "eth_type": eth_type, "vlan": tag.vid if tag else None}
    ip = pkt.get_protocol(ipv4.ipv4)
    if ip is not None:
        fields.update(ip_src=ip.src, ip_dst=ip.dst, ip_proto=ip.proto)
        l4 = pkt.get_protocol(tcp.tcp) or pkt.get_protocol(udp.udp)
        if l4 is not None:
            fields.update(l4_src=l4.src_port, l4_dst=l4.dst_port)
    return Frame(**fields)


def forwarding_from(settings: dict) -> Forwarding:
    cfg = settings["config"]
    o = cfg["options"]
    return Forwarding(Topology.from_config(cfg),
                      Options(match=o["match"], idle_timeout=o["idle_timeout"],
                              hard_timeout=o["hard_timeout"],
                              broadcast_isolation=o["broadcast_isolation"]))


@guarded
class Floodlight(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.settings = SETTINGS
        self.opts = SETTINGS["config"]["options"]
        self.fwd = forwarding_from(SETTINGS)
        self.dps = {}
        self.desc = {}               # dpid -> ports of a multipart reply so far
        self.described: set = set()  # dpids whose port description the app has taken
        self.record = open(SETTINGS["record"], "a") if SETTINGS.get("record") else None
        self.multi = self.opts["controllers"] > 1
        self.master = not self.multi
        self._lock_fd = None
        self.removed: list = []

    def start(self):
        """The watcher threads start once the app is registered (they post it events).

        os-ken's native hub runs handlers and these threads as real threads: the
        threads only read files and post events; the state (``fwd``, ``dps``,
        ``master``) is touched on the app's event thread alone."""
        thread = super().start()
        if self.multi:
            self.threads.append(hub.spawn(self._elect))
        if self.settings.get("removed"):
            self.threads.append(hub.spawn(self._watch_removed))
        return thread

    # -- roles (several instances) -----------------------------------------------

    def _elect(self):
        """Poll the instances' lock: whoever holds it is master (flock dies with its holder)."""
        self._lock_fd = os.open(self.settings["lock"], os.O_CREAT | os.O_RDWR, 0o600)
        while self.is_active:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                hub.sleep(0.2)
                continue
            self.send_event(self.name, EventMaster())
            return

    @set_ev_cls(EventMaster)
    def _mastered(self, ev):
        self.master = True
        LOG.info("instance %s is master", self.settings["instance"])
        for dp in list(self.dps.values()):
            self._send_role(dp)

    def _send_role(self, dp):
        if not self.multi:
            return
        ofp, parser = dp.ofproto, dp.ofproto_parser
        role = ofp.OFPCR_ROLE_MASTER if self.master else ofp.OFPCR_ROLE_SLAVE
        dp.send_msg(parser.OFPRoleRequest(dp, role, int(time.time() * 1000)))

    # -- deprovisioning (the REST API's network deletion, as a file) -------------

    def _watch_removed(self):
        """Poll the list of deleted vnets (written by the testbed, replaced atomically)
        and post it on each change. A failed read is logged and retried: this thread
        dying would leave every later deletion unacknowledged."""
        path, seen = self.settings["removed"], None
        while self.is_active:
            try:
                mtime = os.stat(path).st_mtime_ns
                if mtime != seen:
                    with open(path) as f:
                        vnets = json.load(f)
                    seen = mtime
                    self.send_event(self.name, EventRemoveVnets(vnets))
            except FileNotFoundError:
                pass
            except Exception:                       # noqa: BLE001 -- logged, polled again
                LOG.exception("reading %s", path)
            hub.sleep(POLL_S)

    @set_ev_cls(EventRemoveVnets)
    def _remove_vnets(self, ev) -> None:
        """Apply each newly deleted vnet once; the master acknowledges the whole list
        (``<file>.ack``) after a barrier on every switch."""
        for vnet in [v for v in ev.vnets if v not in self.removed]:
            self.removed.append(vnet)
            for decision in self.fwd.remove_vnet(vnet):
                if self.master:
                    self._apply(decision, b"")
        if not self.master:
            return
        for dp in list(self.dps.values()):
            dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))
        tmp = f"{self.settings['removed']}.ack.tmp"
        with open(tmp, "w") as f:
            json.dump(self.removed, f)
        os.replace(tmp, f"{self.settings['removed']}.ack")

    # -- switch lifecycle --------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        """The reply's own datapath id: os-ken sets ``dp.id`` in its handler of this
        reply, on the switch's receive thread, which may run after this one."""
        dp, dpid = ev.msg.datapath, ev.msg.datapath_id
        self.dps[dpid] = dp
        self.described.discard(dpid)
        self._send_role(dp)
        self.desc[dpid] = {}

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, PORT_DESC)
    def _port_desc(self, ev):
        """The switch's ports, from os-ken's own handshake request (``handshake``)."""
        dp = ev.msg.datapath
        self._record("port_desc", dp.id, ev.msg.buf)
        self.desc.setdefault(dp.id, {}).update({p.port_no: p.name.decode() for p in ev.msg.body})
        if ev.msg.flags & dp.ofproto.OFPMPF_REPLY_MORE:
            return
        ports = self.desc.pop(dp.id)
        self.fwd.switch_up(dp.id, ports)
        self.described.add(dp.id)
        if self.master:
            self._packet_in_path(dp, ports)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _gone(self, ev):
        dp = ev.datapath
        if dp.id is not None and self.dps.get(dp.id) is dp:
            del self.dps[dp.id]
            self.described.discard(dp.id)
            self.fwd.switch_down(dp.id)

    @set_ev_cls(ofp_event.EventOFPPortStatus, AFTER_PORT_DESC)
    def _port_status(self, ev):
        """A port change after the port description. One the switch sent before it (heard
        in CONFIG, possibly before os-ken has even set ``dp.id``) is already in it."""
        msg, dp = ev.msg, ev.msg.datapath
        ofp = dp.ofproto
        if dp.id not in self.described:
            return
        if msg.reason == ofp.OFPPR_DELETE:
            for decision in self.fwd.port_down(dp.id, msg.desc.port_no):
                self._apply(decision, b"")
            return
        self.fwd.port_up(dp.id, msg.desc.port_no, msg.desc.name.decode())
        if msg.reason == ofp.OFPPR_ADD and self.master:
            self._packet_in_path(dp, {msg.desc.port_no: msg.desc.name.decode()}, fresh=False)

    def _packet_in_path(self, dp, ports: dict, fresh=True):
        """Table miss -> controller; with a limit, per ingress port through its own meter,
        then (with a global limit) through the bridge's meter in table 1. ``fresh`` (the
        master's handshake with the switch): every flow and meter is deleted first."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_ctl = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        apply = parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, to_ctl)
        rate, burst = self.opts["packet_in_rate"], self.opts["packet_in_burst"]
        grate = self.opts.get("packet_in_global_rate", 0)
        punt = [parser.OFPInstructionGotoTable(PACKET_IN_TABLE)] if grate else [apply]
        if fresh:
            # Floodlight's handshake deletes every pre-existing flow (Controller.OFChannelHandler
            # .sendFeatureReplyConfiguration: sw.clearAllFlowMods()), so a restarted controller
            # starts from an empty table, not from flows pointing where a VM no longer is
            dp.send_msg(parser.OFPFlowMod(dp, table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE,
                                          out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                          match=parser.OFPMatch()))
            dp.send_msg(parser.OFPMeterMod(dp, ofp.OFPMC_DELETE, 0, ofp.OFPM_ALL))
            if grate:
                self._meter(dp, GLOBAL_METER, grate, self.opts["packet_in_global_burst"])
                dp.send_msg(parser.OFPFlowMod(
                    dp, cookie=COOKIE_PACKET_IN, table_id=PACKET_IN_TABLE, priority=0,
                    match=parser.OFPMatch(),
                    instructions=[parser.OFPInstructionMeter(GLOBAL_METER), apply]))
            dp.send_msg(parser.OFPFlowMod(dp, cookie=COOKIE_PACKET_IN, priority=0,
                                          match=parser.OFPMatch(), instructions=punt))
        if rate:
            self._meters(dp, ports, punt, rate, burst)
        dp.send_msg(parser.OFPBarrierRequest(dp))

    def _meters(self, dp, ports, punt, rate, burst):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        for number in ports:
            if number > ofp.OFPP_MAX:
                continue
            self._meter(dp, number, rate, burst)
            dp.send_msg(parser.OFPFlowMod(
                dp, cookie=COOKIE_PACKET_IN, priority=PACKET_IN_PRIORITY,
                match=parser.OFPMatch(in_port=number),
                instructions=[parser.OFPInstructionMeter(number), *punt]))

    @staticmethod
    def _meter(dp, meter_id, rate, burst):
        """A packets/s meter that drops above ``rate`` (burst ``burst``)."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        band = parser.OFPMeterBandDrop(rate=rate, burst_size=burst)
        dp.send_msg(parser.OFPMeterMod(dp, ofp.OFPMC_ADD, ofp.OFPMF_PKTPS | ofp.OFPMF_BURST,
                                       meter_id, [band]))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, AFTER_PORT_DESC)
    def _barrier(self, ev):
        """The switch applied everything sent before: its packet-in path is in place."""
        ready = self.settings.get("ready_dir")
        if ready and self.master:
            path = os.path.join(ready, str(ev.msg.datapath.id))
            with open(path, "w") as f:
                f.write(f"{time.time()}\n")

    # -- packet-ins ----------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, AFTER_PORT_DESC)
    def _packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        self._record("packet_in", dp.id, msg.buf)
        frame = parse_frame(msg.data)
        if frame is None:
            return
        for decision in self.fwd.packet_in(dp.id, msg.match["in_port"], frame):
            self._apply(decision, msg.data)

    def _apply(self, d, data: bytes) -> None:
        dp = self.dps.get(d.dpid)
        if dp is None or isinstance(d, Drop):
            return
        ofp, parser = dp.ofproto, dp.ofproto_parser
        if isinstance(d, FlowMod):
            actions = [parser.OFPActionOutput(d.out_port)]
            if d.push_vlan is not None:
                actions = _push(parser, d.push_vlan) + actions
            elif d.pop_vlan:
                actions = [parser.OFPActionPopVlan()] + actions
            dp.send_msg(parser.OFPFlowMod(
                dp, cookie=COOKIE_FORWARDING, priority=d.priority, idle_timeout=d.idle_timeout,
                hard_timeout=d.hard_timeout, match=parser.OFPMatch(**dict(d.match)),
                instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]))
        elif isinstance(d, PacketOut):
            actions = [parser.OFPActionOutput(p) for p in d.out_ports]
            for vlan, ports in d.push:               # untagged frame into VLAN links
                actions += _push(parser, vlan) + [parser.OFPActionOutput(p) for p in ports]
                actions.append(parser.OFPActionPopVlan())
            if d.pop_ports:                          # tagged frame out to edge ports
                actions += [parser.OFPActionPopVlan()] + [parser.OFPActionOutput(p) for p in d.pop_ports]
            if actions:
                dp.send_msg(parser.OFPPacketOut(
                    dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=d.in_port, actions=actions, data=data))
        elif isinstance(d, DeleteFlows):
            dp.send_msg(parser.OFPFlowMod(
                dp, cookie=COOKIE_FORWARDING, cookie_mask=0xFFFFFFFFFFFFFFFF,
                table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                out_group=ofp.OFPG_ANY, match=parser.OFPMatch(**dict(d.match))))

    def _record(self, kind: str, dpid: int, buf) -> None:
        """Raw OpenFlow messages for replay in unit tests (``--record``)."""
        if self.record:
            self.record.write(json.dumps({"type": kind, "dpid": dpid, "t": time.time(),
                                          "buf": bytes(buf).hex()}) + "\n")
            self.record.flush()


def _push(parser, vlan: int) -> list:
    """Tag a frame with ``vlan`` (802.1Q)."""
    return [parser.OFPActionPushVlan(0x8100),
            parser.OFPActionSetField(vlan_vid=vlan | 0x1000)]
