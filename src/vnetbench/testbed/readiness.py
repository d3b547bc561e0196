"""Each kind's own "this port is programmed" signal, read from what its real system
exposes (pure parsers; the netns backend runs the commands: ``testbed/netns/ports``).
Each returns {port: the time the system says it became ready, or None where it does not
say}: the caller then takes the time it saw it.

* ovn: ``external_ids:ovn-installed="true"`` on the OVS Interface. ovn-controller sets
  it once the port's flows are in ovs-vswitchd (what Neutron and ovn-heater wait for).
* ovs (Neutron's OVS agent model): the Port carries its network's local VLAN (``tag``,
  the agent's ``port_bound``) and the Interface has an OpenFlow port number
  (``ofport`` > 0: ovs-vswitchd attached it to the datapath). Without security groups
  or QoS the kind installs no flow of the port's own: the bridge's NORMAL flow switches
  an access port, so the tag and the OpenFlow port are what its flows need.
* linuxbridge: the bridge port's STP state ``forwarding`` (``bridge -j link show``).
"""

from __future__ import annotations

import json

def _tables(text: str) -> list[dict]:
    """``ovs-vsctl --format=json`` output of one or more commands: one table each, as a
    list of {column: value} rows."""
    out, dec, i = [], json.JSONDecoder(), 0
    text = text.strip()
    while i < len(text):
        obj, end = dec.raw_decode(text, i)
        out.append([dict(zip(obj["headings"], row)) for row in obj["data"]])
        i = end
        while i < len(text) and text[i].isspace():
            i += 1
    return out


def _map(value) -> dict:
    """An OVSDB map in JSON (``["map", [[k, v], ...]]``) as a dict."""
    return dict(value[1]) if isinstance(value, list) and value and value[0] == "map" else {}


def _atom(value):
    """An OVSDB optional atom: ``["set", []]`` is none."""
    return None if isinstance(value, list) and value[:1] == ["set"] and not value[1] else value


def ovn_installed(vsctl_json: str, names) -> dict:
    """Of interface NAMES, those ovn-controller marked installed, from
    ``ovs-vsctl --format=json --columns=name,external_ids list Interface``: name -> the
    wall-clock time it says it did (``ovn-installed-ts``, ms; OVN 22.09+), else None."""
    want, out = set(names), {}
    for r in (r for t in _tables(vsctl_json) for r in t if r.get("name") in want):
        ids = _map(r.get("external_ids"))
        if ids.get("ovn-installed") == "true":
            ts = ids.get("ovn-installed-ts", "")
            out[r["name"]] = int(ts) / 1000.0 if ts.isdigit() else None
    return out


def ovs_bound(vsctl_json: str, names) -> dict:
    """Of port NAMES, those with a VLAN tag and an OpenFlow port, from ``ovs-vsctl
    --format=json -- --columns=name,tag list Port -- --columns=name,ofport list Interface``."""
    ports, ifaces = _tables(vsctl_json)
    tagged = {r["name"] for r in ports if isinstance(_atom(r.get("tag")), int)}
    attached = {r["name"] for r in ifaces if isinstance(_atom(r.get("ofport")), int) and r["ofport"] > 0}
    return dict.fromkeys(set(names) & tagged & attached)


def bridge_forwarding(bridge_json: str, names) -> dict:
    """Of bridge ports NAMES, those forwarding, from ``bridge -j link show``."""
    want = set(names)
    return dict.fromkeys(r["ifname"] for r in json.loads(bridge_json or "[]")
                         if r.get("ifname") in want and r.get("state") == "forwarding")
