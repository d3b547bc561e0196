"""Keep an os-ken app's event thread alive through an error in one of its handlers.

os-ken 4.2's default hub (``native``: real threads) defines ``hub.TaskExit`` as
``Exception``. ``OSKenApp._event_loop`` re-raises TaskExit out of a handler to end the
loop, and ``HubThread.run`` swallows it: any exception in any handler ends the app's
event thread without a word, and the app hears nothing from then on (a vnet deletion
never acknowledged, CI 2026-11-24). ``guarded`` wraps each handler of an app class so
its error is logged (with the traceback) and the loop goes on with the next event.
"""

from __future__ import annotations

import functools
import logging

LOG = logging.getLogger("vnetbench.sdn")


def logged(handler):
    @functools.wraps(handler)
    def run(self, ev):
        try:
            return handler(self, ev)
        except Exception:                       # noqa: BLE001 -- logged, the loop goes on
            LOG.exception("%s.%s failed on %s", type(self).__name__, handler.__name__,
                          type(ev).__name__)
    return run


def guarded(cls):
    """CLS with every os-ken event handler (what ``set_ev_cls`` marked) wrapped by ``logged``."""
    for name, fn in list(vars(cls).items()):
        if callable(fn) and hasattr(fn, "callers"):
            setattr(cls, name, logged(fn))
    return cls
