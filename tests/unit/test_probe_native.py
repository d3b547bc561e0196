"""The probe tool's Go build (vnetbench-flowgen probe-*, for guests without Python) speaks
the Python tool's datagrams, flags and JSON: each receives the other's probes on
loopback; and a guest's clock is mapped onto the runner's (measure.clock_offset)."""

import subprocess
import time
from types import SimpleNamespace

import pytest

from vnetbench.functional import measure
from vnetbench.traffic import flowgen, probe


@pytest.fixture(scope="module")
def tool():
    try:
        return flowgen.binary()
    except Exception as exc:          # not built: make install builds it (needs Go)
        pytest.skip(f"vnetbench-flowgen not built: {exc}")


def test_native_commands_are_the_go_tool_with_the_same_flags(tool):
    p = probe.SendParams("198.19.1.2", 4000, 5.0, 1.0, 77, broadcast=True)
    py, go = probe.send_command(p), probe.send_command(p, native=True)
    assert go[:2] == [tool, "probe-send"] and go[2:] == py[4:]
    r = probe.RecvParams(4000, 2.0, 77)
    assert probe.recv_command(r, native=True)[2:] == probe.recv_command(r)[4:]


@pytest.mark.parametrize("send_native, recv_native", [(False, True), (True, False)])
def test_each_tool_receives_the_others_probes(tool, send_native, recv_native):
    port, marker = 47000 + 10 * send_native + recv_native, 4242
    # the receiver's window counts from the first probe (a loaded machine starts the two
    # senders late and apart: a window from the receiver's start once closed before the
    # second sender's 0.5 s were through)
    recv = subprocess.Popen(probe.recv_command(probe.RecvParams(port, 4.0, marker, first_within=10.0),
                                               recv_native), stdout=subprocess.PIPE, text=True)
    assert '"ready"' in recv.stdout.readline()
    other = subprocess.Popen(probe.send_command(probe.SendParams("127.0.0.1", port, 5.0, 0.2, marker + 1),
                                                send_native), stdout=subprocess.PIPE, text=True)
    sent = probe.parse(subprocess.run(probe.send_command(probe.SendParams(
        "127.0.0.1", port, 5.0, 0.5, marker), send_native), capture_output=True, text=True,
        timeout=10).stdout)
    got = probe.parse(recv.communicate(timeout=20)[0])
    assert probe.parse(other.communicate(timeout=10)[0])["sent"] == 40   # another marker: not counted
    assert sent["sent"] == 100 and sent["errors"] == 0 and sent["interval_ns"] == 5_000_000
    assert got["received"] == 100 and [p[0] for p in got["probes"]] == list(range(100))
    assert got["probes"][0][1] == sent["first_ns"] and got["probes"][-1][1] == sent["last_ns"]
    assert all(s <= r for _, s, r in got["probes"])         # one machine, one clock


def test_go_tool_refuses_bad_flags_in_one_line(tool):
    done = subprocess.run([tool, "probe-send", "--dest", "nowhere", "--port", "9", "--seconds", "1",
                           "--marker", "1"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "need -dest IPv4" in done.stderr


class Guest:
    """A VM whose clock runs 5 s ahead of ours, read by the Go tool."""
    backend = "libvirt"

    def exec(self, vm, argv, timeout=None):
        assert argv == probe.clock_command()
        now = int(subprocess.run(argv, capture_output=True, text=True).stdout.split(":")[1].rstrip("}\n"))
        return SimpleNamespace(stdout=f'{{"monotonic_ns": {now + 5_000_000_000}}}\n')


def test_a_guest_clock_is_mapped_onto_ours(tool):
    got = measure.clock_offset(Guest(), "red-1")
    assert abs(got["offset_ns"] - 5e9) <= got["uncertainty_ns"] + 1e6
    assert measure.clock_offset(SimpleNamespace(backend="netns"), "red-1") == \
        {"offset_ns": 0, "uncertainty_ns": 0}
    sender, probes = measure._on_our_clock(
        {"sent": 2, "first_ns": 7_000, "last_ns": 9_000, "interval_ns": 5},
        [[0, 7_000, 107_500], [1, 9_000, 109_500]], {"offset_ns": 1_000}, {"offset_ns": 100_000})
    assert (sender["first_ns"], sender["last_ns"]) == (6_000, 8_000)
    assert probes == [[0, 6_000, 7_500], [1, 8_000, 9_500]]


def test_the_senders_clock_is_narrowed_by_causality():
    """The first probe left after the sender was started and before its ready line was
    read: that window cuts a loose estimate down; a shared clock stays exact."""
    est = {"offset_ns": 5_000, "uncertainty_ns": 600}     # first probe at ours 9_400..10_600
    got = measure.sender_clock(15_000, t_popen=9_000, t_ready=10_000, est=est)
    assert got == {"offset_ns": 5_300, "uncertainty_ns": 300}        # 9_400..10_000
    exact = {"offset_ns": 0, "uncertainty_ns": 0}
    assert measure.sender_clock(15_000, 1, 2, exact) is exact
    assert measure.sender_clock(15_000, 20_000, 30_000, est) is est  # inconsistent: the estimate


@pytest.mark.parametrize("native", [False, True])
def test_a_receiver_waits_for_a_late_sender(tool, native):
    """--first-within: the window counts from the first probe, so a sender that a slow
    guest starts seconds late is still heard whole."""
    port = 47100 + native
    recv = subprocess.Popen(probe.recv_command(probe.RecvParams(port, 0.5, 5, first_within=10.0),
                                               native), stdout=subprocess.PIPE, text=True)
    assert '"ready"' in recv.stdout.readline()
    time.sleep(1.0)                      # longer than the window itself
    subprocess.run(probe.send_command(probe.SendParams("127.0.0.1", port, 5.0, 0.3, 5), native),
                   capture_output=True, timeout=10)
    t0 = time.monotonic()
    got = probe.parse(recv.communicate(timeout=15)[0])
    assert got["received"] == 60 and time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("native", [False, True], ids=["python", "go"])
def test_sends_that_fail_still_mark_how_long_the_sender_tried(tool, native):
    """A sender without a route (a guest whose NIC the cloud unplugged) gets ENETUNREACH
    for every probe: none sent, each counted, and end_ns is its last attempt, which is
    what tells the deprovisioning verdict the window it watched. Run in a network
    namespace of its own (unshare -rn) that has no route at all: nothing leaves."""
    argv = probe.send_command(probe.SendParams("198.19.1.2", 47100, 5.0, 0.2, 9), native)
    done = subprocess.run(["unshare", "-rn", *argv], capture_output=True, text=True, timeout=30)
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no network namespace for the test (unshare -rn: {done.stderr.strip()})")
    got = probe.parse(done.stdout)
    assert got["sent"] == 0 and got["errors"] == 40
    assert got["first_ns"] is None and got["last_ns"] is None
    assert got["end_ns"] is not None
