"""Output paths (vnetbench.outfiles, issue 51): every hostile --out is one line naming the
flag, exit 2, before the work; a write that fails (full disk, EIO) leaves nothing partial
-- no temporary, no half of a report's files; device nodes, FIFOs, sockets and symbolic
links are never replaced. Hypothesis generates the paths (missing directories, files as
directories, device nodes, FIFOs, symlinks, '', '.', long names, NUL bytes); one test
fills a real tmpfs (root, in a mount namespace of its own)."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vnetbench import cli, outfiles
from vnetbench.errors import VnetbenchError

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
SETTINGS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def run(argv, capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tree(base: Path) -> dict:
    """Every entry under BASE (links not followed) -> what would show a change."""
    found = {}
    for d, dirs, files in os.walk(base):
        for name in dirs + files:
            p = Path(d, name)
            s = os.lstat(p)
            content = p.read_bytes() if stat.S_ISREG(s.st_mode) else os.readlink(p) \
                if stat.S_ISLNK(s.st_mode) else None
            found[str(p.relative_to(base))] = (s.st_mode, s.st_rdev, s.st_ino, content)
    return found


def furnish(base: Path) -> None:
    """A directory with one of every kind of thing an output path may meet."""
    (base / "dir").mkdir()
    (base / "dir" / "old.txt").write_text("old\n")
    (base / "file").write_text("a file\n")
    os.mkfifo(base / "fifo")
    os.symlink(base / "file", base / "link-to-file")
    os.symlink(base / "dir", base / "link-to-dir")
    os.symlink(base / "nowhere", base / "dangling")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(base / "sock"))
    sock.close()
    if ROOT:
        os.mknod(base / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))    # a /dev/null of our own


def one_line_exit_2(code, err, flag="--out"):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"vnetbench: error: {flag} "), err
    assert "Traceback" not in err


# --- the classes, one by one ---------------------------------------------------------------

CLASSES = {       # path (relative to the furnished directory) -> words of the message
    "": "is empty", "missing/profile.yaml": "does not exist", "file/profile.yaml": "Not a directory",
    "dir": "is a directory", "dir/": "names a directory", ".": "names a directory",
    "fifo": "is a FIFO", "sock": "is a socket", "link-to-file": "is a symbolic link",
    "dangling": "is a symbolic link", "x" * 256: "File name too long", "a\0b": "NUL byte",
}


@pytest.mark.parametrize("rel", CLASSES, ids=lambda r: repr(r[:20]))
def test_capacity_out_refused_in_one_line_and_nothing_touched(rel, tmp_path, capsys, monkeypatch):
    furnish(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    path = rel if rel in ("", ".", "a\0b") else str(tmp_path / rel) + ("/" if rel.endswith("/") else "")
    code, out, err = run(["capacity", str(DATA / "capacity"), "--out", path], capsys)
    one_line_exit_2(code, err)
    assert CLASSES[rel] in err
    assert tree(tmp_path) == before


@pytest.mark.skipif(not ROOT, reason="mknod needs root")
def test_a_device_node_is_never_replaced(tmp_path, capsys):
    """The defect of issue 51: a temporary renamed over --out /dev/null made it a regular file."""
    furnish(tmp_path)
    before = os.lstat(tmp_path / "null")
    code, _, err = run(["capacity", str(DATA / "capacity"), "--out", str(tmp_path / "null")], capsys)
    one_line_exit_2(code, err)
    assert "is a character device, not a regular file" in err and "never replaced" in err
    after = os.lstat(tmp_path / "null")
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)


def test_real_dev_null_is_refused_before_the_work(capsys):
    before = os.lstat("/dev/null")
    code, _, err = run(["capacity", "/nonexistent-records", "--out", "/dev/null"], capsys)
    one_line_exit_2(code, err)          # the output checked first: the records never read
    after = os.lstat("/dev/null")
    assert (after.st_mode, after.st_rdev) == (before.st_mode, before.st_rdev)


def test_plan_outputs_checked_before_planning(tmp_path, capsys):
    code, _, err = run(["plan", "nope.yaml", "nope.yaml", "--capacity", "nope.yaml",
                        "--openstack", str(tmp_path / "missing" / "h.yaml")], capsys)
    one_line_exit_2(code, err, "--openstack")
    code, _, err = run(["plan", "w", "h", "--capacity", "p", "--out", str(tmp_path / "x"),
                        "--openstack", str(tmp_path / "x")], capsys)
    one_line_exit_2(code, err, "--openstack")
    assert "also the path given to --out" in err


def test_report_out_a_file_or_missing_parent(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    for out, words in ((tmp_path / "f", "not a directory"), (tmp_path / "no" / "such", "does not exist")):
        code, _, err = run(["report", str(DATA / "report"), "--out", str(out), "--format", "csv"], capsys)
        one_line_exit_2(code, err)
        assert words in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_report_refuses_a_fifo_where_one_of_its_files_goes(tmp_path, capsys):
    os.mkfifo(tmp_path / "report.md")
    code, _, err = run(["report", str(DATA / "report"), "--out", str(tmp_path), "--format", "csv,md"], capsys)
    one_line_exit_2(code, err)
    assert "'report.md' there is a FIFO" in err and sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]
    assert stat.S_ISFIFO(os.lstat(tmp_path / "report.md").st_mode)


def test_reproduce_and_compare_results_checked_first(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    code, _, err = run(["compare", "--results", str(tmp_path / "f"), "--no-monitor"], capsys)
    one_line_exit_2(code, err, "--results")
    seed = cli._parser()._subparsers._group_actions[0].choices["reproduce"]._actions[1].choices[0]
    code, _, err = run(["reproduce", seed, "--results", str(tmp_path / "no" / "such")], capsys)
    one_line_exit_2(code, err, "--results")
    code, _, err = run(["demo", "--results", str(tmp_path / "f")], capsys)
    one_line_exit_2(code, err, "--results")


@pytest.mark.parametrize("argv", [["report", str(DATA / "report"), "--out", ""],
                                  ["capacity", str(DATA / "capacity"), "--out", ""],
                                  ["plan", "w", "h", "--capacity", "p", "--out", ""],
                                  ["plan", "w", "h", "--capacity", "p", "--openstack", ""],
                                  ["compare", "--results", "", "--no-monitor"],
                                  ["demo", "--results", ""],
                                  ["functional", "--out", ""],
                                  ["image", "build", "--out", ""],
                                  ["monitor", "up", "--data", ""]], ids=lambda a: a[0] + " " + a[-2])
def test_an_empty_path_is_refused_never_taken_for_the_default(argv, capsys):
    flag = next(a for a in argv if a.startswith("--") and a != "--no-monitor" and a != "--capacity")
    code, _, err = run(argv, capsys)
    one_line_exit_2(code, err, flag)
    assert "is empty" in err
    assert not (DATA / "report" / "report.html").exists()


def test_not_writable_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(outfiles.os, "access", lambda *a: False)
    with pytest.raises(outfiles.OutputError, match=r"is not writable; choose a writable place"):
        outfiles.check_file(tmp_path / "p.yaml", "--out")


def test_a_long_name_still_gets_a_temporary(tmp_path):
    """The temporary's name is short and our own: a 255-byte target name still works."""
    name = "n" * 255
    assert outfiles.write_file(tmp_path / name, "x", "--out").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_replaced_file_keeps_its_mode(tmp_path):
    (tmp_path / "p").write_text("old")
    os.chmod(tmp_path / "p", 0o600)
    outfiles.write_file(tmp_path / "p", "new", "--out")
    assert (tmp_path / "p").read_text() == "new" and stat.S_IMODE(os.lstat(tmp_path / "p").st_mode) == 0o600


# --- failures while writing: nothing partial -----------------------------------------------

@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_failed_write_leaves_no_half_of_the_report(err, tmp_path, monkeypatch, capsys):
    (tmp_path / "report.csv").write_text("old csv\n")
    real, calls = os.write, []

    def write(fd, data):
        calls.append(fd)
        if len(calls) == 2:          # the second file of three
            raise OSError(err, os.strerror(err))
        return real(fd, data)
    monkeypatch.setattr(outfiles.os, "write", write)
    code, _, msg = run(["report", str(DATA / "report"), "--out", str(tmp_path)], capsys)
    one_line_exit_2(code, msg)
    assert os.strerror(err) in msg and "nothing was written" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.csv"]
    assert (tmp_path / "report.csv").read_text() == "old csv\n"


def test_a_failed_write_removes_the_directory_it_made(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(outfiles.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "EIO")))
    code, _, msg = run(["report", str(DATA / "report"), "--out", str(tmp_path / "new"), "--format", "csv"],
                       capsys)
    one_line_exit_2(code, msg)
    assert list(tmp_path.iterdir()) == []


def test_a_rename_failing_half_way_puts_back_what_was_replaced(tmp_path, monkeypatch):
    (tmp_path / "a").write_text("old a")
    real, calls = os.rename, []

    def rename(src, dst):
        calls.append(dst)
        if Path(dst).name == "b":
            raise OSError(errno.EIO, "Input/output error")
        return real(src, dst)
    monkeypatch.setattr(outfiles.os, "rename", rename)
    with pytest.raises(VnetbenchError, match="Input/output error"):
        outfiles.write_files(tmp_path, {"a": "new a", "c": "new c", "b": "new b"}, "--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]
    assert (tmp_path / "a").read_text() == "old a"


def test_plan_writes_out_and_openstack_both_or_neither(tmp_path, monkeypatch):
    real = os.write

    def write(fd, data):
        if bytes(data).startswith(b"second"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)
    monkeypatch.setattr(outfiles.os, "write", write)
    (tmp_path / "d").mkdir()
    with pytest.raises(VnetbenchError, match="--openstack .*No space left"):
        outfiles.write_set([(tmp_path / "one", "first", "--out"), (tmp_path / "d" / "two", "second", "--openstack")])
    assert list(tmp_path.iterdir()) == [tmp_path / "d"] and list((tmp_path / "d").iterdir()) == []


def test_an_interrupt_while_writing_leaves_no_temporary(tmp_path, monkeypatch):
    monkeypatch.setattr(outfiles.os, "fsync", lambda fd: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        outfiles.write_files(tmp_path / "new", {"a": "x"}, "--out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not ROOT or not shutil.which("unshare"), reason="a tmpfs mount needs root")
def test_a_really_full_disk(tmp_path):
    """A 64 KiB tmpfs, mounted in a mount namespace of the test's own (gone with it): the
    report does not fit; then a read-only tmpfs. Exit 2, one line, nothing left there."""
    script = f"""
set -e
mkdir -p {tmp_path}/full {tmp_path}/ro
mount -t tmpfs -o size=64k tmpfs {tmp_path}/full
mount -t tmpfs -o ro,size=64k tmpfs {tmp_path}/ro
head -c 40000 /dev/zero > {tmp_path}/full/filler
set +e
{sys.executable} -m vnetbench report {DATA / 'report'} --out {tmp_path}/full/r
echo "rc=$?"
{sys.executable} -m vnetbench capacity {DATA / 'capacity'} --out {tmp_path}/ro/p.yaml
echo "rc=$?"
echo "left: $(ls -A {tmp_path}/full | tr '\\n' ' ')| $(ls -A {tmp_path}/ro)"
"""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, env=env)
    if "mount:" in done.stderr and "rc=" not in done.stdout:
        pytest.skip(f"no tmpfs here: {done.stderr[-200:]}")
    assert done.stdout.count("rc=2") == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("vnetbench:")]
    assert len(errors) == 2 and "No space left on device" in errors[0] and "nothing was written" in errors[0]
    assert "read-only file system" in errors[1], errors
    assert "Traceback" not in done.stderr
    assert done.stdout.strip().endswith("left: filler |"), done.stdout


# --- Hypothesis: hostile paths of every kind --------------------------------------------------

PARTS = ["dir", "file", "fifo", "sock", "link-to-file", "link-to-dir", "dangling", "missing", "new",
         ".", "..", "", "x" * 300, "a\0b", "ü", " ", "-"] + (["null"] if ROOT else [])
paths = st.tuples(st.booleans(), st.lists(st.sampled_from(PARTS), min_size=0, max_size=3), st.booleans())


def _path(base: Path, spec) -> str:
    absolute, parts, slash = spec
    text = "/".join(parts) + ("/" if slash and parts else "")
    return f"{base}/{text}" if absolute else text


def _check_after(code, out, err, base, before, flag="--out"):
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith(f"vnetbench: error: {flag}") and "Traceback" not in err, err
        assert tree(base) == before
    after = tree(base)
    assert not [k for k in after if ".vnb-" in k], after          # no temporary left
    assert sorted(os.listdir(DATA / "report")) == ["README.md", "records.jsonl"]    # nothing beside the input
    for name, (mode, rdev, ino, _) in before.items():             # nodes, FIFOs, links untouched
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            assert after[name][:3] == (mode, rdev, ino), name


def _cli_in(base: Path, argv) -> tuple:
    """(exit code, stdout, stderr) of ``vnetbench ARGV`` run from the directory BASE."""
    import contextlib
    import io
    cwd = os.getcwd()
    os.chdir(base)
    try:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=60, **SETTINGS)
@given(paths)
def test_hostile_profile_paths(spec):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        furnish(base)
        before = tree(base)
        _check_after(*_cli_in(base, ["capacity", str(DATA / "capacity"), f"--out={_path(base, spec)}"]),
                     base, before)


@settings(max_examples=40, **SETTINGS)
@given(paths)
def test_hostile_report_directories(spec):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        furnish(base)
        before = tree(base)
        _check_after(*_cli_in(base, ["report", str(DATA / "report"), "--format", "csv,md",
                                     f"--out={_path(base, spec)}"]), base, before)
