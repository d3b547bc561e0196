"""Rally plugins (loaded by the ``rally_plugins`` entry point): the testbed context,
one thin scenario per test family, and the ``vnetbench`` SLA on measured values."""
