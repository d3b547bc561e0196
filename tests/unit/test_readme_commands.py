"""Every command the README names exists after the README's setup, as written: each
program is installed, each subcommand is one the program has, each option one it takes.
The README's commands are read from the README itself, so a command added there is
checked too, and a renamed subcommand or option fails here rather than for a user.
(`tox -e functional` is also run for real, on one row: tests/integration/test_readme_tox.py.)"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from vnetbench import cli

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
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
    for line in lines:
        line = re.sub(r"\s#\s.*$", "", line).strip()
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


README = (REPO / "README.md").read_text()
COMMANDS = readme_commands(README)


def test_the_readme_names_commands_of_every_kind():
    """The reader of the parser: it finds the commands a user is told to type."""
    programs = {c.split()[0] for c in COMMANDS}
    assert {"vnetbench", "rally", "tox", "make"} <= programs, programs
    assert "vnetbench testbed capabilities" in COMMANDS
    assert any(c.startswith("tox -e functional") for c in COMMANDS)


@pytest.mark.parametrize("program", sorted({c.split()[0] for c in COMMANDS}))
def test_each_program_is_installed(program):
    where = BIN / program if (BIN / program).exists() else shutil.which(program)
    assert where, f"the README names '{program}', but the setup installs no such program " \
                  f"(neither {BIN} nor PATH has it)"


def _subparsers(parser: argparse.ArgumentParser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def _vnetbench_problems(argv: list[str]) -> list[str]:
    """The subcommand path of ARGV in vnetbench's own parser, and each option given
    before '--' checked against that subcommand's options."""
    parser, path = cli._parser(), ["vnetbench"]
    rest = argv[1:]
    while rest and _subparsers(parser):
        choices = _subparsers(parser)
        if rest[0] not in choices:
            return [f"'{' '.join(path)}' has no subcommand '{rest[0]}' (it has: {', '.join(choices)})"]
        parser = choices[rest[0]]
        path.append(rest.pop(0))
    rest = rest[:rest.index("--")] if "--" in rest else rest
    known = set(parser._option_string_actions)
    return [f"'{' '.join(path)}' takes no option {w.split('=')[0]}"
            for w in rest if w.startswith("-") and w.split("=")[0] not in known]


@lru_cache(maxsize=None)
def _help(*argv: str) -> str:
    done = subprocess.run([str(BIN / argv[0]) if (BIN / argv[0]).exists() else argv[0], *argv[1:], "--help"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, f"{' '.join(argv)} --help: exit {done.returncode}: {done.stderr[-500:]}"
    return done.stdout


def _rally_problems(argv: list[str]) -> list[str]:
    """rally CATEGORY ACTION [options]: the action exists and takes each option."""
    text = _help(*argv[:3])
    return [f"'{' '.join(argv[:3])}' takes no option {w}" for w in argv[3:]
            if w.startswith("--") and not re.search(rf"(?<![\w-]){re.escape(w.split('=')[0])}\b", text)]


@lru_cache(maxsize=None)
def _make_targets() -> set[str]:
    db = subprocess.run(["make", "-pRrqn", "-f", "Makefile"], capture_output=True, text=True,
                        cwd=REPO, timeout=60).stdout
    return {m.group(1) for m in re.finditer(r"^([\w.-]+):(?!=)", db, re.M)}


@lru_cache(maxsize=None)
def _tox_envs() -> set[str]:
    import configparser
    ini = configparser.ConfigParser()
    ini.read(REPO / "tox.ini")
    return {s.split(":", 1)[1] for s in ini.sections() if s.startswith("testenv:")}


def problems(command: str) -> list[str]:
    argv = words(command)
    if argv[0] == "vnetbench":
        return _vnetbench_problems(argv)
    if argv[0] == "rally" and len(argv) >= 3 and not argv[1].startswith("-"):
        return _rally_problems(argv)
    if argv[0] == "make":
        return [f"the Makefile has no target '{t}'" for t in argv[1:]
                if not t.startswith("-") and "=" not in t and t not in _make_targets()]
    if argv[0] == "tox" and "-e" in argv:
        envs = argv[argv.index("-e") + 1].split(",")
        return [f"tox.ini has no environment '{e}'" for e in envs if e not in _tox_envs()]
    if argv[0] in ("vnetbench-collector", "tox", "pytest"):
        _help(argv[0])
    return []


@pytest.mark.parametrize("command", COMMANDS)
def test_each_readme_command_is_one_the_programs_take(command):
    assert problems(command) == [], f"README.md: `{command}`"


@pytest.mark.parametrize("bad, complaint", [
    ("vnetbench testbed upp x.yaml", "has no subcommand 'upp'"),
    ("vnetbench compare --profil quick", "takes no option --profil"),
    ("make demox", "no target 'demox'"),
    ("tox -e functionall", "no environment 'functionall'"),
])
def test_a_wrong_command_is_caught(bad, complaint):
    """The check is not vacuous: a misspelt subcommand, option, target or env fails it."""
    assert any(complaint in p for p in problems(bad)), problems(bad)


def test_the_options_after_a_double_dash_are_the_wrapped_commands():
    assert problems("vnetbench testbed exec same-a -- ping -c 3 198.19.1.2") == []
    assert problems("vnetbench functional --quick -- --durations=30 -k idle") == []
