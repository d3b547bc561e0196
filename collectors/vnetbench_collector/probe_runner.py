"""``python -m vnetbench_collector.probe_runner --out FILE``: the interrupt-time probe's
runner (``probe.main``), a module of its own so that ``-m`` does not execute
``probe`` a second time after the package imported it."""

from .probe import main

if __name__ == "__main__":
    main()
