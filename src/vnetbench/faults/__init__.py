"""The fault API: controller stop/kill/start/restart, management-network partition and
heal, vSwitch restart on one host, cold and live VM migration -- on every kind where
it applies. Each call acts, then logs a timestamped fault record (``record``).

    from vnetbench.faults import Faults
    f = Faults(Deployment.attach(run_id), results="results/records.jsonl")
    f.controller_kill(); f.controller_start(); f.partition("h2"); f.heal("h2")
    f.vswitch_restart("h1"); f.migrate("cross-b", "h1", live=True)["downtime_ms"]
"""

from __future__ import annotations

import time
from pathlib import Path

from vnetbench.errors import UnsupportedError, VnetbenchError
from vnetbench.faults import control, migrate, vswitch
from vnetbench.faults.record import FaultLog

# backends whose vSwitches and controllers are processes of this machine's embedded
# testbed (libvirt guests plug into them); a cloud's are its own
LOCAL_HOSTS = ("netns", "libvirt")
# backends whose VMs the migration can move (a namespace's NIC changes host; Nova moves
# a server to another compute node, as admin: ``Deployment.migrate_vm``)
MIGRATABLE = ("netns", "openstack")


def unsupported(dep, what: str, backends) -> None:
    """UnsupportedError naming the backend and why, before anything changes."""
    if dep.backend in backends:
        return
    why = {"openstack": "the cloud's controllers and vSwitches are not vnetbench's",
           "libvirt": "the libvirt backend does not migrate domains (virDomainMigrate between "
                      "two hypervisors is not implemented; one local libvirtd cannot migrate "
                      "to itself)"}.get(dep.backend, "not implemented")
    raise UnsupportedError(f"{dep.backend}: no {what}: {why}")


class Faults:
    def __init__(self, dep, results: Path | str | None = None):
        self.dep = dep
        self.log = FaultLog(dep, Path(results) if results else None)

    def _logged(self, fault, target, action, params=None, values=None):
        unsupported(self.dep, "VM migration" if fault.startswith("migrate") else f"{fault} fault",
                    MIGRATABLE if fault.startswith("migrate") else LOCAL_HOSTS)
        t0 = time.time()
        out = action()
        vals = values(out) if values else {}
        self.log.add(fault, target, t0, time.time(), vals, params)
        return out

    # -- controller ---------------------------------------------------------------

    def controller_stop(self, component: str | None = None, graceful: bool = True):
        fault = "controller-stop" if graceful else "controller-kill"
        return self._logged(fault, component or "all",
                            lambda: control.stop(self.dep, component, graceful=graceful))

    def controller_kill(self, component: str | None = None):
        return self.controller_stop(component, graceful=False)

    def controller_start(self, component: str | None = None):
        return self._logged("controller-start", component or "all",
                            lambda: control.start(self.dep, component))

    def controller_restart(self, component: str | None = None, graceful: bool = True):
        def act():
            control.stop(self.dep, component, graceful=graceful)
            return control.start(self.dep, component)
        return self._logged("controller-restart", component or "all", act,
                            params={"graceful": graceful})

    def partition(self, host: str | None = None):
        return self._logged("partition", host or "all",
                            lambda: control.partition(self.dep, host))

    def heal(self, host: str | None = None):
        return self._logged("heal", host or "all",
                            lambda: control.partition(self.dep, host, heal=True))

    # -- data plane ---------------------------------------------------------------------

    def vswitch_restart(self, host: str):
        return self._logged("vswitch-restart", host, lambda: vswitch.restart(self.dep, host))

    def migrate(self, vm: str, to_host: str, live: bool = True, peer: str | None = None,
                interval_s: float = 0.005) -> dict:
        """Live: the probe summary (downtime_ms, lost, ...); cold: the time it took (and,
        on a cloud, the outage: ``outage_s``)."""
        unsupported(self.dep, "VM migration", MIGRATABLE)
        tb = self.dep.testbed
        for what, name, names in (("VM", vm, [v.name for v in tb.vms]),
                                  ("host", to_host, [h.name for h in tb.hosts])):
            if name not in names:
                raise VnetbenchError(f"migrate: run {self.dep.run_id} has no {what} named {name!r}; "
                                     f"use one of: {', '.join(names)}")
        origin = tb.vm(vm).host
        if origin == to_host:
            raise VnetbenchError(f"migrate: VM {vm} is already on host {to_host}")
        params = {"from": origin, "to": to_host}

        def act():
            out = (migrate.live(self.dep, vm, to_host, peer, interval_s) if live
                   else migrate.cold(self.dep, vm, to_host))
            # a cloud's compute nodes, where the testbed hosts stand for them
            params.update({k: out[k] for k in ("from_node", "to_node") if k in out})
            return out
        keep = ("downtime_ms", "lost", "sent", "loss_pct", "move_s", "outage_s")
        return self._logged("migrate-live" if live else "migrate-cold", vm, act, params=params,
                            values=lambda out: {k: out[k] for k in keep if k in out})
