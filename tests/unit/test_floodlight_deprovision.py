"""The Floodlight app's vnet deletion: a watcher thread reads the testbed's list of
deleted vnets and posts it as an event; the app's event thread applies it. The
watcher used to apply the deletion itself, beside the event thread (os-ken's native
hub runs both as real threads), and died of an exception in CI (2026-11-24): every
later deletion went unacknowledged."""

import json
import threading
import time
from types import SimpleNamespace


from vnetbench.kinds.ovs_openflow import floodlight
from vnetbench.kinds.ovs_openflow.floodlight import EventRemoveVnets, Floodlight


def _watch(path):
    posted = []
    me = SimpleNamespace(settings={"removed": str(path)}, name="Floodlight", is_active=True,
                         send_event=lambda name, ev: posted.append((name, ev.vnets)))
    t = threading.Thread(target=Floodlight._watch_removed, args=(me,), daemon=True)
    t.start()
    return me, t, posted


def _until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def test_the_watcher_posts_each_change_and_survives_a_bad_read(tmp_path, caplog):
    path = tmp_path / "removed-vnets.json"
    me, t, posted = _watch(path)
    try:
        time.sleep(3 * floodlight.POLL_S)              # no file yet: nothing, no error
        assert posted == [] and t.is_alive()
        path.write_text("[\"blue\"")                    # not JSON: logged, polled again
        assert _until(lambda: "reading" in caplog.text)
        assert t.is_alive() and posted == []
        path.write_text(json.dumps(["blue"]))
        assert _until(lambda: posted == [("Floodlight", ["blue"])])
        path.write_text(json.dumps(["blue", "red"]))
        assert _until(lambda: posted[-1] == ("Floodlight", ["blue", "red"]))
    finally:
        me.is_active = False
        t.join(5)
    assert not t.is_alive()                             # it ends with the app


class Fwd:
    def __init__(self):
        self.asked = []

    def remove_vnet(self, vnet):
        self.asked.append(vnet)
        return [f"forget {vnet}"]


class Datapath:
    def __init__(self):
        from os_ken.ofproto import ofproto_v1_3_parser
        self.ofproto_parser, self.sent = ofproto_v1_3_parser, []

    def send_msg(self, msg):
        self.sent.append(type(msg).__name__)


def test_the_event_thread_applies_each_vnet_once_then_acknowledges(tmp_path):
    path = tmp_path / "removed-vnets.json"
    dp, applied = Datapath(), []
    me = SimpleNamespace(settings={"removed": str(path)}, removed=[], fwd=Fwd(), master=True,
                         dps={1: dp}, _apply=lambda d, data: applied.append(d))
    Floodlight._remove_vnets(me, EventRemoveVnets(["blue"]))
    Floodlight._remove_vnets(me, EventRemoveVnets(["blue", "red"]))
    assert me.fwd.asked == ["blue", "red"] and applied == ["forget blue", "forget red"]
    assert dp.sent == ["OFPBarrierRequest", "OFPBarrierRequest"]
    assert json.loads((tmp_path / "removed-vnets.json.ack").read_text()) == ["blue", "red"]


def test_a_slave_forgets_but_neither_pushes_nor_acknowledges(tmp_path):
    path = tmp_path / "removed-vnets.json"
    applied = []
    me = SimpleNamespace(settings={"removed": str(path)}, removed=[], fwd=Fwd(), master=False,
                         dps={}, _apply=lambda d, data: applied.append(d))
    Floodlight._remove_vnets(me, EventRemoveVnets(["blue"]))
    assert me.fwd.asked == ["blue"] and applied == []
    assert not (tmp_path / "removed-vnets.json.ack").exists()


def test_deletion_and_mastership_are_event_handlers():
    """Registered as os-ken handlers of the app's own events: run on its event thread."""
    assert EventRemoveVnets in Floodlight._remove_vnets.callers
    assert floodlight.EventMaster in Floodlight._mastered.callers
