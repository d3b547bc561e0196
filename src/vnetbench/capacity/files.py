"""The planner's input files -> validated frozen dataclasses: a workload (VMs and the
traffic between them), the hosts to place it on, and a capacity profile.

Each file is untrusted input read like a testbed (``vnetbench.inputs``: size cap, depth
and node limits, no control characters), checked against its published JSON Schema
(``schemas/workload.schema.json``, ``hosts.schema.json``, ``capacity-profile.schema.json``)
and then for what a schema cannot say (a flow naming no VM, a host listed twice). Every
problem is one ``TestbedFileError`` naming the file, the field and the fix (exit 2).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from vnetbench import inputs
from vnetbench.errors import TestbedFileError
from vnetbench.testbed.loader import check_schema

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_HOSTS = 1024
MAX_EVENTS = 400_000   # YAML nodes of one file: 8,192 flows of 5 fields and 4,096 VMs are ~160,000
MAX_KINDS = 16      # distinct vSwitch kinds in one hosts file (the planner tries one empty host of each)


@dataclass(frozen=True)
class VmSpec:
    name: str
    vcpus: int
    memory_mb: int


@dataclass(frozen=True)
class Flow:
    src: str
    dst: str
    gbps: float                 # average (the seed's averageBW)
    peak_gbps: float            # the seed's peakBW: must fit one host's vSwitch
    new_conn_s: float = 0.0


@dataclass(frozen=True)
class Workload:
    name: str
    vms: tuple[VmSpec, ...]
    flows: tuple[Flow, ...] = ()

    def vm(self, name: str) -> VmSpec:
        return next(v for v in self.vms if v.name == name)


@dataclass(frozen=True)
class HostSpec:
    name: str
    cores: int
    memory_mb: int
    vswitch: str
    dataplane_cpus: int = 1


@dataclass(frozen=True)
class Hosts:
    network: str
    hosts: tuple[HostSpec, ...]


def schema(name: str) -> dict:
    return json.loads(resources.files("vnetbench").joinpath(f"schemas/{name}.schema.json").read_text())


@functools.lru_cache(maxsize=None)
def _flat_schema(name: str) -> dict:
    """The schema with its local ``$ref``s put in place: the same checks, but jsonschema
    resolves no reference per item (half the time of 12,288 VMs and flows)."""
    root = schema(name)

    def inline(node, seen=()):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in seen:
                target = root
                for part in ref[2:].split("/"):
                    target = target[part]
                return inline({**target, **{k: v for k, v in node.items() if k != "$ref"}}, seen + (ref,))
            return {k: inline(v, seen) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v, seen) for v in node]
        return node
    return inline(root)


def read(path, kind: str):
    """The parsed, schema-valid document of ``path`` (``kind``: workload, hosts,
    capacity-profile)."""
    source = inputs.one_line(str(path), 120)
    published = schema(kind)
    try:
        text = inputs.decode(inputs.read_bytes(path, MAX_FILE_BYTES))
        limits = {k: n["maxItems"] for k, n in published.get("properties", {}).items() if "maxItems" in n}
        doc = inputs.parse_yaml(text, max_items=limits, max_events=MAX_EVENTS)
        _check_lengths(doc, published, kind)
        inputs.check_tree(doc)
    except inputs.InputError as exc:
        raise TestbedFileError(source, exc.where, exc.problem, exc.fix) from None
    if doc is None:
        raise TestbedFileError(source, "", "file is empty", f"see schemas/{kind}.schema.json")
    check_schema(doc, _flat_schema(kind), source, f"schemas/{kind}.schema.json")
    return doc, source


def _check_lengths(doc, published: dict, kind: str) -> None:
    """The schema's stated maximum of each top-level list (VMs, flows, hosts, cells),
    checked before the whole tree is walked. ``parse_yaml`` already stops a list written
    out too long on the event stream; this catches one that an alias made long, before
    the node budget (which would blame aliases in general)."""
    if not isinstance(doc, dict):
        return
    for key, node in published.get("properties", {}).items():
        value = doc.get(key)
        limit = node.get("maxItems")
        if limit is not None and isinstance(value, list) and len(value) > limit:
            raise inputs.InputError(key, f"{len(value)} items, more than the {limit} a {kind} file "
                                    f"may hold (schemas/{kind}.schema.json)",
                                    f"give at most {limit}: plan a smaller share at a time")


def load_workload(path) -> Workload:
    doc, source = read(path, "workload")
    return workload(doc, source)


def workload(doc: dict, source: str) -> Workload:
    """Cross-field checks of a schema-valid workload document."""
    names: dict[str, int] = {}
    for i, v in enumerate(doc["vms"]):
        if v["name"] in names:
            raise TestbedFileError(source, f"vms[{i}].name", f"{v['name']!r} is declared twice "
                                   f"(first at vms[{names[v['name']]}])", "give every VM its own name")
        names[v["name"]] = i
    flows, seen = [], {}
    for i, f in enumerate(doc.get("flows") or []):
        for end in ("from", "to"):
            if f[end] not in names:
                raise TestbedFileError(source, f"flows[{i}].{end}", f"{f[end]!r} is no VM of 'vms'",
                                       "name a declared VM or declare it")
        if f["from"] == f["to"]:
            raise TestbedFileError(source, f"flows[{i}]", f"{f['from']!r} sends to itself",
                                   "a flow joins two VMs; drop it (a VM's own traffic crosses no vSwitch)")
        key = (f["from"], f["to"])
        if key in seen:
            raise TestbedFileError(source, f"flows[{i}]", f"{f['from']} -> {f['to']} is listed twice "
                                   f"(first at flows[{seen[key]}])", "sum the two into one entry")
        seen[key] = i
        peak = f.get("peak_gbps", f["gbps"])
        if peak < f["gbps"]:
            raise TestbedFileError(source, f"flows[{i}].peak_gbps", f"{peak} is below its average "
                                   f"gbps {f['gbps']}", "give a peak >= the average, or leave it out")
        flows.append(Flow(f["from"], f["to"], float(f["gbps"]), float(peak), float(f.get("new_conn_s", 0))))
    vms = tuple(VmSpec(v["name"], v["vcpus"], v["memory_mb"]) for v in doc["vms"])
    return Workload(doc.get("name") or "workload", vms, tuple(flows))


def load_hosts(path) -> Hosts:
    doc, source = read(path, "hosts")
    return hosts(doc, source)


def hosts(doc: dict, source: str) -> Hosts:
    """Hosts with ``count`` expanded (name1..nameN), each with its vSwitch kind."""
    if "network" not in doc:
        raise TestbedFileError(source, "network", "missing", "give the tenant network type the "
                               "flows use (flat, vlan, vxlan, gre, geneve)")
    out, where = [], {}
    for i, h in enumerate(doc["hosts"]):
        kind = h.get("vswitch", doc.get("vswitch"))
        if kind is None:
            raise TestbedFileError(source, f"hosts[{i}].vswitch", "no vSwitch kind for this host",
                                   "give 'vswitch' at the top or on the host")
        count = h.get("count")
        names = [f"{h['name']}{k + 1}" for k in range(count)] if count else [h["name"]]
        if len(out) + len(names) > MAX_HOSTS:
            raise TestbedFileError(source, f"hosts[{i}].count", f"more than {MAX_HOSTS} hosts in all",
                                   "plan a smaller share of the data centre")
        for name in names:
            if name in where:
                raise TestbedFileError(source, f"hosts[{i}]", f"host {name!r} is declared twice "
                                       f"(first at hosts[{where[name]}])", "give every host its own name")
            where[name] = i
            out.append(HostSpec(name, h["cores"], h["memory_mb"], kind, h.get("dataplane_cpus", 1)))
    kinds = list(dict.fromkeys(h.vswitch for h in out))
    if len(kinds) > MAX_KINDS:
        at = next(i for i, h in enumerate(doc["hosts"]) if h.get("vswitch", doc.get("vswitch")) == kinds[MAX_KINDS])
        raise TestbedFileError(source, f"hosts[{at}].vswitch", f"more than {MAX_KINDS} vSwitch kinds in all",
                               f"plan hosts of at most {MAX_KINDS} kinds at a time")
    return Hosts(doc["network"], tuple(out))


def load_profile(path) -> dict:
    """A capacity profile (``vnetbench capacity``'s output, or written by hand for real
    hardware): the schema-valid document."""
    doc, source = read(path, "capacity-profile")
    check_profile(doc, source)
    return doc


def check_profile(doc: dict, source: str) -> None:
    """What the profile schema cannot say: each role's points by strictly rising load
    (the CPU curve is interpolated between them: two points at one load divide by zero).
    Two cells for one kind x network type are allowed (two datapaths, MTUs): the planner
    names them when a host needs that kind."""
    for i, cell in enumerate(doc["cells"]):
        for role, r in cell["roles"].items():
            for key in ("points", "unlimited_points"):
                loads = [p["load_gbps"]["mean"] for p in r.get(key) or ()]
                if any(b <= a for a, b in zip(loads, loads[1:])):
                    shown = ", ".join(f"{x:g}" for x in loads[:6]) + (", ..." if len(loads) > 6 else "")
                    raise TestbedFileError(source, f"cells[{i}].roles.{role}.{key}",
                                           f"loads [{shown}] do not rise", "list the points by rising load_gbps")
