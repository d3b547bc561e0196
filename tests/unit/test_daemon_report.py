"""What a builder says about an os-ken daemon that did not do its part in time: a real
Python process under a pidfile, hung, gone, or never started."""

import subprocess
import sys
import time

from vnetbench.linux import proc

HUNG = """
import faulthandler, os, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)
def waits_for_ever():
    # the pid is written from in here: a dump asked for as soon as it is there (under load,
    # before the call once) finds this frame
    open(sys.argv[1].split("=", 1)[1], "w").write(f"{os.getpid()}\\n")
    time.sleep(60)
waits_for_ever()
"""


def _start(tmp_path):
    pf, log = tmp_path / "agent.pid", tmp_path / "agent.log"
    with open(log, "ab") as out:
        p = subprocess.Popen([sys.executable, "-c", HUNG, f"--pidfile={pf}"], stdout=out,
                             stderr=subprocess.STDOUT)
    # until the pid is in it: the file exists (open) a moment before its pid is written,
    # and a daemon killed in that moment leaves an empty pidfile (seen under load)
    deadline = time.monotonic() + 10
    while not (pf.exists() and pf.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return p


def _report_of_hung(tmp_path):
    """(pid, report) of a hung daemon, which is then killed."""
    p = _start(tmp_path)
    try:
        return p.pid, proc.python_daemon_report(tmp_path, "agent")
    finally:
        p.kill()
        p.wait()


def test_a_hung_daemon_is_named_with_its_stack(tmp_path):
    pid, report = _report_of_hung(tmp_path)
    assert f"pid {pid} state S" in report
    assert "waits_for_ever" in report, report


def test_a_dead_daemon_is_named_with_its_last_log_line(tmp_path):
    p = _start(tmp_path)
    p.kill()
    p.wait()
    (tmp_path / "agent.log").write_text("Traceback ...\nOSError: boom\n")
    assert proc.python_daemon_report(tmp_path, "agent") == \
        f"agent: pid {p.pid} is not running; log: OSError: boom"


def test_a_daemon_without_pidfile(tmp_path):
    assert "no pidfile" in proc.python_daemon_report(tmp_path, "agent")


def test_stop_asks_again_before_sigkill(tmp_path):
    """A process that ignores SIGTERM and whose pid stops being ours in the grace (it
    ended, the pid went to another) is not SIGKILLed: stop asks is_ours again first."""
    p = subprocess.Popen([sys.executable, "-c",
                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "print(flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    p.stdout.readline()
    asked = []

    def is_ours(pid):
        asked.append(pid)
        return len(asked) == 1          # ours when first asked, someone else's after
    try:
        assert proc.stop(p.pid, is_ours, grace=0.2)
        assert len(asked) == 2 and p.poll() is None     # still running: it was not killed
    finally:
        p.kill()
        p.wait()


def test_a_running_daemon_names_the_last_exception_in_its_log(tmp_path):
    """A thread that died of an exception leaves the daemon running without it: the
    report names that exception, not only where the remaining threads wait."""
    (tmp_path / "agent.log").write_text(
        "hub: uncaught exception: Traceback (most recent call last):\n"
        '  File "x.py", line 3, in _watch\n    for m in d.items():\n'
        "RuntimeError: dictionary changed size during iteration\n")
    _, report = _report_of_hung(tmp_path)
    assert "waits_for_ever" in report, report
    assert report.endswith("; last exception in its log: RuntimeError: dictionary changed "
                           "size during iteration (at _watch (x.py:3))"), report


def test_no_exception_no_mention(tmp_path):
    assert "exception" not in _report_of_hung(tmp_path)[1]


DUMP = """Thread 0x1 (most recent call first):
  File "/v/lib/python3.11/site-packages/os_ken/lib/hub.py", line 99 in put
  File "/v/lib/python3.11/site-packages/os_ken/controller/controller.py", line 400 in send_msg
  File "/w/src/vnetbench/kinds/ovs_openflow/floodlight.py", line 170 in _remove_vnets
  File "/v/lib/python3.11/site-packages/os_ken/base/app_manager.py", line 289 in _event_loop

""" + "".join(f"""Thread 0x{i + 2} (most recent call first):
  File "/v/lib/python3.11/site-packages/os_ken/controller/controller.py", line 323 in _recv_loop

""" for i in range(9))


def test_every_thread_is_named_alike_ones_counted():
    """Nine threads alike and one more: none is cut off (a cut list once hid a live
    thread), and a thread waiting in a library names vnetbench's frame that called it."""
    assert proc._threads(DUMP) == ["put (hub.py:99) in _remove_vnets (floodlight.py:170)",
                                   "_recv_loop (controller.py:323) x9"]
