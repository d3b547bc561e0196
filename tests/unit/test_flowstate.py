"""Time semantics per kind (issue 22): a time-deferred echo empties exactly the flow state
the modelled system lets go in that idle time, from the testbed's own timeouts."""

import dataclasses
import math
from pathlib import Path

from vnetbench.testbed import flowstate, loader

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def tb(name):
    return loader.load(EXAMPLES / f"{name}.yaml", online_cpus=range(64))


def labels(states):
    return [s.label() for s in states]


def test_ten_idle_seconds_per_kind():
    assert labels(flowstate.expiring(tb("ovs-openflow-vxlan"))) == ["controller (idle 5 s)", "datapath (idle 10 s)"]
    assert labels(flowstate.expiring(tb("ovs-vxlan"))) == ["datapath (idle 10 s)"]
    assert labels(flowstate.expiring(tb("ovn-geneve"))) == ["datapath (idle 10 s)"]
    assert flowstate.expiring(tb("vrouter-gre")) == ()            # Contrail ages flows in 180 s
    assert labels(flowstate.layers(tb("vrouter-gre"))) == ["agent (idle 180 s)"]
    assert flowstate.layers(tb("linuxbridge-flat")) == ()


def test_a_shorter_idle_time_keeps_the_datapath_and_a_longer_one_ages_the_vrouter():
    assert labels(flowstate.expiring(tb("ovs-openflow-vxlan"), 6)) == ["controller (idle 5 s)"]
    assert labels(flowstate.expiring(tb("vrouter-gre"), 200)) == ["agent (idle 180 s)"]


def test_the_timeouts_are_the_testbeds_own():
    base = tb("ovs-openflow-vxlan")
    never = dataclasses.replace(base, vswitch=dataclasses.replace(
        base.vswitch, options=dataclasses.replace(base.vswitch.options, idle_timeout=0)))
    (controller, _) = flowstate.layers(never)
    assert math.isinf(controller.idle_s) and controller.label() == "controller (never ages)"
    assert labels(flowstate.expiring(never)) == ["datapath (idle 10 s)"]
