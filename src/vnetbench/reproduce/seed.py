"""A seed's published data-plane figures and claims, read from the data files beside this
module (``<seed>.yaml``: figures with their source, never in code) into frozen records."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

from vnetbench.errors import VnetbenchError
from vnetbench.testbed.model import PATHS, SVI
# a system's ``routing``: one of seed 000's testbeds, a column of its own ("ovs/vlan svi")
from vnetbench.testbed.model import SWITCH_ROUTINGS as ROUTINGS

KINDS = ("highest", "lowest", "greater", "about", "at_most", "at_least")


@dataclass(frozen=True)
class Figure:
    """One published cell: its value (None when the seed printed none), spread, CPU%,
    loss, and the seed's words where it gave no number ('TODO', 'kernel panic')."""
    value: float | None = None
    spread: float | None = None
    cpu_pct: float | None = None
    loss_pct: float | None = None
    text: str = ""

    def show(self, unit: str) -> str:
        if self.value is None:
            return self.text or "-"
        out = f"{self.value:g}" + (f" ±{self.spread:g}" if self.spread is not None else "")
        out += unit if unit.startswith("%") else f" {unit}"
        extra = [f"{self.loss_pct:g}% loss"] if self.loss_pct is not None else []
        extra += [f"CPU {self.cpu_pct:g}%"] if self.cpu_pct is not None else []
        return out + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class Claim:
    """One qualitative statement of the seed about a row, checkable on measurements."""
    says: str
    kind: str                       # one of KINDS
    systems: tuple                  # the seed systems it names, in order
    limits: tuple = ()              # at_most / at_least: one limit per system
    factor: float = 1.0             # greater: X > factor x Y
    within_pct: float = 0.0         # about
    metric: str = ""                # "" = the row's metric
    than_row: str = ""              # greater / about, one system: X here against X in that row


@dataclass(frozen=True)
class Row:
    id: str
    source: str                     # the seed table's row, as printed
    test: str
    variable: str
    placement: str
    metric: str
    unit: str
    figures: dict                   # seed system -> Figure
    claims: tuple
    explain: dict                   # category (definition, model, kernel) -> one line


@dataclass(frozen=True)
class Seed:
    id: str
    file: str
    title: str
    table: str
    systems: dict                   # seed system -> vnetbench column "vswitch/network[ routing]"
    beside: tuple                   # measured in the same run, no seed figure: "column [path]"
    rows: tuple
    task_args: dict = None          # more comparison-task arguments the rows need (measures)
    paths: dict = None              # seed system -> its pairs' path, where not l2 (a router)

    def row(self, row_id: str) -> Row:
        return next(r for r in self.rows if r.id == row_id)

    @property
    def columns(self) -> list[str]:
        """The configurations measured (a bridge and a router of one kind share one; a
        column beside with a path, "ovn/geneve l3-east-west", is its column's)."""
        return list(dict.fromkeys([*self.systems.values(), *(split(b)[0] for b in self.beside)]))

    def where(self, system: str) -> str:
        """Where SYSTEM's figures are: its column, and its path when routed
        ("linuxbridge/flat l3-east-west"): the report's rows carry the path likewise."""
        path = (self.paths or {}).get(system, "l2")
        return self.systems[system] + ("" if path == "l2" else f" {path}")

    @property
    def measured_paths(self) -> list[str]:
        beside = {split(b)[1] for b in self.beside} - {"l2"}
        rows = {r.placement.split()[1] for r in self.rows if len(r.placement.split()) > 1}
        return sorted({"l2", *(self.paths or {}).values(), *beside, *rows})

    @property
    def placements(self) -> list[str]:
        """The placements the rows need ("same-host l3-east-west": a row of a routed pair
        of every system, seed 000's inter-VLAN rows), in the order the context takes them."""
        need = {r.placement.split()[0] for r in self.rows}
        return [p for p in ("same-host", "cross-host") if p in need]


def split(where: str) -> tuple[str, str]:
    """(column, path) of "ovs/vxlan", "ovs/vxlan l3-east-west" or "ovs/vlan stick
    l3-east-west": a column may carry a routing (seed 000's testbeds), the path is last."""
    words = where.split()
    if len(words) > 1 and words[-1] in PATHS:
        return " ".join(words[:-1]), words[-1]
    return where, "l2"


def _column(text: str) -> bool:
    """'vswitch/network', optionally followed by one of ROUTINGS."""
    words = text.split()
    return 1 <= len(words) <= 2 and "/" in words[0] and (len(words) == 1 or words[1] in ROUTINGS)


def available() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".yaml"))


def load(seed_id: str) -> Seed:
    path = resources.files(__package__) / f"{seed_id}.yaml"
    if seed_id not in available():
        raise VnetbenchError(f"seed {seed_id!r}: no such data file; the seeds with figures are "
                             f"{', '.join(available())}")
    return parse(yaml.safe_load(path.read_text()), f"{seed_id}.yaml")


def parse(d: dict, where: str) -> Seed:
    """A system is a column ("vswitch/network"), or {column, path, routing} for a routed
    one (routing: seed 000's testbed the column builds, svi or stick)."""
    systems, paths = {}, {}
    for name, spec in dict(d["systems"]).items():
        if isinstance(spec, dict):
            if spec.get("path", "l2") not in PATHS:
                raise ValueError(f"{where}: system {name!r}: path {spec.get('path')!r} is not one of {PATHS}")
            if spec.get("routing", SVI) not in ROUTINGS:
                raise ValueError(f"{where}: system {name!r}: routing {spec['routing']!r} is not one of "
                                 f"{', '.join(ROUTINGS)}")
            routing = f" {spec['routing']}" if spec.get("routing") else ""
            systems[name], paths[name] = spec["column"] + routing, spec.get("path", "l2")
        else:
            systems[name] = spec
    rows = tuple(_row(r, systems, f"{where}: row {r.get('id', i)}") for i, r in enumerate(d["rows"]))
    ids = {r.id for r in rows}
    for r in rows:
        for c in r.claims:
            if c.than_row and c.than_row not in ids:
                raise ValueError(f"{where}: row {r.id}: claim {c.says!r} compares with row "
                                 f"{c.than_row!r}, which the file does not have")
    for b in d.get("beside", ()):
        if not _column(split(str(b))[0]):
            raise ValueError(f"{where}: beside {b!r} is not 'vswitch/network [ROUTING] [PATH]' "
                             f"(ROUTING one of {', '.join(ROUTINGS)}, PATH one of {', '.join(PATHS)})")
    return Seed(str(d["seed"]), d["file"], d["title"], d["table"], systems,
                tuple(d.get("beside", ())), rows, dict(d.get("task_args") or {}),
                {k: v for k, v in paths.items() if v != "l2"})


def _row(r: dict, systems: dict, where: str) -> Row:
    figures = {name: Figure(**f) for name, f in r["seed"].items()}
    unknown = set(figures) - set(systems)
    if unknown:
        raise ValueError(f"{where}: seed figures of unknown systems {sorted(unknown)}")
    claims = tuple(_claim(c, systems, where) for c in r.get("claims") or ())
    return Row(r["id"], r["source"], r["test"], str(r["variable"]), r["placement"], r["metric"],
               r["unit"], figures, claims, dict(r.get("explain") or {}))


def _claim(c: dict, systems: dict, where: str) -> Claim:
    kind = next((k for k in KINDS if k in c), None)
    if kind is None:
        raise ValueError(f"{where}: claim {c.get('says')!r} has none of {', '.join(KINDS)}")
    arg = c[kind]
    if kind in ("at_most", "at_least"):
        names, limits = tuple(arg), tuple(float(v) for v in arg.values())
    else:
        names, limits = ((arg,) if isinstance(arg, str) else tuple(arg)), ()
    unknown = [n for n in names if n not in systems]
    if unknown:
        raise ValueError(f"{where}: claim {c['says']!r} names unknown systems {unknown}")
    than = str(c.get("than_row", ""))
    if than and (kind not in ("greater", "about") or len(names) != 1):
        raise ValueError(f"{where}: claim {c['says']!r}: than_row compares one system with "
                         f"itself in another row ('greater: SYSTEM', 'about: [SYSTEM]'), not {kind} {list(names)}")
    if kind == "greater" and not than and len(names) != 2:
        raise ValueError(f"{where}: claim {c['says']!r}: greater names two systems [X, Y], or "
                         f"one and than_row")
    return Claim(c["says"], kind, names, limits, float(c.get("factor", 1.0)),
                 float(c.get("within_pct", 0.0)), c.get("metric", ""), than)
