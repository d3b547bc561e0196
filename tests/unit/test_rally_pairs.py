"""Which pairs a scenario measures: its own placements, else the context's -- a borrowed
testbed (task argument ``run``, `compare --run --placement same-host`) keeps all its
pairs, and the placements asked for must still pick (they were ignored: both measured)."""

from types import SimpleNamespace

import pytest

from vnetbench.rally_plugins.scenarios import IcmpRtt

SAME, CROSS = SimpleNamespace(placement="same-host"), SimpleNamespace(placement="cross-host")
DEP = SimpleNamespace(testbed=SimpleNamespace(name="guests", pairs=[SAME, CROSS]))


def scenario(context_placements):
    s = IcmpRtt.__new__(IcmpRtt)
    s.context = {"vnetbench": {"placements": context_placements} if context_placements else {}}
    return s


@pytest.mark.parametrize("context, own, expected", [
    (["same-host"], None, [SAME]), (["same-host", "cross-host"], None, [SAME, CROSS]),
    (None, None, [SAME, CROSS]), (["same-host"], ["cross-host"], [CROSS]),
])
def test_the_scenarios_placements_else_the_contexts(context, own, expected):
    assert scenario(context)._pairs(DEP, own) == expected


def test_no_pair_of_the_placements_is_an_error_naming_the_testbed():
    dep = SimpleNamespace(testbed=SimpleNamespace(name="guests", pairs=[CROSS]))
    with pytest.raises(ValueError, match="testbed guests has no pair with placement in"):
        scenario(["same-host"])._pairs(dep, None)
