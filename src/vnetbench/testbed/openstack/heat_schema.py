"""Heat's own view of templates, offline: run with the system Python that has Debian's
python3-heat (``/usr/bin/python3 heat_schema.py FILE...``), never imported by vnetbench.

For each file it prints, as one JSON document: the file parsed by Heat's template (or
environment) parser, the HOT version's intrinsic and condition functions, and the
properties and attributes schemas of every resource type the files use, taken from
Heat's resource registry (its plugins). vnetbench.testbed.openstack.hot checks the
templates against that, so the check is Heat's schema and not a hand-written list.
"""

import json
import sys


def _load(path):
    from heat.common import environment_format, template_format
    text = open(path).read()
    try:
        doc = template_format.parse(text)
        if "heat_template_version" in doc:
            return "template", doc
    except ValueError:
        pass
    return "environment", environment_format.parse(text)


def _types(doc):
    out = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("type"), str) and ("properties" in node or "::" in node["type"]):
                out.add(node["type"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc.get("resources", {}))
    return out


def _usable(table):
    """Function names of a HOT version that work (removed and invalid ones are
    placeholders that raise)."""
    return sorted(k for k, v in table.items()
                  if v and getattr(v, "__name__", "") not in ("Removed", "Invalid"))


def _resource_schema(env, rtype):
    from heat.engine import properties
    try:
        cls = env.get_class(rtype)
    except Exception as exc:      # not a type Heat knows (or a template path)
        return {"error": f"{type(exc).__name__}: {exc}"}
    props = {k: dict(v) for k, v in properties.schemata(cls.properties_schema).items()
             if v.implemented}
    attrs = sorted({*getattr(cls, "attributes_schema", {}), *getattr(cls, "base_attributes_schema", {})})
    return {"properties": props, "attributes": attrs}


def main(paths):
    from heat.engine import resources, template
    resources.initialise()
    env = resources.global_env()
    docs, types = {}, set()
    for path in paths:
        try:
            kind, doc = _load(path)
        except Exception as exc:   # Heat's own parse error, reported per file
            docs[path] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        docs[path] = {"kind": kind, "doc": doc}
        if kind == "template":
            types |= _types(doc)
            try:
                tmpl = template.Template(doc)      # the class of the file's HOT version
                tmpl.validate()
                docs[path].update(template_class=type(tmpl).__name__,
                                  functions=_usable(tmpl.functions),
                                  conditions=_usable(tmpl.condition_functions))
            except Exception as exc:
                docs[path]["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"files": docs, "resources": {t: _resource_schema(env, t) for t in sorted(types)}},
                     default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
