"""Untrusted input read with limits: any file, any bytes, bounded time and memory.

Every user-supplied file (testbed YAML, result records) goes through here first:
only regular files (a FIFO or ``/dev/zero`` is refused before it is read), at
most a size cap, UTF-8 only, YAML parsed with a depth limit (checked on the event stream before composing)
and then walked with
a node budget (an alias bomb expands lazily and stops at the budget), keys must
be strings and no string may hide a control character (a trailing newline in a
name would pass a JSON Schema ``$`` pattern and split every line we print).
A mapping key given twice is refused with both lines (YAML lets the later silently
win: a hand-merged file would mean one thing and plan another), and every float
must be finite (``.nan``, ``.inf`` and ``1e400``, which overflows, compare false
with every schema bound, so they would pass ``minimum``/``maximum``).
Problems come back as ``InputError(where, problem, fix)``.
"""

from __future__ import annotations

import math
import os
import re
import stat

import yaml

MAX_DEPTH = 32            # a testbed document is 5 levels deep
MAX_NODES = 100_000       # values after alias expansion
MAX_INT_DIGITS = 30
EXCERPT = 40              # characters of a bad value echoed back
# C0/C1 controls, zero-width and bidi marks, line/paragraph separators, BOM
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")
CONTROL = _CONTROL        # also what the result records refuse in names (vnetbench.results.load)


class InputError(Exception):
    def __init__(self, where: str, problem: str, fix: str):
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(f"{where}: {problem}; {fix}" if where else f"{problem}; {fix}")


def excerpt(value, limit: int = EXCERPT) -> str:
    """repr of ``value`` cut to ``limit`` characters, saying how long it was."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, (str, bytes)) else ""
    return text[:limit] + "..." + size


def one_line(text: str, limit: int = 500) -> str:
    """A message made safe for one terminal line: control characters escaped, length capped."""
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode()
                  for ch in text[:limit * 2])
    return out if len(out) <= limit else out[:limit - 3] + "..."


def read_bytes(path, cap: int) -> bytes:
    """The whole file if it is a regular file of at most ``cap`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError("", f"cannot read file ({exc.strerror})", "check the path") from None
    except ValueError:     # an embedded NUL
        raise InputError("", "cannot read file (the path holds a NUL byte)", "check the path") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise InputError("", f"is {kind}", "give a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(cap + 1)
        except OSError as exc:
            raise InputError("", f"cannot read file ({exc.strerror})", "check the path") from None
    if len(data) > cap:
        raise InputError("", f"is larger than {cap // 1024} KiB", "split or shorten it")
    return data


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("", f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start})", "save it as UTF-8") from None


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names one key twice (``problem_mark``: the second)."""


_MERGE = "tag:yaml.org,2002:merge"


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader (libyaml when present) that refuses integers too long to be meant
    and mappings that give a key twice."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
                    continue       # '<<' overrides on purpose; a non-scalar key is refused later
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise DuplicateKeyError(
                        None, None, f"key {excerpt(key_node.value)} is given twice (first at line "
                        f"{seen[key].line + 1} column {seen[key].column + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        digits = sum(ch.isalnum() for ch in node.value)
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {digits} digits", node.start_mark)
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _check_depth(text: str, max_items=None, max_events=None) -> None:
    """Walk the flat event stream first: composing nests recursively (libyaml's
    composer crashes the interpreter on a deep enough document). The walk also stops,
    cheaply and early, a top-level list longer than ``max_items[key]`` and a document of
    more than ``max_events`` nodes: composing a 4 MiB document takes seconds."""
    depth, events, key, items = 0, 0, None, None
    limits = max_items or {}
    for event in yaml.parse(text, Loader=_Loader):
        events += 1
        if max_events is not None and events > max_events:
            raise _TooLarge(f"more than {max_events} YAML nodes", "", event.start_mark)
        if items is not None and depth == 2 and not isinstance(event, _CLOSE):
            items[1] += 1          # one more item of a limited top-level list
            if items[1] > limits[items[0]]:
                raise _TooLarge(f"more than {limits[items[0]]} items", items[0], event.start_mark)
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            if depth == 2 and isinstance(event, yaml.SequenceStartEvent) and key in limits:
                items = [key, 0]
        elif isinstance(event, _CLOSE):
            depth -= 1
            if depth == 1:
                items = None
        if depth == 1 and isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            # a top-level key, then its value (keys alternate with values)
            key = event.value if key is None and isinstance(event, yaml.ScalarEvent) else None
        elif depth == 1 and isinstance(event, _CLOSE):
            key = None                                         # a list or mapping value ended


class _TooLarge(Exception):
    def __init__(self, problem: str, where: str, mark):
        self.problem, self.where, self.mark = problem, where, mark


def parse_yaml(text: str, max_items=None, max_events=None):
    """YAML text -> Python data; syntax problems name the line and column. ``max_items``
    (top-level key -> most list items) and ``max_events`` bound the document before it
    is composed."""
    try:
        _check_depth(text, max_items, max_events)
        return yaml.load(text, Loader=_Loader)   # noqa: S506 -- _Loader is a SafeLoader
    except _TooLarge as exc:
        at = f"line {exc.mark.line + 1}"
        raise InputError(exc.where or at, f"{exc.problem} (at {at})" if exc.where else exc.problem,
                         "split the file: that is the limit of one file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        ctx = getattr(exc, "context_mark", None)
        if "maximum nesting depth" in problem:   # PyYAML 6.0.4's libyaml stops at 1000 first
            problem, ctx = f"nested deeper than {MAX_DEPTH} levels", None
        if ctx is not None and getattr(exc, "context", None):   # the unclosed bracket
            problem += f" {exc.context} at line {ctx.line + 1} column {ctx.column + 1}"
        if isinstance(exc, DuplicateKeyError):
            raise InputError(where, one_line(problem, 200), "keep one of the two (YAML would "
                             "silently take the later)") from None
        raise InputError(where, f"invalid YAML ({one_line(problem, 160)})", "fix the syntax") from None


def check_tree(doc) -> None:
    """Depth, size after alias expansion, string keys, no control characters, finite
    numbers."""
    budget = [MAX_NODES]
    _walk(doc, "", 0, budget)


def _walk(node, where, depth, budget):
    budget[0] -= 1
    if budget[0] < 0:
        raise InputError("", f"expands to more than {MAX_NODES} values (YAML aliases?)",
                         "write the document out without repeated aliases")
    if depth > MAX_DEPTH:
        raise InputError(where or "(top level)", f"nested deeper than {MAX_DEPTH} levels "
                         "(a recursive alias?)", "flatten it")
    if isinstance(node, str):
        budget[0] -= len(node) // 256       # long strings repeated by aliases cost too
        _check_text(node, where)
    elif isinstance(node, float) and not math.isfinite(node):
        raise InputError(where or "(top level)", f"{node!r} is not a finite number",
                         "give a finite number (a literal beyond 1.8e308 overflows to inf)")
    elif isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                raise InputError(where or "(top level)", f"key {excerpt(key)} is not a string",
                                 "use a field name")
            _check_text(key, where or "(top level)")
            _walk(value, f"{where}.{key}" if where else key, depth + 1, budget)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, f"{where}[{i}]", depth + 1, budget)


def _check_text(text: str, where: str) -> None:
    bad = _CONTROL.search(text)
    if bad is not None:
        raise InputError(where or "(top level)", f"{excerpt(text)} contains the control character "
                         f"U+{ord(bad.group()):04X}", "remove it (names are single-line text)")
