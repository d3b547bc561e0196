"""SIGINT/SIGTERM during bring-up and teardown: noted, then delivered at a safe point.

Raised asynchronously, KeyboardInterrupt can land anywhere: between a thread's
start and its join (the thread then creates a namespace after teardown looked),
inside a finalizer (printed as a traceback and lost: the build goes on), in the
middle of waiting for a child. Inside ``deferred()`` the handler only notes the
signal; ``checkpoint()`` -- called before every journaled creation and every
command -- raises it. Unwinding runs to its (time-bounded) end, then the
interrupt propagates. Outside, SIGINT and SIGTERM raise KeyboardInterrupt as usual.
"""

from __future__ import annotations

import contextlib
import signal
import threading

_state = {"depth": 0, "pending": 0}


def handler(signum, frame):
    if _state["depth"]:
        _state["pending"] += 1
        return
    raise KeyboardInterrupt


def pending() -> bool:
    return _state["pending"] > 0


def checkpoint() -> None:
    """Deliver a noted signal (any thread: the interrupt reaches the main one through
    the failing step)."""
    if _state["pending"]:
        raise KeyboardInterrupt


@contextlib.contextmanager
def deferred():
    """Note SIGINT/SIGTERM instead of raising them; installs the handler when called
    on the main thread (library use, e.g. a Rally context, gets it too)."""
    main = threading.current_thread() is threading.main_thread()
    # a signal the process was started with ignored (a background job's SIGINT) stays ignored
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)
           if signal.getsignal(s) is not signal.SIG_IGN} if main else {}
    _state["depth"] += 1
    clean = False
    try:
        yield
        clean = True
    finally:
        _state["depth"] -= 1
        late = not _state["depth"] and _state["pending"]
        if not _state["depth"]:
            _state["pending"] = 0
        for s, h in old.items():
            signal.signal(s, h)
    if late and clean:       # a signal after the last checkpoint: deliver it now
        raise KeyboardInterrupt
