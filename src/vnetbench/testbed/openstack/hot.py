"""Check HOT templates and environment files against Heat's own schemas, offline.

Heat itself (Debian's python3-heat, run by the system Python through heat_schema.py)
parses the files and reports its resource registry's properties schemas; this module
walks the templates with that: every resource type known, every property in the
type's schema with a value of the right type (literals checked, intrinsic functions
followed as far as they are static), required properties given, functions of the
template's HOT version, references (get_resource, get_attr, get_param, conditions)
resolved, nested template types given the parameters they declare, environment
files naming only parameters and files that exist.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"
DUMPER = Path(__file__).with_name("heat_schema.py")
TEMPLATES = Path(__file__).resolve().parents[4] / "heat-templates"


class HeatMissing(RuntimeError):
    """The system Python cannot import heat (python3-heat is not installed)."""


def heat_view(paths) -> dict:
    """Heat's parse of PATHS and the schemas of the resource types they use."""
    done = subprocess.run([SYSTEM_PYTHON, str(DUMPER), *map(str, paths)], capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        if "No module named 'heat'" in done.stderr:
            raise HeatMissing(f"{SYSTEM_PYTHON} cannot import heat; install Debian's "
                              "python3-heat (make install does)")
        raise RuntimeError(f"{DUMPER.name} failed: {tail}")
    return json.loads(done.stdout)


def resolve(cases) -> list[dict]:
    """Heat's engine resolves each (template, env or None, params) and validates it as at
    stack create, offline (one Heat start for all): per case {"resources": {name: {type,
    properties}}, "conditions": {...}, "unchecked": {resource: why}} (each resource's own
    validate() run too, but those that must ask a cloud) or {"error": Heat's message}."""
    done = subprocess.run([SYSTEM_PYTHON, str(DUMPER), "--resolve",
                           json.dumps([[str(t), str(e or ""), p] for t, e, p in cases])],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{DUMPER.name} --resolve failed: {tail}")
    return json.loads(done.stdout)


_PY_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
             "list": (list,), "map": (dict,)}


class Checker:
    """Problems of one template (a list of 'file: resource.property: what' lines)."""

    def __init__(self, path: Path, view: dict, registry: dict[str, Path]):
        self.path, self.view, self.registry = Path(path), view, registry
        entry = view["files"][str(path)]
        self.doc = entry.get("doc", {})
        self.functions = set(entry.get("functions", ()))
        self.cond_functions = set(entry.get("conditions", ()))
        self.problems = [f"{path.name}: Heat: {entry['error']}"] if "error" in entry else []

    def say(self, where: str, what: str) -> None:
        self.problems.append(f"{self.path.name}: {where}: {what}")

    def check(self) -> list[str]:
        if self.problems:
            return self.problems
        params = self.doc.get("parameters") or {}
        for name, cond in (self.doc.get("conditions") or {}).items():
            self._functions(f"conditions.{name}", cond, conditions=True)
        for name, res in (self.doc.get("resources") or {}).items():
            self._resource(name, res)
        for name, out in (self.doc.get("outputs") or {}).items():
            self._functions(f"outputs.{name}", out.get("value"))
        for name, p in params.items():
            if "type" not in p:
                self.say(f"parameters.{name}", "no type")
        return self.problems

    # -- resources ---------------------------------------------------------------

    def _resource(self, name, res) -> None:
        where = f"resources.{name}"
        rtype = res.get("type")
        cond = res.get("condition")
        if isinstance(cond, str) and cond not in (self.doc.get("conditions") or {}):
            self.say(where, f"condition {cond!r} is not defined")
        for dep in _as_list(res.get("depends_on")):
            if dep not in self.doc["resources"]:
                self.say(where, f"depends_on {dep!r}: no such resource")
        props = res.get("properties") or {}
        self._functions(where, props)
        if rtype in self.registry:
            self._nested(where, self.registry[rtype], props)
            return
        schema = self.view["resources"].get(rtype)
        if schema is None or "error" in schema:
            self.say(where, f"type {rtype!r} is unknown to Heat"
                     + (f" ({schema['error']})" if schema else ""))
            return
        self._properties(where, schema["properties"], props)
        if rtype == "OS::Heat::ResourceGroup":
            rdef = props.get("resource_def") or {}
            index = props.get("index_var", "%index%")   # each member sees its index there
            self._resource(f"{name}.resource_def", {"type": rdef.get("type"), "properties":
                                                      _substitute(rdef.get("properties"), index, "0")})

    def _nested(self, where, template: Path, props) -> None:
        """A template resource: its parameters are its properties."""
        nested = self.view["files"].get(str(template), {}).get("doc", {})
        params = nested.get("parameters") or {}
        for key in props:
            if key not in params:
                self.say(where, f"property {key!r} is not a parameter of {template.name}")
        for key, p in params.items():
            if "default" not in p and key not in props:
                self.say(where, f"{template.name} needs parameter {key!r}")
            elif key in props:
                self._value(f"{where}.{key}", _param_schema(p), props[key])

    def _properties(self, where, schema: dict, props) -> None:
        if not isinstance(props, dict):
            if not _is_function(props):
                self.say(where, f"properties must be a map, not {type(props).__name__}")
            return
        for key, value in props.items():
            if key not in schema:
                self.say(where, f"property {key!r} is not in Heat's schema "
                         f"(known: {', '.join(sorted(schema))})")
            else:
                self._value(f"{where}.{key}", schema[key], value)
        for key, s in schema.items():
            if s.get("required") and key not in props:
                self.say(where, f"required property {key!r} missing")

    def _value(self, where, schema: dict, value) -> None:
        """Literals checked against SCHEMA; both branches of an `if` checked; other
        functions' results are known only to Heat at create time."""
        if value is None:
            if schema.get("required"):
                self.say(where, "required, but null")
            return
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) == "if":
            args = value["if"]
            for branch in args[1:] if isinstance(args, list) else ():
                self._value(where, schema, branch)
            return
        if _is_function(value):
            return
        stype = schema.get("type")
        if stype in ("integer", "number") and isinstance(value, str):
            try:
                value = float(value) if stype == "number" else int(value)
            except ValueError:
                self.say(where, f"{value!r} is not a {stype}")
                return
        if stype == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
            return
        if stype in _PY_TYPES and not isinstance(value, _PY_TYPES[stype]) \
                or (stype in ("integer", "number") and isinstance(value, bool)):
            self.say(where, f"{value!r} is not a {stype}")
            return
        for c in schema.get("constraints") or ():
            allowed = c.get("allowed_values")
            # Heat applies a list's allowed values to each item
            for v in value if isinstance(value, list) else [value]:
                if allowed is not None and not _is_function(v) and v not in allowed:
                    self.say(where, f"{v!r} not in {allowed}")
                elif allowed is not None and isinstance(v, dict) and "if" in v:
                    self._value(where, {"constraints": [c]}, v)
        sub = schema.get("schema")
        if stype == "list" and sub:
            item = sub.get("*", {})
            for i, v in enumerate(value):
                self._value(f"{where}[{i}]", item, v)
        elif stype == "map" and sub:
            self._properties(where, sub, value)

    # -- functions -----------------------------------------------------------------

    def _functions(self, where, node, conditions: bool = False) -> None:
        if isinstance(node, list):
            for v in node:
                self._functions(where, v, conditions)
            return
        if not isinstance(node, dict):
            if conditions and isinstance(node, str) and node not in (self.doc.get("conditions") or {}):
                self.say(where, f"condition {node!r} is not defined")
            return
        if len(node) == 1:
            (key, args), = node.items()
            known = self.cond_functions if conditions else self.functions
            if key in known or key in self.functions:
                self._reference(where, key, args)
                if key == "if":
                    if isinstance(args, list) and args:
                        self._functions(where, args[0], conditions=True)
                        self._functions(where, args[1:])
                    return
                if key == "yaql":
                    return self._functions(where, args.get("data") if isinstance(args, dict) else args)
                # operands of not/and/or are conditions (or names of conditions)
                return self._functions(where, args, conditions and key in ("not", "and", "or"))
            if conditions and not key.startswith("OS::"):
                self.say(where, f"{key!r} is not a condition function of this HOT version")
                return
        for v in node.values():
            self._functions(where, v, conditions)

    def _reference(self, where, fn, args) -> None:
        doc = self.doc
        if fn == "get_resource" and args not in (doc.get("resources") or {}):
            self.say(where, f"get_resource {args!r}: no such resource")
        elif fn == "get_attr" and isinstance(args, list) and args:
            res = (doc.get("resources") or {}).get(args[0])
            if res is None:
                self.say(where, f"get_attr {args[0]!r}: no such resource")
            elif len(args) > 1 and isinstance(args[1], str):
                self._attribute(where, res, args[1])
        elif fn == "get_param":
            name = args[0] if isinstance(args, list) else args
            if isinstance(name, str) and name not in (doc.get("parameters") or {}):
                self.say(where, f"get_param {name!r}: no such parameter")

    def _attribute(self, where, res, attr) -> None:
        rtype = res.get("type")
        if rtype in self.registry:
            nested = self.view["files"].get(str(self.registry[rtype]), {}).get("doc", {})
            known = set(nested.get("outputs") or {})
        else:
            known = set((self.view["resources"].get(rtype) or {}).get("attributes") or ())
            if rtype == "OS::Heat::ResourceGroup":       # the members' outputs, as lists
                rdef = (res.get("properties") or {}).get("resource_def") or {}
                if rdef.get("type") in self.registry:
                    nested = self.view["files"].get(str(self.registry[rdef["type"]]), {}).get("doc", {})
                    known |= set(nested.get("outputs") or {})
        if attr not in known:
            self.say(where, f"attribute {attr!r} of {rtype} unknown (known: {', '.join(sorted(known))})")


def _param_schema(p: dict) -> dict:
    t = p.get("type")
    s = {"number": "number", "boolean": "boolean", "comma_delimited_list": "list",
         "json": None}.get(t, "string")
    constraints = [c for c in p.get("constraints") or () if "allowed_values" in c]
    if t == "comma_delimited_list":
        return {"type": None}           # a list or a comma-separated string
    return {"type": s, "constraints": constraints}


def _is_function(v) -> bool:
    return isinstance(v, dict) and len(v) == 1 and next(iter(v)).replace("_", "").isalpha() \
        and next(iter(v)) in _ALL_FUNCTIONS


# every function name of any HOT version: a one-key map with one of these keys is a call
_ALL_FUNCTIONS = {"get_param", "get_resource", "get_attr", "get_file", "list_join", "str_replace",
                  "str_replace_strict", "str_replace_vstrict", "str_split", "repeat", "digest",
                  "resource_facade", "map_merge", "map_replace", "yaql", "equals", "if", "not",
                  "and", "or", "filter", "make_url", "list_concat", "list_concat_unique",
                  "contains", "get_input"}


def _substitute(node, old: str, new: str):
    if isinstance(node, str):
        return node.replace(old, new)
    if isinstance(node, list):
        return [_substitute(v, old, new) for v in node]
    if isinstance(node, dict):
        return {k: _substitute(v, old, new) for k, v in node.items()}
    return node


def _as_list(v):
    return v if isinstance(v, list) else [v] if v else []


def environment_problems(path: Path, view: dict, template: Path) -> list[str]:
    """An environment file's parameters exist in TEMPLATE with acceptable values, and
    its registry's files exist."""
    entry = view["files"][str(path)]
    if "error" in entry:
        return [f"{path.name}: Heat: {entry['error']}"]
    env = entry["doc"]
    params = view["files"][str(template)]["doc"].get("parameters") or {}
    problems = []
    for key, value in {**(env.get("parameter_defaults") or {}), **(env.get("parameters") or {})}.items():
        if key not in params:
            problems.append(f"{path.name}: parameter {key!r} is not one of {template.name}'s")
            continue
        allowed = [c["allowed_values"] for c in params[key].get("constraints") or () if "allowed_values" in c]
        if allowed and value not in allowed[0]:
            problems.append(f"{path.name}: {key}: {value!r} not in {allowed[0]}")
    for rtype, target in (env.get("resource_registry") or {}).items():
        if isinstance(target, str) and target.endswith(".yaml") and not (path.parent / target).is_file():
            problems.append(f"{path.name}: resource_registry {rtype}: {target} does not exist")
    return problems


def registry(env_path: Path, view: dict) -> dict[str, Path]:
    """Template resource types an environment file maps to files."""
    env = view["files"][str(env_path)].get("doc") or {}
    return {t: (env_path.parent / f).resolve() for t, f in (env.get("resource_registry") or {}).items()
            if isinstance(f, str) and f.endswith(".yaml")}
