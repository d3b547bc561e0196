"""Encapsulation read from captured bytes (traffic.wire), on real frames: tcpdump -xx text
and the frames kept as evidence by the functional matrix's encapsulation probe."""

import json
import struct
from pathlib import Path

import pytest

from vnetbench.traffic import wire
from vnetbench.traffic.probe import MAGIC

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDED = {"encap-linuxbridge-flat": ("none", 0), "encap-linuxbridge-vxlan": ("VXLAN", 50),
            "encap-ovs-vxlan": ("VXLAN", 50), "encap-ovs-gre": ("GRE", 42),
            "encap-ovn-geneve": ("Geneve", 58), "encap-ovs-vlan": ("VLAN", 0),
            "encap-vrouter-gre": ("MPLSoGRE", 28)}


def needle(marker):
    return MAGIC + marker.to_bytes(4, "big")


def test_frames_read_the_xx_layout_and_an_odd_last_byte():
    frames = wire.frames((DATA / "tcpdump" / "xx-udp-lo.txt").read_text())
    assert [len(f) for f in frames] == [66, 47]
    assert wire.classify(frames[0], needle(7)) == {"encap": "none", "overhead": 0, "vlan": None}
    assert wire.classify(frames[1], needle(7)) is None           # not a probe
    assert wire.classify(frames[0], needle(8)) is None           # another run's probe


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_frames_classify_as_captured(name):
    m = json.loads((DATA / "functional" / f"{name}.json").read_text())
    encap, overhead = RECORDED[name]
    assert set(m["samples"]) == {encap}
    got = wire.classify(bytes.fromhex(m["samples"][encap]), needle(m["marker"]))
    assert (got["encap"], got["overhead"]) == (encap, overhead)
    assert (got["vlan"] is not None) == (encap == "VLAN")
    assert wire.classify(bytes.fromhex(m["samples"][encap])[:40], needle(m["marker"])) is None


def test_mpls_over_gre_is_named_with_its_28_bytes():
    """Constructed, beside vrouter's recording: Ethernet / IPv4 / GRE (0x8847) / one MPLS
    label, bottom of stack / the inner IPv4 / UDP probe."""
    inner_udp = struct.pack("!HHHH", 1000, 2000, 8 + 16, 0) + needle(9) + bytes(8)
    inner = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(inner_udp), 0, 0, 64, 17, 0,
                        bytes(4), bytes(4)) + inner_udp
    gre = struct.pack("!HH", 0, 0x8847) + struct.pack("!I", (16 << 12) | 0x100 | 64)
    outer = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(gre) + len(inner), 0, 0, 64, 47, 0,
                        bytes(4), bytes(4))
    frame = bytes(12) + b"\x08\x00" + outer + gre + inner
    assert wire.classify(frame, needle(9)) == {"encap": "MPLSoGRE", "overhead": 28, "vlan": None}


def test_command():
    assert wire.command("up1") == ["tcpdump", "-i", "up1", "-nn", "-xx", "-l", "-s", "256"]
