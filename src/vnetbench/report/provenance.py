"""What the compared numbers depend on, per column, from the records' provenance and
labels: kernel, vSwitch version and datapath, MTUs, the testbed run ids, the dates."""

from __future__ import annotations

import time

from vnetbench.report.table import Column, Table

FIELDS = (
    ("kernel", lambda r: r.provenance.get("kernel")),
    ("machine", lambda r: r.provenance.get("machine")),
    ("vSwitch", lambda r: _vswitch(r.labels["vswitch"], r.provenance)),
    ("OpenStack", lambda r: _cloud(r, "series")),
    ("Neutron ML2", lambda r: _cloud(r, "mechanism_driver")),
    ("OVN", lambda r: _cloud(r, "ovn")),
    ("OVS datapath", lambda r: r.provenance.get("ovs_datapath")),
    ("OVS ports", lambda r: r.provenance.get("ovs_ports")),
    ("tenant MTU", lambda r: r.provenance.get("tenant_mtu")),
    ("underlay MTU", lambda r: r.provenance.get("underlay_mtu")),
    ("security groups", lambda r: r.provenance.get("security_groups")),
    ("iperf3", lambda r: r.provenance.get("tools", {}).get("iperf3")),
    ("vnetbench", lambda r: r.provenance.get("vnetbench")),
    ("testbed run ids", lambda r: r.labels.get("run_id")),
)


def summary(table: Table) -> list[tuple[Column, dict]]:
    """[(column, {field: 'distinct values, comma separated'})]; N/A columns say why."""
    return [(c, _fields(c)) for c in table.columns]


def _fields(column: Column) -> dict:
    measured = [r for r in column.records if "not_applicable" not in r.extra]
    if not measured:
        return {"not applicable": "; ".join(dict.fromkeys(r.extra["not_applicable"]
                                                           for r in column.records))}
    out = {name: ", ".join(dict.fromkeys(str(v) for r in measured if (v := get(r)) is not None))
           for name, get in FIELDS}
    out["measured (UTC)"] = f"{_date(min(r.started for r in measured))} - " \
                            f"{_date(max(r.finished for r in measured))}"
    out["records"] = str(len(measured))
    return out


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def _cloud(record, field: str):
    """A field of the cloud's facts (records made on OpenStack; testbed.openstack.facts)."""
    return (record.provenance.get("openstack") or {}).get(field)


def _vswitch(label: str, provenance: dict):
    """The vSwitch's version: on a cloud, its nodes' OVS package; ovs-vswitchd's for a kind
    on OVS, else the kernel's bridge."""
    if (provenance.get("openstack") or {}).get("ovs"):
        return f"Open vSwitch {provenance['openstack']['ovs']} (the cloud's nodes)"
    from vnetbench import kinds
    try:
        on_ovs = kinds.get(label).uses_ovs
    except kinds.UnknownKind:
        return None
    return provenance.get("tools", {}).get("ovs-vswitchd") if on_ovs else "Linux bridge of the kernel"
