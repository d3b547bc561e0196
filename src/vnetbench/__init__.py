"""vnetbench: one battery of virtual-network tests, with the vSwitch's CPU cost beside every number."""

__version__ = "0.1.0"
