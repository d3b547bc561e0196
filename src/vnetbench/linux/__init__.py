"""The Linux toolkit: processes, namespaces, links, netlink batches, offloads and this
machine's libvirt daemon.

Every backend, the kinds' realisations, the monitor and the all-in-one cloud drive the
same host, so its primitives live here once. This package imports nothing of
``vnetbench.testbed`` or ``vnetbench.kinds`` (tests/unit/test_layers.py holds it).
"""
