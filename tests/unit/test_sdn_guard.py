"""An error in one os-ken handler must not end the app's event thread: os-ken's native
hub makes any Exception its TaskExit, which the event loop re-raises and the thread
swallows. Measured on os-ken's own event loop, with and without ``guarded``."""

import logging
import time

import pytest
from os_ken.base import app_manager
from os_ken.controller import event
from os_ken.controller.handler import set_ev_cls

from vnetbench.kinds.ovs_openflow.floodlight import Floodlight
from vnetbench.sdn.guard import guarded
from vnetbench.kinds.vrouter.app import VRouterAgent


class Poke(event.EventBase):
    def __init__(self, fail: bool):
        super().__init__()
        self.fail = fail


class App(app_manager.OSKenApp):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.heard = []

    @set_ev_cls(Poke)
    def _poke(self, ev):
        if ev.fail:
            raise RuntimeError("dictionary changed size during iteration")
        self.heard.append(ev)


def _run(cls):
    app = cls()
    app_manager.register_instance(app)          # what AppManager does: handlers by event
    app.start()
    try:
        app._send_event(Poke(fail=True), None)
        app._send_event(Poke(fail=False), None)
        deadline = time.monotonic() + 5
        while not app.heard and app.threads[0].is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        return app, app.threads[0].is_alive()
    finally:
        app.stop()


def test_unguarded_the_event_thread_dies_of_one_error():
    """The control: what os-ken does without the guard (so the guard's test can fail)."""
    app, alive = _run(App)
    assert not alive and app.heard == []


def test_guarded_the_error_is_logged_and_the_next_event_heard(caplog):
    Guarded = guarded(type("Guarded", (App,), {"_poke": App._poke}))
    with caplog.at_level(logging.ERROR, logger="vnetbench.sdn"):
        app, alive = _run(Guarded)
    assert alive and len(app.heard) == 1
    assert "Guarded._poke failed on Poke" in caplog.text
    assert "dictionary changed size" in caplog.text


@pytest.mark.parametrize("cls", [Floodlight, VRouterAgent])
def test_every_handler_of_the_apps_is_guarded(cls):
    handlers = [f for f in vars(cls).values() if callable(f) and hasattr(f, "callers")]
    assert handlers and all(f.__code__ is not None and f.__wrapped__ for f in handlers)
