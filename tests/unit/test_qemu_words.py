"""The QEMU error helpers keep the last lines, on one line, of what QEMU said."""

from vnetbench.image import qemu


def test_tail_keeps_the_last_non_empty_lines():
    text = "\n".join(f"line {i}" for i in range(30)) + "\n\n"
    assert qemu.tail(text, 3) == "line 27 | line 28 | line 29"
    assert qemu.tail("") == ""


def test_tail_file_says_when_there_is_nothing_to_read(tmp_path):
    assert qemu.tail_file(tmp_path / "absent").startswith("unreadable (")
    (tmp_path / "empty").write_text("")
    assert qemu.tail_file(tmp_path / "empty") == "empty"
    (tmp_path / "log").write_text("qemu-system-x86_64: -netdev tap: could not open /dev/net/tun\n")
    assert "could not open /dev/net/tun" in qemu.tail_file(tmp_path / "log")
