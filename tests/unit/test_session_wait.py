"""wait_listening: a server that died says why at once; one that never listens is named
as still running (the difference between a crash and a stall in a starved guest)."""

import io
import subprocess
import types

import pytest

from vnetbench.battery import session


class _Dep:
    """ss never shows the port."""
    testbed = None

    def exec(self, vm, argv, timeout=None):
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")


def _server(rc):
    return types.SimpleNamespace(poll=lambda: rc, returncode=rc,
                                 stderr=io.BytesIO(b"iperf3: error - unable to start listener for "
                                                   b"connections: Address already in use\niperf3: exiting\n"))


def test_a_server_that_exited_is_named_with_its_error_at_once():
    with pytest.raises(RuntimeError, match=r"red-2 exited with 1 .*Address already in use"):
        session.wait_listening(_Dep(), "red-2", 5201, timeout=30, server=_server(1))


def test_a_server_still_running_but_not_listening_says_so():
    with pytest.raises(RuntimeError, match=r"not listening on 5201 after 0 s \(its process is still running\)"):
        session.wait_listening(_Dep(), "red-2", 5201, timeout=0.2, server=_server(None))


class _LocalDep(_Dep):
    """A VM that is this machine, whose address is nowhere: a real iperf3 server cannot
    bind it (nothing is sent)."""

    def ip(self, vm):
        return "198.19.255.254"

    def popen(self, vm, argv, **kwargs):
        return subprocess.Popen(argv, **kwargs)


def test_a_real_iperf3_server_that_cannot_bind_is_named_and_not_retried():
    """iperf3 exits 1 (its -J error goes to the discarded stdout): the answer, not the
    channel's 255, so it is started once only."""
    dep = _LocalDep()
    started = []
    real = dep.popen
    dep.popen = lambda vm, argv, **kw: started.append(1) or real(vm, argv, **kw)
    with pytest.raises(RuntimeError, match=r"red-2 exited with 1 before listening") as err:
        with session.iperf3_server(dep, "red-2"):
            pass
    assert not isinstance(err.value, session.ChannelLost)
    assert len(started) == 1


def test_a_silent_ssh_255_is_explained():
    server = types.SimpleNamespace(poll=lambda: 255, returncode=255, stderr=io.BytesIO(b""))
    with pytest.raises(RuntimeError, match=r"exited with 255 .*SSH session .* killed by a signal"):
        session.wait_listening(_Dep(), "red-2", 5201, timeout=30, server=server)


class _Flaky(_Dep):
    """The first session is closed by the guest before the server runs (silent 255); the
    second one listens."""

    def __init__(self, losses):
        self.started, self.losses = 0, losses

    def ip(self, vm):
        return "198.19.1.2"

    def popen(self, vm, argv, **kwargs):
        self.started += 1
        lost = self.started <= self.losses
        return types.SimpleNamespace(poll=lambda: 255 if lost else None, returncode=255 if lost else None,
                                     stderr=io.BytesIO(b""), terminate=lambda: None, kill=lambda: None,
                                     communicate=lambda timeout=None: (None, b""))

    def exec(self, vm, argv, timeout=None):
        out = "LISTEN 0 5 198.19.1.2:5201 0.0.0.0:*" if self.started > self.losses else ""
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")


def test_a_lost_command_channel_is_tried_once_more():
    dep = _Flaky(losses=1)
    with pytest.warns(RuntimeWarning, match="red-2 exited with 255 .*opened once more"):
        with session.iperf3_server(dep, "red-2"):
            pass
    assert dep.started == 2


def test_a_second_lost_channel_is_an_error():
    dep = _Flaky(losses=2)
    with pytest.raises(session.ChannelLost, match="exited with 255"), pytest.warns(RuntimeWarning):
        with session.iperf3_server(dep, "red-2"):
            pass
    assert dep.started == 2
