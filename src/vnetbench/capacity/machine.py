"""The machine a capacity figure was measured on, and whether another machine is it.

A vSwitch's capacity belongs to the hardware and software it was measured on (seed 004:
the saturation bandwidth is a property of the server and its vSwitch): the same ovs/vxlan
cell costs another share of a CPU on another CPU model, kernel, datapath or port type. So
a profile cell says its machine, ``plan`` states it, and ``plan --verify`` compares it with
the machine it verifies on before judging a prediction (``vnetbench.capacity.verify``).

FACTS are what is compared: the CPU model and the kernel (the hardware and the code that
runs the data plane), the CPU architecture, the backend (what a "host" is), the OVS
datapath (``netdev`` userspace or ``system`` kernel) and the OVS port type (``afxdp`` or
``afpacket``; None where the kind has no such choice).

Pure: provenance dicts in, dicts and text out.
"""

from __future__ import annotations

from vnetbench.errors import VnetbenchError

#: fact -> the provenance key of a result record it is read from
FACTS = {"cpu_model": "cpu_model", "kernel": "kernel", "arch": "machine", "backend": "backend",
         "datapath": "ovs_datapath", "ports": "ovs_ports"}
LABELS = {"cpu_model": "CPU", "kernel": "kernel", "arch": "arch", "backend": "backend",
          "datapath": "datapath", "ports": "ports"}


class MixedMachines(VnetbenchError):
    """One cell's figures come from more than one machine (exit 2: build one profile per
    machine, or leave out the records of the other)."""


def of_provenance(p: dict) -> dict:
    """A record's machine: FACTS from its provenance (None where it does not say)."""
    return {fact: p.get(key) for fact, key in FACTS.items()}


def of_records(provenances, where: str = "") -> dict:
    """The one machine of a cell's records (their provenances); MixedMachines when they
    name several: averaging capacity figures of two machines describes neither."""
    found = {tuple(sorted(of_provenance(p).items())) for p in provenances}
    if len(found) > 1:
        names = "; ".join(describe(dict(m)) for m in sorted(found, key=str))
        raise MixedMachines(f"{where}: the records come from {len(found)} machines ({names}); a "
                            "capacity belongs to the machine it was measured on: build one profile "
                            "per machine (vnetbench capacity with that machine's results only)")
    if not found:
        return of_provenance({})
    one = dict(found.pop())
    return {f: one[f] for f in FACTS}


def differences(profile: dict | None, here: dict) -> dict:
    """The FACTS in which ``here`` differs from the profile's machine, a field each:
    {fact: {"profile": ..., "here": ...}} (empty: the same machine). A fact the profile does not state (an old or hand-written profile) is unknown
    there, and says so as a difference (None) rather than passing as a match; a profile
    with no machine at all differs in every fact this machine states."""
    profile = profile or {}
    return {f: {"profile": profile.get(f), "here": here.get(f)}
            for f in FACTS if profile.get(f) != here.get(f)}


def describe(m: dict | None) -> str:
    """``AMD EPYC, kernel 6.18.44, x86_64, netns, datapath netdev, ports afxdp``."""
    if not m:
        return "an unstated machine"
    parts = [m.get("cpu_model") or "CPU unknown", f"kernel {m.get('kernel') or 'unknown'}"]
    parts += [m[k] for k in ("arch", "backend") if m.get(k)]
    parts += [f"{LABELS[k]} {m[k]}" for k in ("datapath", "ports") if m.get(k)]
    return ", ".join(parts)


def describe_differences(diffs: dict) -> str:
    """``CPU AMD EPYC, here Intel Xeon; kernel 6.18.44-v669, here 6.18.44-v1300``."""
    return "; ".join(f"{LABELS[f]} {d['profile'] or 'unstated'}, here {d['here'] or 'none'}"
                     for f, d in diffs.items())


def used(cells: dict) -> list[dict]:
    """The machines of the profile cells a plan used (``place.Model.cells``: (kind,
    network) -> cell), one entry a cell: {vswitch, network, machine (None: not stated)}."""
    return [{"vswitch": k, "network": n, "machine": cell.get("machine")}
            for (k, n), cell in sorted(cells.items())]


def plan_lines(machines: list[dict]) -> list[str]:
    """What ``plan`` prints of them: the hardware its capacities belong to."""
    return [f"profile {m['vswitch']}/{m['network']} measured on {describe(m['machine'])}"
            + ("" if m["machine"] else " (the profile does not say: its capacity may not be this "
               "hardware's)") for m in machines]
