"""Flow dumps made comparable (vnetbench.kinds.ovs.flows), on the flows Neutron's OVS agent
left on the all-in-one cloud (tests/data/ovs-firewall/)."""

import json
import random
from pathlib import Path

from vnetbench.kinds.ovs import flows

DATA = Path(__file__).resolve().parents[1] / "data" / "ovs-firewall"
REC = json.loads((DATA / "aio-web-knock-default.json").read_text())
DUMP = (DATA / "aio-web-knock-default.flows").read_text()


def _norm(dump=DUMP, ports=None):
    return flows.normalise(dump, flows.names_of(ports or REC["ports"]))


def test_link_local_is_eui64_of_the_mac():
    assert flows.link_local("fa:ee:a3:7b:00:01") == "fe80::f8ee:a3ff:fe7b:1"


def test_what_differs_by_deployment_is_named():
    out = _norm()
    text = "\n".join(out)
    for word in ("n_packets", "cookie", "duration", "198.19.1.", "fa:63:3d", "fe80::"):
        assert word not in text
    assert all(line.split(",")[0].startswith("table=") for line in out)
    assert {int(line.split(",")[0][6:]) for line in out} <= set(flows.FIREWALL_TABLES)
    assert "table=82, priority=77,ct_state=+new-est,tcp,reg5=web-1,tp_dst=5201 actions=ct(commit," \
           "zone=NXM_NX_REG6[0..15]),output:web-1,resubmit(,92)" in out
    # another VM's port (the management NICs: port security off) is not compared
    assert not any("port3" in line for line in out)


def test_the_same_flows_under_other_numbers_normalise_the_same():
    """Another deployment: other OpenFlow ports, another zone, other conjunction ids, the
    lines in another order -- the same normalised set."""
    import re
    ports = {vm: {**p, "ofport": p["ofport"] + 100} for vm, p in REC["ports"].items()}
    ours = {p["ofport"] for p in REC["ports"].values()}

    def port(m):
        base = 16 if m.group(2) else 10
        n = int(m.group(3), base)
        n = n + 100 if n in ours else n
        return f"{m.group(1)}{m.group(2) or ''}{n:x}" if base == 16 else f"{m.group(1)}{n}"
    other = re.sub(r"(in_port=|output:|reg5=|load:)(0x)?([0-9a-f]+)(?=->NXM_NX_REG5|[, ]|$)",
                   lambda m: port(m) if m.group(1) != "load:" or "REG5" in DUMP[m.end():m.end() + 14]
                   else m.group(0), DUMP, flags=re.M)
    other = re.sub(r"(conjunction\(|conj_id=)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + 100}", other)
    other = re.sub(r"load:0x([0-9a-f]+)->NXM_NX_REG7", lambda m: f"load:{int(m.group(1), 16) + 100:#x}->NXM_NX_REG7", other)
    other = other.replace("ct_zone=18", "ct_zone=3")
    lines = other.splitlines()
    random.Random(7).shuffle(lines)
    assert _norm("\n".join(lines), ports) == _norm()


def test_a_changed_rule_is_a_difference():
    changed = DUMP.replace("tp_dst=5201", "tp_dst=5202")
    assert set(_norm(changed)) ^ set(_norm())
