"""``history compare`` and ``history regressions``: the commands that judge runs."""

from __future__ import annotations


def add_parsers(hs, db_option) -> None:
    return None
