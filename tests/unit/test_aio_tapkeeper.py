"""The AIO's tap keeper (vnetbench.aio.tapkeeper) reads a link's IFF_UP from sysfs."""

from vnetbench.aio import tapkeeper


def test_a_tap_without_iff_up_is_down_and_a_missing_one_is_not(tmp_path):
    for name, flags in (("tapup", "0x1103"), ("tapdown", "0x1102")):   # PROMISC on both
        (tmp_path / name).mkdir()
        (tmp_path / name / "flags").write_text(flags + "\n")
    assert tapkeeper.is_down("tapdown", tmp_path)
    assert not tapkeeper.is_down("tapup", tmp_path)
    assert not tapkeeper.is_down("gone", tmp_path)          # deleted with its domain: not ours
