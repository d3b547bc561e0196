"""Running commands in real guests over the image's command channel (SSH): shared by
the backends whose VMs are guests (libvirt, openstack); each provides ``ssh(vm)``."""

from __future__ import annotations

import subprocess

from vnetbench.linux import proc

# the remote command dies with the SSH session: a killed background process must not
# keep running in the guest (a stale iperf3 server would hold its port)
_TIED = 'exec 3<&0; "$@" & p=$!; (read x <&3; kill $p) >/dev/null 2>&1 & exec 3<&-; wait $p'
# the same tie for a caller that writes to the command's stdin (a scale gate's release):
# the session's lines are passed on through a FIFO, and its end (EOF) still kills the command
_TIED_STDIN = ('exec 3<&0; f=/tmp/vnb-stdin.$$; mkfifo -m 600 "$f" || exit 125; "$@" <"$f" & p=$!; '
               'exec 4>"$f"; rm -f "$f"; '
               '(while IFS= read -r x <&3; do printf "%s\\n" "$x" >&4; done; kill $p) >/dev/null 2>&1 & '
               'exec 3<&- 4>&-; wait $p')


def by_name(argv) -> list[str]:
    """Tools run by name: an absolute path on the runner's machine (e.g.
    .venv/bin/vnetbench-flowgen) means nothing in the guest, whose image has them on PATH."""
    argv = list(map(str, argv))
    if argv and argv[0].startswith("/"):
        argv[0] = argv[0].rsplit("/", 1)[1]
    return argv


class SshGuests:
    """vm_argv and popen of the Deployment interface through ``self.ssh(vm)`` (exec is
    RunDeployment's, through vm_argv)."""

    def vm_argv(self, vm: str, argv) -> list[str]:
        """argv run in the guest (its vCPUs pinned by the hypervisor)."""
        return self.ssh(self.testbed.vm(vm).name).argv(by_name(argv))

    def popen(self, vm: str, argv, **kwargs) -> subprocess.Popen:
        return tied_popen(self.run, self.ssh(vm), argv, {"vm": vm}, **kwargs)


def tied_popen(run, ssh, argv, label: dict, **kwargs) -> subprocess.Popen:
    """ARGV started over SSH, dying with the session; journaled in RUN with LABEL
    ({"vm": name} or {"host": name}). With ``stdin=PIPE`` what is written to ``p.stdin``
    reaches the command, and closing it ends the command (read its output before)."""
    writes = kwargs.pop("stdin", None) == subprocess.PIPE   # the session's stdin is the tie
    tied = ["sh", "-c", _TIED_STDIN if writes else _TIED, "sh", *by_name(argv)]
    p = subprocess.Popen(ssh.argv(tied), stdin=subprocess.PIPE, start_new_session=True, **kwargs)
    # the tie is held, not offered: communicate() would close it and so end the remote
    # process before its result (a counter's, a capture's) is printed
    p.tie = p.stdin
    if not writes:
        p.stdin = None
    run.record("process", pid=p.pid, starttime=proc.starttime(p.pid), **label,
               argv=list(map(str, argv)))
    return p
