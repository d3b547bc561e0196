"""Output paths: checked before the work, written whole or not at all, never over
something that is not a regular file.

Every file a command writes for the user (``--out``, ``--openstack``, ``--results``, the
report, reproduce and plan files, the profile of ``capacity``) goes through here, because
the ways a write goes wrong are the same everywhere and cost the most at the end of a long
run: a directory that does not exist, a file where a directory is meant (or the reverse),
``''``, ``.``, a name too long, a NUL byte, a read-only place, a full disk.

- **Checked first.** ``check_file``/``check_dir`` run before the command does its work, so
  a bad path is one line naming the flag, the path and the fix (exit 2) instead of a
  traceback after an hour of measuring. A directory output may be created, but only its
  last component (as ``mkdir`` does): its parent must exist (a typo is not silently
  turned into a tree). Paths vnetbench chooses itself (``results/...``) are created whole.
- **Written atomically.** Content goes to a temporary file beside the target (a short name
  of our own, ``.vnb-<pid>-<random>.tmp``, so a target name of 255 bytes still fits),
  written, fsynced, then renamed over the target. Several files of one output (a report's
  HTML, Markdown and CSV; reproduce's three) are all written to temporaries first and only
  then renamed: a full disk (ENOSPC, EDQUOT), EIO or an interrupt leaves the earlier
  files as they were and no temporary behind. A rename that fails half-way puts back what
  the earlier renames replaced (kept as hard links) and removes what they created.
- **Only regular files are replaced.** Renaming over ``/dev/null`` or a FIFO as root would
  turn the device node into a regular file; an existing target that is not a regular file
  (device, FIFO, socket, directory) is refused. A symbolic link as the target is refused
  too (decided: the rename would replace the link, not what it points to, and following
  it would let a link planted in a shared directory make root overwrite any file); links
  among the parent directories are followed as usual. The target is looked at again just
  before the rename.
- Appended records (``fault --results``, Rally's records.jsonl) are results.record's
  ``ResultStore``: their path gets ``check_file`` here first.

``OutputError`` is a ``VnetbenchError``: the CLI prints it on one line and exits 2.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from vnetbench.errors import VnetbenchError
from vnetbench.inputs import excerpt

SHOWN = 120        # characters of a path echoed back


class OutputError(VnetbenchError):
    """An output path that cannot be written (checked before the work, or the write failed)."""


def _show(path) -> str:
    return excerpt(os.fspath(path) if not isinstance(path, str) else path, SHOWN)


def _fail(flag: str, path, problem: str, fix: str) -> OutputError:
    return OutputError(f"{flag} {_show(path)}: {problem}; {fix}")


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISLNK, "a symbolic link"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _text(path, flag: str) -> str:
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if text == "":
        raise _fail(flag, text, "is empty", f"give {flag} a path")
    if "\0" in text:
        raise _fail(flag, text, "holds a NUL byte", "give a path without one")
    return text


def _lstat(p: Path, flag: str, shown) -> os.stat_result | None:
    try:
        return os.lstat(p)
    except FileNotFoundError:
        return None
    except OSError as exc:    # ENAMETOOLONG, ENOTDIR (a parent is a file), EACCES, ELOOP
        raise _fail(flag, shown, f"cannot be used ({exc.strerror})", f"choose another path for {flag}") from None


def _writable_dir(d: Path, flag: str, shown, create: bool, parents: bool) -> bool:
    """Check that D is (or, with CREATE, can become) a writable directory; True if it
    does not exist yet."""
    try:
        st = os.stat(d)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _fail(flag, shown, f"directory {_show(d)} cannot be used ({exc.strerror})",
                    f"choose another path for {flag}") from None
    if st is None and os.path.islink(d):
        raise _fail(flag, shown, f"{_show(d)} is a symbolic link to nothing",
                    f"remove it or give {flag} another directory")
    if st is None:
        if not create:
            raise _fail(flag, shown, f"directory {_show(d)} does not exist",
                        f"create it (mkdir -p {_show(d)}) or choose another path for {flag}")
        if not parents:         # mkdir, not mkdir -p: its parent must be there
            _writable_dir(d.parent, flag, shown, False, False)
        else:       # the nearest existing ancestor must be a writable directory
            ancestor = d.parent
            while not ancestor.exists() and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            _writable_dir(ancestor, flag, shown, False, False)
        return True
    if not stat.S_ISDIR(st.st_mode):
        raise _fail(flag, shown, f"{_show(d)} is {_kind(st.st_mode)}, not a directory",
                    f"give {flag} a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _read_only(d) else "is not writable"
        raise _fail(flag, shown, f"directory {_show(d)} {why}", f"choose a writable place for {flag}")
    return False


def _read_only(d: Path) -> bool:
    try:
        return bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _replaceable(p: Path, flag: str, shown) -> bool:
    """True if P exists (a regular file); refuses anything else there. SHOWN: the path
    as given (P itself, or the directory P is to be written in)."""
    st = _lstat(p, flag, shown)
    if st is None:
        return False
    if stat.S_ISREG(st.st_mode):
        return True
    inside = os.path.abspath(p) != os.path.abspath(os.fspath(shown))
    if inside:       # a file of a directory output
        fix = f"move it away or give {flag} another directory"
    elif stat.S_ISDIR(st.st_mode):
        fix = f"give {flag} a file path (e.g. {_show(p / 'NAME')})"
    elif stat.S_ISLNK(st.st_mode):
        fix = f"give {flag} the path it points to, or a new file"
    else:
        fix = f"one is never replaced: give {flag} a regular file's path"
    where = f"{excerpt(p.name, SHOWN)} there " if inside else ""
    raise _fail(flag, shown, f"{where}is {_kind(st.st_mode)}, not a regular file", fix)


def check_file(path, flag: str, parents: bool = False) -> Path:
    """The file PATH will be written: refuse now what the write would fail on (or do
    wrong). Its directory must exist (or, with PARENTS, be creatable: a default path)."""
    text = _text(path, flag)
    p = Path(text)
    if text.endswith("/") or p.name in ("", ".", ".."):
        raise _fail(flag, text, "names a directory, not a file", f"give {flag} a file path (e.g. DIR/NAME)")
    _replaceable(p, flag, text)
    if len(os.fsencode(p.name)) > 255:
        raise _fail(flag, text, "has a file name longer than 255 bytes", "choose a shorter name")
    _writable_dir(p.parent, flag, text, create=parents, parents=parents)
    return p


def check_dir(path, flag: str, names=(), parents: bool = False) -> Path:
    """The directory PATH (created when it is written, if missing: its parent must
    exist unless PARENTS) will hold NAMES: refuse now what writing them would fail on."""
    text = _text(path, flag)
    d = Path(text)
    missing = _writable_dir(d, flag, text, create=True, parents=parents)
    if not missing:
        for name in names:
            _replaceable(d / name, flag, text)
    return d


def write_file(path, content, flag: str) -> Path:
    """Write one file atomically (checked again first)."""
    return write_set([(path, content, flag)])[0]


def check_files(entries) -> list[Path]:
    """``check_file`` of each (path, flag), and no two the same file."""
    paths, seen = [], {}
    for path, flag in entries:
        p = check_file(path, flag)
        key = os.path.abspath(p)
        if key in seen:
            raise _fail(flag, path, f"is also the path given to {seen[key]}", "give each output its own file")
        seen[key] = flag
        paths.append(p)
    return paths


def write_set(entries) -> list[Path]:
    """Write each (path, content, flag) of ENTRIES, all or none: files of one output that
    may lie in different directories (plan's --out and --openstack)."""
    entries = list(entries)
    paths = check_files([(path, flag) for path, _, flag in entries])
    return _write([(p, content, flag, path) for p, (path, content, flag) in zip(paths, entries)])


def write_files(directory, files: dict, flag: str, parents: bool = False) -> list[Path]:
    """Write every file of FILES ({name: str or bytes}) into DIRECTORY, all or none.
    DIRECTORY is created if missing (and removed again if the write fails)."""
    d = check_dir(directory, flag, files, parents=parents)
    created = []
    try:
        if not d.is_dir():
            created = _mkdirs(d)
        return _write([(d / name, content, flag, directory) for name, content in files.items()])
    except BaseException as exc:
        for c in reversed(created):
            _rmdir(c)
        if isinstance(exc, OSError):        # the directory could not be made
            raise _failed(flag, directory, exc) from None
        raise


def _write(targets) -> list[Path]:
    """TARGETS: (path, content, flag, path as given); temporaries first, then renames."""
    temps = []
    current = targets[0] if targets else None
    try:
        for current in targets:
            temps.append(_temp(current[0].parent, current[1]))
        current = None
        return _rename_all([(t[0], tmp, t[2], t[3]) for t, tmp in zip(targets, temps)])
    except OSError as exc:
        _, _, flag, shown = current or targets[0]
        raise _failed(flag, shown, exc) from None
    finally:
        for tmp in temps:
            _unlink(tmp)


def _failed(flag, shown, exc: OSError) -> OutputError:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space there or choose another place with {flag}, then run again"
    else:
        fix = f"choose another place with {flag}, then run again"
    return _fail(flag, shown, f"cannot write ({why}); nothing was written", fix)


def _mkdirs(d: Path) -> list[Path]:
    """Create D and its missing parents; the ones created, outermost first."""
    missing = []
    while not d.exists():
        missing.append(d)
        if d == d.parent:
            break
        d = d.parent
    made = []
    try:
        for m in reversed(missing):
            os.mkdir(m)
            made.append(m)
    except BaseException:
        for m in reversed(made):
            _rmdir(m)
        raise
    return made


def _temp(d: Path, content) -> Path:
    data = content.encode() if isinstance(content, str) else bytes(content)
    tmp = d / f".vnb-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _rename_all(items) -> list[Path]:
    """Rename each temporary over its target; if one fails, undo the earlier ones.
    ITEMS: (target, temporary, flag, path as given)."""
    done = []           # (target, backup or None, existed)
    flag = shown = None
    try:
        for target, tmp, flag, shown in items:
            existed = _replaceable(target, flag, shown)      # again: it may have changed
            backup = None
            if existed:
                os.chmod(tmp, stat.S_IMODE(os.lstat(target).st_mode))
                backup = target.parent / f".vnb-{os.getpid()}-{secrets.token_hex(4)}.old"
                try:
                    os.link(target, backup)
                except OSError:
                    backup = None
            try:
                os.rename(tmp, target)
            except BaseException:
                if backup:
                    _unlink(backup)
                raise
            done.append((target, backup, existed))
    except BaseException as exc:
        for target, backup, existed in reversed(done):
            if backup:
                try:
                    os.rename(backup, target)
                except OSError:
                    _unlink(backup)
            elif not existed:
                _unlink(target)
        if isinstance(exc, OSError):
            raise _failed(flag, shown, exc) from None
        raise
    for _, backup, _ in done:
        if backup:
            _unlink(backup)
    return [target for target, _, _ in done]


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def _rmdir(p: Path) -> None:
    try:
        os.rmdir(p)
    except OSError:
        pass
