"""What a number measured on a cloud depends on beyond the testbed: the OpenStack series,
Neutron's mechanism driver, and the nodes' OVS and OVN versions (record provenance,
``openstack``; the comparison and reproduce tables' rows).

Where each comes from, best source first:

* the cloud's own entry in clouds.yaml, key ``vnetbench`` (the all-in-one cloud writes
  its release, series, driver and the versions of the packages its nodes run): facts of
  the deployment, not guesses;
* else the APIs: the driver from the agents Neutron lists (ovn-controllers appear as "OVN
  Controller" agents, ML2/OVS's as "Open vSwitch agent", ...), the series from Nova's
  newest microversion (a range where two series share one); the versions of OVS and OVN
  are in no API, so they are None ("not exposed") rather than the runner's own.
"""

from __future__ import annotations

import re

from vnetbench import kinds
from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt

# Nova's newest compute microversion -> the series that shipped it, as read from
# _MAX_API_VERSION in the packages at hand (others: the microversion is recorded as it is)
SERIES_BY_MICROVERSION = {"2.93": "2022.2 Zed", "2.100": "2025.1 Epoxy"}
# Neutron's agent_type -> the mechanism driver whose agents report so
DRIVER_BY_AGENT = {"OVN Controller agent": "ovn", "OVN Controller Gateway agent": "ovn",
                   "Open vSwitch agent": "openvswitch", "Linux bridge agent": "linuxbridge",
                   "NIC Switch agent": "sriovnicswitch", "Macvtap agent": "macvtap"}
FIELDS = ("series", "release", "mechanism_driver", "ovs", "ovn", "neutron", "nova", "source")


# a kind's Heat environment (heat-templates/env) -> the ML2 driver of the clouds it is for
DRIVER_OF_ENVIRONMENT = {"ml2-ovs": "openvswitch", "ml2-ovn": "ovn", "linuxbridge": "linuxbridge"}


def mismatch(kind_name: str, environment: str, found: dict) -> str:
    """'' if a testbed of the kind KIND_NAME (its Heat ENVIRONMENT) may run on the cloud of
    FOUND, else the line that says why not: its records would carry the kind's name for
    another driver's numbers. Unknown on either side: no objection."""
    want, have = DRIVER_OF_ENVIRONMENT.get(environment), (found or {}).get("mechanism_driver")
    if not want or not have or want in have.split(","):
        return ""
    fix = next((f"set the testbed's vswitch to {k}" for k in kinds_of(have)), "use a cloud of the testbed's driver")
    return (f"vswitch {kind_name} is ML2 {want}, and the cloud runs ML2 {have}: its records would "
            f"name the wrong vSwitch; {fix}")


def kinds_of(driver: str) -> list[str]:
    """The kinds whose Heat environment is for clouds of the ML2 DRIVER (asked of the kinds)."""
    return [name for name in kinds.names()
            if DRIVER_OF_ENVIRONMENT.get(kinds.get(name).openstack_environment or "") == driver]


def from_clouds_yaml(cloud_config: dict) -> dict | None:
    """The ``vnetbench`` block of a cloud's clouds.yaml entry, its known fields as text
    (None when there is none, or it is not a mapping), and its ``nodes`` checked
    (``nodes_of``)."""
    block = cloud_config.get("vnetbench") if isinstance(cloud_config, dict) else None
    if not isinstance(block, dict):
        return None
    out = {k: (str(block[k])[:120] if block.get(k) is not None else None)
           for k in FIELDS if k != "source"} | {"source": "clouds.yaml (the cloud's own)"}
    return out | ({"nodes": nodes_of(block["nodes"])} if "nodes" in block else {})


NODE_FIELDS = {"ovsdb", "netns", "bridge"}
_OVSDB = re.compile(r"^unix:/[A-Za-z0-9._/+-]{1,200}\Z")
_NETNS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_IFNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,14}\Z")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}\Z")


def nodes_of(value) -> dict:
    """The compute nodes a cloud lets the runner plug ports on (the all-in-one cloud's:
    each host's OVSDB socket, network namespace, integration bridge), checked: one line
    naming the field and the fix otherwise. Ports without a VM need them."""
    def bad(field, why):
        return VnetbenchError(f"clouds.yaml: vnetbench.nodes{field} {why}; fix the cloud's entry "
                              "(the all-in-one cloud writes it: aio up again)")
    if not isinstance(value, dict) or not 1 <= len(value) <= 256:
        raise bad("", "must map 1-256 compute hosts to {ovsdb, netns, bridge}")
    out = {}
    for host, node in value.items():
        where = f".{excerpt(str(host))}"
        if not isinstance(host, str) or not _HOST.match(host):
            raise bad(where, "is not a host name")
        if not isinstance(node, dict) or set(node) != NODE_FIELDS:
            raise bad(where, f"must have exactly {', '.join(sorted(NODE_FIELDS))}")
        for field, pattern, none_ok in (("ovsdb", _OVSDB, False), ("netns", _NETNS, True),
                                        ("bridge", _IFNAME, False)):
            v = node[field]
            if not ((v is None and none_ok) or (isinstance(v, str) and pattern.match(v))):
                raise bad(f"{where}.{field}", f"is {excerpt(repr(v))}, not "
                          + {"ovsdb": "unix:/ABSOLUTE/PATH", "netns": "a namespace name or null",
                             "bridge": "an interface name"}[field])
        out[host] = dict(node)
    return out


def series_of(max_microversion: str | None) -> str | None:
    return SERIES_BY_MICROVERSION.get(max_microversion or "")


def drivers_of(agent_types) -> str | None:
    """The mechanism drivers whose agents Neutron lists, comma separated (None: no agents
    of a known driver)."""
    found = sorted({DRIVER_BY_AGENT[t] for t in agent_types if t in DRIVER_BY_AGENT})
    return ",".join(found) or None


def collect(conn) -> dict:
    """The facts of the cloud CONN reaches."""
    own = from_clouds_yaml(getattr(getattr(conn, "config", None), "config", {}))
    if own:
        return own
    try:
        version = str(conn.compute.get_endpoint_data().max_microversion or "") or None
    except Exception:            # an old SDK, or a cloud that hides its versions
        version = None
    try:
        driver = drivers_of(a.agent_type for a in conn.network.agents())
    except Exception:            # a member may not list agents (policy)
        driver = None
    return {"series": series_of(version) or (version and f"Nova API {version}"), "release": None, "mechanism_driver": driver,
            "ovs": None, "ovn": None, "neutron": None, "nova": None,
            "source": f"the APIs (Nova's microversion {version or 'unknown'}, Neutron's agents)"}
