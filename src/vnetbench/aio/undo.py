"""The all-in-one cloud's undo steps (``testbed.unwind`` reads ``STEPS``): a journaled
AIO registration (its own ``down``) and the partial root of an interrupted root build."""

from __future__ import annotations

from vnetbench.aio.registry import undo_aio
from vnetbench.aio.rootbuild import JOURNAL_KIND, undo_root_build
from vnetbench.testbed.unwind import Step

STEPS = {"aio": Step(undo_aio),
         JOURNAL_KIND: Step(undo_root_build)}
