"""The data-plane test battery: one module per test family.

Each family takes a Deployment and a pair, runs repetitions through the pure
traffic executors, measures the vSwitch CPU over exactly each repetition's
window, and returns a ``Result``. Rally scenarios are thin wrappers around these.
"""
