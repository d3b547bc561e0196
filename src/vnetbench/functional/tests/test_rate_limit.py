"""Rate limiting (seed 003): 10 Mbit/s on one logical port, declared in the testbed
(``qos:`` on the VM's NIC) and realised by the kind's own mechanism; measured at the
receiver with iperf3. The port beside it on the same vnet and host, identical but
for the limit, is the control that the limit (not the path) holds the rate.

Ingress here (delivered to the VM: the limited VM receives); egress, on a testbed of its
own, in ``test_rate_limit_egress`` (a module of its own: this module's testbed is gone
before that one is built, which halves the guests a backend of real VMs runs at once)."""

import pytest

from vnetbench.functional import measure, verdict
from vnetbench.functional.plugin import deployment_fixture

LIMIT_KBPS = 10_000
TESTBED = """
vswitch: {kind}
network: {{type: {ntype}}}
vnets:
  - {{name: red, cidr: 198.19.1.0/24}}
  - {{name: blue, cidr: 198.19.1.0/24}}
vms:
  - {{name: red-sender, host: h1, vnets: [red]}}
  - {{name: red-limited, host: h2, vnets: [{{name: red, qos: {{max_kbps: %d}}}}]}}
  - {{name: red-free, host: h2, vnets: [red]}}
  - {{name: blue-sender, host: h1, vnets: [blue]}}
  - {{name: blue-free, host: h2, vnets: [blue]}}
""" % LIMIT_KBPS
LIMIT_MBPS = LIMIT_KBPS / 1000
SECONDS = 7        # 2 s of warm-up (the burst), 5 s of steady state
FREE_SECONDS = 3


dep = deployment_fixture(TESTBED, "rate-limit")


def _compliance(dep, receiver, sender, record, control=None):
    """UDP offered at twice the limit: what arrives is what the shaper lets through,
    free of TCP's own dynamics (a deep shaper queue makes TCP saw-tooth below it).
    Egress: a shaper on the sender's own port may push back on its socket (linuxbridge's
    IFB + TBF), so the sender offers only the limit; then the unlimited ``control`` VM
    beside it shows whether the sender could offer more (a slow guest could not)."""
    m = {"limit_mbps": LIMIT_MBPS, **measure.receiver_rate(
        dep, receiver, sender, SECONDS, udp_bps=2 * LIMIT_KBPS * 1000)}
    if control and m.get("sent_mbps", 0) < 2 * LIMIT_MBPS * 0.9:
        m["control_sent_mbps"] = measure.receiver_rate(
            dep, receiver, control, 2, udp_bps=2 * LIMIT_KBPS * 1000)["sent_mbps"]
    record(verdict.rate_compliance(m), m)


def _unaffected(dep, receiver, sender, record):
    """TCP on namespaces (far above the limit); slow guests get UDP at 2x the limit and
    a lower bar that a shaped port still cannot reach (verdict.GUEST_UNAFFECTED_FACTOR)."""
    if measure.native(dep):
        m = {"limit_mbps": LIMIT_MBPS, "factor": verdict.GUEST_UNAFFECTED_FACTOR,
             **measure.receiver_rate(dep, receiver, sender, FREE_SECONDS,
                                     udp_bps=2 * LIMIT_KBPS * 1000)}
    else:
        m = {"limit_mbps": LIMIT_MBPS, **measure.receiver_rate(dep, receiver, sender, FREE_SECONDS)}
    record(verdict.unaffected(m), m)


@pytest.mark.whole_machine      # the rate within ±10 %: a starved sender or vSwitch moves it
@pytest.mark.row("rate.compliance")
def test_limited_port_holds_the_rate(dep, record):
    _compliance(dep, "red-limited", "red-sender", record)


@pytest.mark.row("rate.same-vnet")
def test_other_port_of_the_same_vnet_is_not_limited(dep, record):
    _unaffected(dep, "red-free", "red-sender", record)


@pytest.mark.row("rate.other-vnet")
def test_port_of_another_vnet_is_not_limited(dep, record):
    _unaffected(dep, "blue-free", "blue-sender", record)
