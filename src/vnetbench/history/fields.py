"""Names the history shares between its layers, importable without SQLAlchemy (the CLI
builds every command's parser on each start and must not pay for a database driver)."""

DEFAULT_DB = "results/history.sqlite"

#: provenance fields kept as columns of ``records``: what ``--where`` selects on
PROVENANCE_COLUMNS = ("kind", "network", "backend", "datapath", "ports", "tenant_mtu", "underlay_mtu",
                      "security_groups", "kernel", "cpu_model", "ovs_version", "ovn_version",
                      "openstack_version", "vnetbench_version")

#: what --where may select on: the record's test, the provenance columns, a run's tag
WHERE_KEYS = ("test",) + PROVENANCE_COLUMNS + ("tag",)
