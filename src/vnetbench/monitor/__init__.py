"""Monitoring of a run: a real Prometheus (and Pushgateway) in a namespace of the
suite's own, scraping one vnetbench-collector per emulated host, with the
battery's results pushed beside the CPU series."""
