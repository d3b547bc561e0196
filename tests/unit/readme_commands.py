"""The commands a Markdown page tells users to type, read from the page itself (for
tests/unit/test_readme_commands.py and tests/integration/test_readme_setup.py)."""

from __future__ import annotations

import re
import shlex

#: the programs the README's setup installs and tells users to run
PROGRAMS = ("vnetbench", "vnetbench-collector", "vnetbench-flowgen", "rally", "tox", "make", "pytest")


def readme_commands(text: str) -> list[str]:
    """The command lines of TEXT that start with one of PROGRAMS (after an optional sudo):
    lines of fenced and indented code blocks (continuations joined, comments cut) and
    inline code spans."""
    lines = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        lines += block.replace("\\\n", " ").splitlines()
    lines += [ln[4:] for ln in text.splitlines() if ln.startswith("    ") and not ln.startswith("     ")]
    lines += re.findall(r"`([^`\n]+)`", text)
    found = []
    for line in [part for ln in lines for part in re.split(r";|&&", re.sub(r"\s#\s.*$", "", ln))]:
        line = line.strip()
        words = line.split()
        if words[:1] == ["sudo"]:
            line, words = line[5:], words[1:]
        if words and words[0] in PROGRAMS and line not in found:
            found.append(line)
    return found


def words(command: str) -> list[str]:
    """Shell words, with the README's optional-part brackets dropped ([--image DIR])."""
    try:
        out = shlex.split(command)
    except ValueError:          # an inline fragment with an open quote: its words are enough
        out = command.split()
    return [w.strip("[]") for w in out if w.strip("[]")]


