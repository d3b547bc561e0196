"""Grafana dashboards as code (grafana-foundation-sdk): overlay comparison,
vSwitch CPU live and efficiency, generated into dashboards/json/."""
