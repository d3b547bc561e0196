"""Value-added features (seed 003), detected by a probe, never read from a table."""

import pytest

from vnetbench.functional import measure, verdict
from vnetbench.functional.plugin import deployment_fixture, one_vnet

TESTBED = one_vnet(2)
PER_KIND = True      # a kind's features do not depend on the encapsulation
dep = deployment_fixture(TESTBED, "features")


@pytest.mark.row("feature.proxy-arp")
def test_proxy_arp_detected(dep, record):
    m = measure.arp_seen_by_peer(dep, "red-1", "red-2")
    record(verdict.proxy_arp(m), m)


@pytest.mark.row("feature.dhcp")
def test_dhcp_detected(dep, record):
    m = measure.dhcp_answers(dep, "red-1", "red-2")
    record(verdict.dhcp(m), m)


@pytest.mark.row("feature.bonding")
def test_bonding_detected(dep, record):
    m = measure.underlay_spread(dep, "red-1", "red-2")
    record(verdict.bonding(m), m)
