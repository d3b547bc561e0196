"""Every command the README names exists after the README's setup, as written: each
program is installed, each subcommand is one the program has, each option one it takes.
The README's commands are read from the README itself, so a command added there is
checked too, and a renamed subcommand or option fails here rather than for a user.
That the setup installs each program, and `tox -e functional` run for real on one row:
tests/integration/test_readme_setup.py."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from readme_commands import readme_commands, words
from vnetbench import cli

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: the README first, then every other Markdown page of the repository (docs/, the folders'
#: READMEs): a user follows those too
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for d in REPO.iterdir()
                              if d.is_dir() and not d.name.startswith(".") and d.name not in ("results", "build")
                              for p in d.rglob("*.md"))]
COMMANDS = readme_commands((REPO / "README.md").read_text())
DOC_COMMANDS = [(page, c) for page in PAGES for c in readme_commands((REPO / page).read_text())]


def test_the_readme_names_commands_of_every_kind():
    """The reader of the parser: it finds the commands a user is told to type."""
    programs = {c.split()[0] for c in COMMANDS}
    assert {"vnetbench", "rally", "tox", "make"} <= programs, programs
    assert "vnetbench testbed capabilities" in COMMANDS
    assert any(c.startswith("tox -e functional") for c in COMMANDS)


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
    """What is wrong with COMMAND; a word 'a|b' (the docs' alternatives) checks each."""
    argv = words(command)
    argv = argv[:argv.index("…")] if "…" in argv else argv
    alt = next((i for i, w in enumerate(argv) if "|" in w and not w.startswith(("{", "'"))), None)
    if alt is not None:
        return [p for choice in argv[alt].split("|")
                for p in problems(shlex.join([*argv[:alt], choice, *argv[alt + 1:]]))]
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
    return []       # vnetbench-collector, flowgen, pytest: installed and answering --help
                    # is checked after the setup (tests/integration/test_readme_setup.py)


@pytest.mark.parametrize("page, command", DOC_COMMANDS)
def test_each_documented_command_is_one_the_programs_take(page, command):
    assert problems(command) == [], f"{page}: `{command}`"


@pytest.mark.parametrize("bad, complaint", [
    ("vnetbench testbed upp x.yaml", "has no subcommand 'upp'"),
    ("vnetbench compare --profil quick", "takes no option --profil"),
    ("make demox", "no target 'demox'"),
    ("tox -e functionall", "no environment 'functionall'"),
    ("vnetbench fault stop|kil --component northd", "has no subcommand 'kil'"),
])
def test_a_wrong_command_is_caught(bad, complaint):
    """The check is not vacuous: a misspelt subcommand, option, target or env fails it."""
    assert any(complaint in p for p in problems(bad)), problems(bad)


def test_the_options_after_a_double_dash_are_the_wrapped_commands():
    assert problems("vnetbench testbed exec same-a -- ping -c 3 198.19.1.2") == []
    assert problems("vnetbench functional --quick -- --durations=30 -k idle") == []
