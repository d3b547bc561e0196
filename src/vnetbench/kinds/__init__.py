"""vSwitch kinds, found by registry (Neutron's ML2 mechanism drivers, Rally's plugins).

A kind is one package under ``vnetbench.kinds``: its description in ``__init__.py``
(what it supports and why not the rest, its options, the flow state it keeps, what the
functional suite and the cloud backend need to know of it: the ``Kind`` interface of
``vnetbench.kinds.base``) and its netns driver in ``driver.py`` (how the netns backend
realises it: wiring, daemons, flow expiry, vnet removal, vSwitch restart, port plugging,
its controller's faults: ``vnetbench.kinds.driver``). Every other module asks the kind
(``kinds.of(testbed)``), the netns backend its driver (``kinds.netns_driver(testbed)``),
and none names one: ``tests/unit/test_kind_names.py`` fails when one does.

Adding a kind is its package plus one line in ``registry``. This module imports no
kind until one is asked for, and no driver until the netns backend asks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from vnetbench.kinds import registry

if TYPE_CHECKING:
    from vnetbench.kinds.base import Kind
    from vnetbench.kinds.driver import NetnsDriver

REGISTRY, DEFAULT = registry.REGISTRY, registry.DEFAULT

_loaded: dict = {}
_drivers: dict = {}


class UnknownKind(KeyError):
    pass


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get(name) -> "Kind":
    """The kind registered as NAME (a str or a VSwitchKind), its package imported once."""
    key = str(name)
    if key not in _loaded:
        if key not in REGISTRY:
            raise UnknownKind(f"no vSwitch kind {key!r}; registered: {', '.join(REGISTRY)}")
        kind = importlib.import_module(REGISTRY[key]).KIND
        from vnetbench.kinds.base import check
        check(kind, key)
        _loaded[key] = kind
    return _loaded[key]


def of(testbed) -> "Kind":
    """The kind of a Testbed (or of anything with a ``testbed``, e.g. a Deployment)."""
    tb = getattr(testbed, "testbed", testbed)
    return get(tb.vswitch.kind)


def netns_driver(testbed) -> "NetnsDriver":
    """The netns backend's driver of a Testbed's kind (or of anything with a ``testbed``,
    or of a kind's name): its package's ``driver.Driver``, loaded and checked once."""
    tb = getattr(testbed, "testbed", testbed)
    kind = get(tb.vswitch.kind if hasattr(tb, "vswitch") else tb)
    if kind.name not in _drivers:
        from vnetbench.kinds import driver
        made = importlib.import_module(f"{REGISTRY[kind.name]}.driver").Driver(kind)
        driver.check(made, kind)
        _drivers[kind.name] = made
    return _drivers[kind.name]


def all_kinds() -> tuple:
    return tuple(get(n) for n in REGISTRY)


def encap_overhead(kind, ntype) -> int:
    """Bytes in front of the tenant IP packet for KIND over NTYPE: the network type's
    header (``model.ENCAP_OVERHEAD``), or more where the kind adds some (its ``overhead``)."""
    from vnetbench.testbed.model import ENCAP_OVERHEAD
    return get(kind).overhead.get(ntype, ENCAP_OVERHEAD[ntype])
