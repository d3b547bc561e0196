"""The Linux toolkit: processes, namespaces, links, netlink batches and offloads.

Every backend, the kinds' realisations and the monitor drive the same kernel,
so its primitives live here once. This package imports nothing of
``vnetbench.testbed`` or ``vnetbench.kinds`` (tests/unit/test_layers.py holds it).
"""
