"""vnetbench-collector: Prometheus exporter of vSwitch CPU and softirq time.

Importing this package registers nothing anywhere; build a ``VSwitchCollector``
and register it in a registry of your own (the CLI uses a private one).
"""

from .collector import VSwitchCollector

__all__ = ["VSwitchCollector"]
__version__ = "0.1.0"
