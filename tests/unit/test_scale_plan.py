"""Scale planning (issue 24): Shaker's accommodation words place pairs as Shaker's
generate_agents would, progressions give the steps, and the generated testbed is a valid
testbed with every planned pair; bad arguments are one PlanError line naming the field."""

import yaml
from hypothesis import given, settings, strategies as st
import pytest

from vnetbench.scale import plan
from vnetbench.testbed.loader import loads

H4 = ["h1", "h2", "h3", "h4"]


@pytest.mark.parametrize("spec, hosts, expected", [
    # Shaker: iterations = hosts * density, halved for single_room; ends (2i, 2i+1) / (i, i) / (i, i+1)
    (["pair", "single_room", {"compute_nodes": 2}], H4, [("h1", "h2")]),
    (["pair", "single_room", {"density": 2}, {"compute_nodes": 2}], H4, [("h1", "h2"), ("h1", "h2")]),
    (["pair", "single_room", {"compute_nodes": 4}], H4, [("h1", "h2"), ("h3", "h4")]),
    (["pair", "double_room", {"compute_nodes": 2}], H4, [("h1", "h1"), ("h2", "h2")]),
    (["pair", "double_room", {"density": 2}, {"compute_nodes": 2}], H4,
     [("h1", "h1"), ("h2", "h2"), ("h1", "h1"), ("h2", "h2")]),
    (["pair", "mixed_room", {"compute_nodes": 3}], H4, [("h1", "h2"), ("h2", "h3"), ("h3", "h1")]),
    (["pair", "single_room", {"compute_nodes": 3}], H4, [("h1", "h2")]),      # 3 // 2
    (["pair", "single_room", "best_effort", {"compute_nodes": 4}], ["h1", "h2"], [("h1", "h2")]),
    (["pair", "single_room", "best_effort", {"compute_nodes": 1}], H4, [("h1", "h1")]),  # Shaker's special case
    ({"room": "mixed_room", "hosts": 2, "density": 2}, H4,
     [("h1", "h2"), ("h2", "h1"), ("h1", "h2"), ("h2", "h1")]),
])
def test_placement_is_shakers(spec, hosts, expected):
    assert plan.placements(plan.accommodation(spec), hosts) == expected


@pytest.mark.parametrize("spec, hosts, message", [
    (["pair", "single_room", {"compute_nodes": 4}], ["h1", "h2"], "asks for 4 hosts, 2 are available"),
    (["pair", "single_room", {"compute_nodes": 1}], H4, "single_room puts a pair's ends on two hosts"),
    (["pair", "penthouse"], H4, "unknown word 'penthouse'"),
    ({"room": "attic"}, H4, "'attic' is not a room"),
    ({"density": 0}, H4, "accommodation.density: 0 is not a whole number"),
    ({"hosts": 2, "density": 512, "room": "double_room"}, H4, "1024 pairs, more than 512"),
])
def test_unplannable_accommodation_names_the_field(spec, hosts, message):
    with pytest.raises(plan.PlanError, match=message):
        plan.placements(plan.accommodation(spec), hosts)


@pytest.mark.parametrize("spec, total, steps", [
    (None, 6, [6]), ("linear", 4, [1, 2, 3, 4]), ("geometric", 8, [1, 2, 4, 8]),
    ("geometric", 6, [1, 2, 4, 6]), ("geometric", 1, [1]), ([4, 1, 2, 2], 4, [1, 2, 4]),
])
def test_progression_steps(spec, total, steps):
    assert plan.progression(spec, total) == steps


@pytest.mark.parametrize("spec, message", [
    ("quadratic", "'quadratic' is not a progression"), ([1, 9], r"pair counts \[9\] are not in 1..4"),
    ([0], r"pair counts \[0\]"), ([], "is not a progression"), ([True], "pair counts"),
])
def test_bad_progression_names_it(spec, message):
    with pytest.raises(plan.PlanError, match=message):
        plan.progression(spec, 4)


@pytest.mark.parametrize("room, hosts, density", [("single_room", 2, 4), ("double_room", 2, 2),
                                                  ("mixed_room", 3, 1), ("single_room", 8, 128)])
def test_the_generated_testbed_loads_with_every_planned_pair(room, hosts, density):
    acc = plan.accommodation({"room": room, "hosts": hosts, "density": density})
    doc = plan.testbed(acc, "linuxbridge", "vxlan", [0, 1])
    tb = loads(yaml.safe_dump(doc), source="<scale>", online_cpus=[0, 1])
    want = plan.placements(acc, [f"h{i + 1}" for i in range(hosts)])
    got = [tuple(tb.vm(v).host for v in p.vms) for p in tb.pairs]
    assert got == want
    assert all(p.placement == ("same-host" if a == b else "cross-host") for p, (a, b) in zip(tb.pairs, want))
    assert len(tb.vms) == 2 * len(want)


WORDS = st.one_of(st.sampled_from(["pair", "best_effort", *plan.ROOMS]), st.text(max_size=12),
                  st.dictionaries(st.sampled_from(["density", "compute_nodes", "zones", "x"]),
                                  st.one_of(st.integers(-3, 2000), st.text(max_size=4), st.none()),
                                  max_size=2))
SPECS = st.one_of(st.lists(WORDS, max_size=5), st.integers(), st.none(), st.text(max_size=10),
                  st.dictionaries(st.sampled_from(["room", "density", "hosts", "best_effort", "y"]),
                                  st.one_of(st.integers(-3, 2000), st.text(max_size=6), st.booleans()),
                                  max_size=4))


@settings(max_examples=300, deadline=None)
@given(SPECS, st.integers(0, 10), st.one_of(st.none(), st.sampled_from(["linear", "geometric"]),
                                             st.lists(st.integers(-2, 40), max_size=4), st.text(max_size=5)))
def test_any_scale_arguments_plan_or_fail_in_one_line(spec, nhosts, prog):
    """Whatever a task file says: a plan, or one PlanError line naming what to fix."""
    try:
        pairs = plan.placements(plan.accommodation(spec), [f"h{i}" for i in range(nhosts)])
        steps = plan.progression(prog, len(pairs))
    except plan.PlanError as e:
        text = str(e)
        assert text.startswith("scale: ") and "\n" not in text and "; " in text
        return
    assert 1 <= len(pairs) <= plan.MAX_PAIRS and steps and max(steps) <= len(pairs)
