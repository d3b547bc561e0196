"""The chassis the southbound database knows: what ovn-controller registers when it
starts (a ``Chassis`` row named by its OVS system-id, one ``Encap`` row per
encapsulation with the host's tunnel address). A host is a chassis of the run once
both rows are there; with tens of emulated hypervisors (the ``chassis:`` block) the
build waits for all of them and says how long that took (docs/control-plane.md)."""

from __future__ import annotations

import json

from vnetbench.errors import BuildError
from vnetbench.kinds.ovn.routers import chassis as chassis_name


def encaps(text: str) -> dict[str, tuple[str, str]]:
    """chassis name -> (encap type, IP) from ``ovn-sbctl --format=json --columns=
    chassis_name,type,ip list Encap``; a chassis with several encaps keeps its first."""
    doc = json.loads(text)
    out = {}
    for row in doc.get("data", []):
        name, kind, ip = (_atom(v) for v in row)
        out.setdefault(name, (kind, ip))
    return out


def _atom(value):
    """An OVSDB JSON atom; a set of one is that one value (an empty set: None)."""
    if isinstance(value, list) and value and value[0] == "set":
        return value[1][0] if value[1] else None
    return value


def registered(central) -> dict[str, tuple[str, str]]:
    """The SB's chassis with an encapsulation: name -> (type, IP). CENTRAL: the run's
    ``kinds.ovn.netns.Central``."""
    return encaps(central.sbctl("--format=json", "--columns=chassis_name,type,ip", "list", "Encap"))


def wait_registered(central, hosts, timeout: float = 60) -> None:
    """Until every one of HOSTS is a chassis (one SB wait for all: ovn-sbctl watches the
    database, no polling). The schema gives a Chassis at least one Encap, written in the
    same transaction, so the row's existence is both. A time-out names the missing ones."""
    rid = central.run.run_id
    tx = []
    for h in hosts:
        tx += ["--", "wait-until", "Chassis", chassis_name(rid, h.name)]
    try:
        central.sbctl(*tx[1:], timeout=timeout)
    except BuildError:
        known = registered(central)
        missing = [h.name for h in hosts if chassis_name(rid, h.name) not in known]
        raise BuildError(f"{len(missing)} of {len(hosts)} hosts did not register as OVN chassis "
                         f"within {timeout:g} s: {', '.join(missing[:10])}"
                         f"{' ...' if len(missing) > 10 else ''}") from None
