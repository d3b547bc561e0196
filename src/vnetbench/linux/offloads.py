"""Offloads switched off inside a namespace through the SIOCETHTOOL ioctl (pyroute2's
``IoctlEthtool``), from a thread that entered it.

Why not ``ethtool -K``: one ``ip netns exec ethtool`` per veth end cost ~12 ms; a
userspace-datapath testbed of 1,024 VMs needs 2,048 of them (12.6 s of its 22 s
bring-up, issue 24). The ioctl is what ethtool itself falls back to, and takes
microseconds.

Feature words are ethtool's ``-K`` short names the builder uses:

- ``tx``: TX checksum offload (``ETHTOOL_STXCSUM``: every ``tx-checksum-*`` feature,
  as ``ethtool -K DEV tx off`` clears them; the kernel drops TSO/GSO that depend on it);
- ``txvlan``: TX VLAN tag insertion (the ``tx-vlan-hw-insert`` feature).
"""

from __future__ import annotations

from pyroute2.ethtool.ioctl import IoctlEthtool, NoSuchDevice, NotSupportedError

from vnetbench.linux import nsops

FEATURES = {"txvlan": "tx-vlan-hw-insert"}


def off(ns: str, devices) -> None:
    """Switch off, in namespace NS, the features of each (device, words) in DEVICES
    (``("tx",)``, ``("tx", "txvlan")``); one thread enters NS for all of them."""
    todo = [(dev, tuple(words)) for dev, words in devices if words]
    if todo:
        nsops.in_netns(ns, lambda: _apply(todo))


def _apply(todo) -> None:
    eth = IoctlEthtool()
    try:
        for dev, words in todo:
            eth.change_ifname(dev)
            _device_off(eth, dev, words)
    finally:
        eth.close()


def _device_off(eth: IoctlEthtool, dev: str, words) -> None:
    unknown = [w for w in words if w != "tx" and w not in FEATURES]
    if unknown:
        raise ValueError(f"offload words {unknown}: known are tx, {', '.join(FEATURES)}")
    try:
        if "tx" in words:
            eth.set_offload_flag("tx-checksumming", 0)
        named = [FEATURES[w] for w in words if w in FEATURES]
        if named:
            features = eth.get_features()
            for name in named:
                features.set_value(name, False)
            eth.set_features(features)
    except (OSError, NoSuchDevice, NotSupportedError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise OSError(f"offloads {' '.join(words)} off on {dev}: {why}") from None
