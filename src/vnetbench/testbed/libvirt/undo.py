"""Undo steps for what the libvirt backend journals (``testbed.unwind`` reads ``STEPS``):
only objects that carry the run's id are touched."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from pyroute2 import IPRoute

from vnetbench.testbed.libvirt import domain as dom
from vnetbench.testbed.unwind import Step


def undo_domain(run, entry) -> None:
    from vnetbench.linux.libvirtd import URI, connect
    import libvirt
    conn = connect(entry.get("uri", URI))          # the hypervisor the domain was made on
    try:
        try:
            d = conn.lookupByName(entry["name"])
        except libvirt.libvirtError:
            return                                   # never started, or already gone
        try:
            owner = dom.run_of(d.XMLDesc(0))
            if owner != run.run_id:
                raise ValueError(f"domain {entry['name']!r} belongs to {owner or 'no vnetbench run'}; "
                                 "left alone")
            persistent = d.isPersistent()
            if d.isActive():
                d.destroy()                         # a transient domain is gone with it
            if persistent:
                d.undefine()
        except libvirt.libvirtError as exc:         # it went away while we looked: gone is gone
            if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise
    finally:
        conn.close()


def undo_tap(run, entry) -> None:
    """A tap still in the root namespace (a crash before it moved into its VM's)."""
    with IPRoute() as ip:
        found = ip.link_lookup(ifname=entry["name"])
        if not found:
            return
        link = ip.get_links(found[0])[0]
        alias = link.get_attr("IFLA_IFALIAS") or ""
        info = link.get_attr("IFLA_LINKINFO")
        kind = info.get_attr("IFLA_INFO_KIND") if info else None
        # the stamp comes a step after creation: a tap killed in between has none, but
        # its journaled name carries the run id and it is a tap
        ours = f"run={run.run_id} " in alias + " " or (not alias and kind == "tun"
                                                       and run.run_id in entry["name"])
        if not ours:
            raise ValueError(f"tap {entry['name']!r} is not run {run.run_id}'s; left alone")
        ip.link("del", index=found[0])


def undo_muxdir(run, entry) -> None:
    path = Path(entry["path"])
    if path.name == f"vnbmux-{run.run_id}":
        shutil.rmtree(path, ignore_errors=True)


def _hypervisor(entry):
    from vnetbench.testbed.libvirt.remote import Hypervisor
    return Hypervisor.of(entry["uri"])


def undo_remote_dir(run, entry) -> None:
    """The run's directory on a remote hypervisor (image, consoles)."""
    if entry["path"].rsplit("/", 1)[-1] != f"vnb-{run.run_id}":
        raise ValueError(f"{entry['path']!r} is not run {run.run_id}'s directory; left alone")
    _hypervisor(entry).run(Path(f"/tmp/vnbmux-{run.run_id}"), f"rm -rf {shlex.quote(entry['path'])}")


def undo_remote_bridge(run, entry) -> None:
    """A bridge the run made on a remote hypervisor, removed only if it carries the run's
    stamp (OVS external_ids, or a Linux bridge's alias)."""
    name, rid = shlex.quote(entry["name"]), run.run_id
    if entry["ovs"]:
        look = f"ovs-vsctl --bare --columns=external_ids find bridge name={name}"
        ours = lambda out: f"vnetbench-run={rid}" in out.replace(",", " ").split()   # noqa: E731
        remove = f"ovs-vsctl del-br {name}"
    else:
        look = f"cat /sys/class/net/{name}/ifalias 2>/dev/null; true"
        ours = lambda out: (out + " ").startswith(f"vnetbench run={rid} ")           # noqa: E731
        remove = f"ip link del {name}"
    hv, mux = _hypervisor(entry), Path(f"/tmp/vnbmux-{rid}")
    out = hv.run(mux, look).stdout.decode().strip()
    if not out and not _exists(hv, mux, entry):
        return                                # never made, or already gone
    # a Linux bridge killed between creation and its stamp has none: its journaled name
    # carries the run id
    if not ours(out) and (out or rid not in entry["name"]):
        raise ValueError(f"bridge {entry['name']!r} on {hv.host} is not run {rid}'s; left alone")
    hv.run(mux, remove)


def _exists(hv, mux, entry) -> bool:
    name = shlex.quote(entry["name"])
    probe = f"ovs-vsctl br-exists {name}" if entry["ovs"] else f"test -e /sys/class/net/{name}"
    return hv.run(mux, probe, check=False).returncode == 0


def undo_remote_process(run, entry) -> None:
    """A process the run started on a remote hypervisor (its collector), found by its
    command line's first argument: the run's own file MARK (never by program name); also
    one killed before its pidfile was written."""
    from vnetbench.testbed.libvirt.remote import REMOTE_ROOT
    rid, mark = run.run_id, entry["mark"]
    if not mark.startswith(f"{REMOTE_ROOT}/vnb-{rid}/") or "'" in mark:
        raise ValueError(f"{mark!r} is not in run {rid}'s directory; left alone")
    find = (f"for d in /proc/[0-9]*; do set -- $(tr '\\0' ' ' <$d/cmdline 2>/dev/null); "
            f"[ \"$2\" = '{mark}' ] && echo ${{d#/proc/}}; done; true")
    hv, mux = _hypervisor(entry), Path(f"/tmp/vnbmux-{rid}")
    hv.run(mux, f"p=$({find}); [ -z \"$p\" ] && exit 0; kill $p; for i in 1 2 3 4 5 6 7 8 9 10; do "
                f"p=$({find}); [ -z \"$p\" ] && exit 0; sleep 0.2; done; kill -9 $p; true")


STEPS = {"domain": Step(undo_domain),
         "tap": Step(undo_tap),
         "muxdir": Step(undo_muxdir),
         "remote_dir": Step(undo_remote_dir),
         "remote_bridge": Step(undo_remote_bridge),
         "remote_process": Step(undo_remote_process)}
