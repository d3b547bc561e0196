"""A smoke check of a cached all-in-one root: OVS (netdev datapath) and OVN (NB, SB,
ovn-northd, ovn-controller) from the root, started and seen to work together.

Why this shape: everything runs in private mount, network and PID namespaces around the
root (``unshare --mount --net --pid --fork --kill-child``), so the daemons detach inside
a PID namespace whose init is the check's shell: when it ends, however it ends, the kernel
kills every process in it and the namespaces go with them; nothing is journaled because
nothing can outlive the check. The root is bind-mounted onto itself first (``ip netns
exec`` and other remounts of "/" fail in a plain chroot) and every directory the daemons
write (/run, /var/lib/openvswitch, /var/lib/ovn, /etc/openvswitch, /var/log, /tmp) is a
tmpfs of the check's own: the cached root is never written.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from vnetbench.aio import procs
from vnetbench.aio.rootbuild import PRIVATE_DEV
from vnetbench.errors import VnetbenchError

TIMEOUT_S = 120
SCRATCH = ("run", "var/lib/openvswitch", "var/lib/ovn", "etc/openvswitch", "var/log", "tmp")
# /dev is the root's own (rootbuild.PRIVATE_DEV), with the tun device OVS's netdev
# datapath opens for br-int's internal ports
SETUP = ('set -eu;' + PRIVATE_DEV + 'r=$1; shift; mount --bind "$r" "$r"; mount -t proc proc "$r/proc"; '
         'mount -t sysfs sysfs "$r/sys"; private_dev "$r" net/tun:10:200; '
         'for d in ' + " ".join(SCRATCH) + '; do mount -t tmpfs -o size=64m vnb-smoke "$r/$d"; done; '
         'ip link set lo up; exec chroot "$r" sh -euc "$@"')
CHECK = r"""
O=/run/openvswitch N=/run/ovn
mkdir -p $O $N
export OVS_RUNDIR=$O OVN_RUNDIR=$N OVN_NB_DB=unix:$N/ovnnb_db.sock OVN_SB_DB=unix:$N/ovnsb_db.sock
d() { name=$1; shift; "$@" --detach --no-chdir --log-file=$N/$name.log; }
ovsdb-tool create $O/conf.db /usr/share/openvswitch/vswitch.ovsschema
d ovs-db ovsdb-server $O/conf.db --remote=punix:$O/db.sock --pidfile=$O/ovsdb-server.pid
ovs-vsctl --no-wait init
d vswitchd ovs-vswitchd unix:$O/db.sock --pidfile=$O/ovs-vswitchd.pid
for db in nb sb; do
  ovsdb-tool create $N/ovn${db}_db.db /usr/share/ovn/ovn-$db.ovsschema
  d $db ovsdb-server $N/ovn${db}_db.db --remote=punix:$N/ovn${db}_db.sock --pidfile=$N/$db.pid
done
d northd ovn-northd --ovnnb-db=$OVN_NB_DB --ovnsb-db=$OVN_SB_DB --pidfile=$N/northd.pid
ovs-vsctl set open . external-ids:system-id=vnb-smoke external-ids:ovn-remote=$OVN_SB_DB \
  external-ids:ovn-encap-type=geneve external-ids:ovn-encap-ip=127.0.0.1 \
  external-ids:ovn-bridge-datapath-type=netdev
d controller ovn-controller unix:$O/db.sock --pidfile=$N/controller.pid
ovn-nbctl ls-add vnb-smoke -- lsp-add vnb-smoke p1
ovs-vsctl --timeout=30 wait-until Bridge br-int datapath_type=netdev
ovs-vsctl add-port br-int p1 -- set Interface p1 type=internal external_ids:iface-id=p1
ovn-sbctl --timeout=30 wait-until Chassis vnb-smoke
i=0; until [ "$(ovn-nbctl get Logical_Switch_Port p1 up)" = true ]; do
  i=$((i+1)); [ $i -lt 300 ] || { echo "p1 not up"; exit 1; }; sleep 0.1; done
echo "chassis: $(ovn-sbctl --bare --columns=name list Chassis)"
echo "br-int: $(ovs-vsctl get Bridge br-int datapath_type)"
echo "p1 up: $(ovn-nbctl get Logical_Switch_Port p1 up) in $((i / 10)).$((i % 10)) s"
echo "ovs: $(ovs-vswitchd --version | head -1)"
echo "ovn: $(ovn-northd --version | head -1)"
"""


def smoke(root: Path, mark: str = "aio-root-smoke") -> dict:
    """Start OVS and OVN in ROOT and wait until ovn-controller has registered its
    chassis, made a netdev br-int and bound a logical port; what they reported."""
    argv = ["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child",
            "--propagation", "private", "sh", "-c", SETUP, "sh", str(root), CHECK]
    env = {**os.environ, procs.MARKER: mark, "LC_ALL": "C.UTF-8",
           "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    try:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise VnetbenchError(f"aio root smoke: OVS/OVN in {root} did not come up in "
                             f"{TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise VnetbenchError(f"aio root smoke: OVS/OVN in {root} failed: {tail[0][:300]}")
    return dict(re.findall(r"^([a-z0-9 -]+): (.*)$", done.stdout, re.M))
