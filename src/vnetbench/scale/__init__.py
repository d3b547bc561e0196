"""Many pairs at once (issue 24): where pairs go (``plan``), which pair counts each step
runs (``plan.progression``), and what a step says about them together (``aggregate``).

The vocabulary is OpenStack Shaker's, so its users recognise it: ``single_room`` (the
two ends of a pair on different hosts), ``double_room`` (both on one host),
``mixed_room``, ``density`` (pairs per host), ``hosts`` (Shaker's ``compute_nodes``),
``best_effort``; progressions ``linear`` and ``geometric``. What a step reports goes
beyond Shaker's mean of per-agent averages: the sum, per-pair percentiles, Jain's index,
failed pairs by name and each host's data-plane CPU, with the saturation point named.
"""
