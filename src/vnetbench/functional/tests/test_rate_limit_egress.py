"""Rate limiting in Neutron's egress direction (sent by the VM: the limited VM sends),
on one kind only with --quick, and the egress limit after a vSwitch restart of the VM's
host. The helpers and the limit are ``test_rate_limit``'s."""

import time

import pytest

from vnetbench.faults import Faults
from vnetbench.functional import measure, verdict
from vnetbench.functional.plugin import deployment_fixture
from vnetbench.functional.tests.test_rate_limit import LIMIT_KBPS, LIMIT_MBPS, _compliance, _unaffected

EGRESS_TESTBED = """
vswitch: {kind}
network: {{type: {ntype}}}
vnets:
  - {{name: red, cidr: 198.19.1.0/24}}
  - {{name: blue, cidr: 198.19.1.0/24}}
vms:
  - {{name: red-limited, host: h1, vnets: [{{name: red, qos: {{max_kbps: %d, direction: egress}}}}]}}
  - {{name: red-free, host: h1, vnets: [red]}}
  - {{name: red-receiver, host: h2, vnets: [red]}}
  - {{name: blue-free, host: h1, vnets: [blue]}}
  - {{name: blue-receiver, host: h2, vnets: [blue]}}
""" % LIMIT_KBPS
egress_dep = deployment_fixture(EGRESS_TESTBED, "rate-limit-egress")


@pytest.mark.quick_one_kind
@pytest.mark.whole_machine      # the rate within ±10 %
@pytest.mark.row("rate.egress-compliance")
def test_egress_limited_port_holds_the_rate(egress_dep, record):
    _compliance(egress_dep, "red-receiver", "red-limited", record, control="red-free")


@pytest.mark.quick_one_kind
@pytest.mark.row("rate.egress-same-vnet")
def test_egress_other_port_of_the_same_vnet_is_not_limited(egress_dep, record):
    _unaffected(egress_dep, "red-receiver", "red-free", record)


@pytest.mark.quick_one_kind
@pytest.mark.row("rate.egress-other-vnet")
def test_egress_port_of_another_vnet_is_not_limited(egress_dep, record):
    _unaffected(egress_dep, "blue-receiver", "blue-free", record)


RESTART_SECONDS = 8          # neutron's agent polls every 2 s; the fresh bucket's burst ~1 s
RESTART_STEADY_S = 3
RESTART_INTERVAL_S = 0.2


@pytest.mark.per_kind         # the vSwitch restart does not depend on the network type
@pytest.mark.quick_one_kind
@pytest.mark.whole_machine      # the steady rate within ±10 % after the restart
@pytest.mark.row("fault.egress-restart")
def test_egress_limit_holds_again_after_a_vswitch_restart(egress_dep, record):
    """The limited VM's host restarts its vSwitch; then the VM sends at twice the limit:
    how long it went unlimited (whatever re-provisions the kind's limit: OVSDB, the
    kernel's qdisc, ovn-controller, an agent), and that the limit holds again. Last in
    the module: it disturbs the testbed."""
    t0 = time.monotonic()
    Faults(egress_dep).vswitch_restart(egress_dep.testbed.vm("red-limited").host)
    restart_ms = (time.monotonic() - t0) * 1000
    burst_kbits = egress_dep.testbed.vm("red-limited").nics[0].qos.max_burst_kbits
    m = {"limit_mbps": LIMIT_MBPS, "interval_s": RESTART_INTERVAL_S,
         "steady_s": RESTART_STEADY_S, "restart_ms": restart_ms,
         "burst_s": burst_kbits / LIMIT_KBPS,          # drained by the 1x excess of 2x offered
         **measure.receiver_rate(egress_dep, "red-receiver", "red-limited", RESTART_SECONDS,
                                 udp_bps=2 * LIMIT_KBPS * 1000, interval_s=RESTART_INTERVAL_S)}
    record(verdict.rate_restored(m), m)
