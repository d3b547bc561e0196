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


def resolve(cases_json):
    """Heat's engine resolves each case's template with its environment and parameters
    (conditions, intrinsic functions, parameter constraints) and validates it as at stack
    create, without creating anything. CASES: [[template, env or '', params], ...]; out:
    per case the properties each resource would get (references to other resources come
    out as null) and the conditions' values, or Heat's error."""
    from oslo_config import cfg
    cfg.CONF([], project="heat", default_config_files=[])
    from heat.engine import constraints, resource, resources
    resources.initialise()
    # offline: no service catalogue to ask whether Neutron or Nova are deployed, and no
    # cloud to ask whether a named network/image/flavor exists (custom constraints);
    # every other check (types, allowed values, ranges, required, references) stays
    resource.Resource._validate_service_availability = lambda *a, **k: None
    constraints.CustomConstraint._is_valid = lambda *a, **k: True
    out = []
    for template_path, env_path, params in json.loads(cases_json):
        try:
            out.append(_resolve_one(template_path, env_path, params))
        except Exception as exc:
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    print(json.dumps(out, default=str))


def _resolve_one(template_path, env_path, params):
    import os
    from heat.common import context, environment_format, template_format
    from heat.engine import environment, function, stack, template
    env = environment_format.parse(open(env_path).read()) if env_path else {"parameters": {}}
    env.setdefault("parameters", {}).update(params)
    files = {}
    for target in (env.get("resource_registry") or {}).values():
        if isinstance(target, str) and target.endswith(".yaml"):
            path = os.path.join(os.path.dirname(os.path.abspath(env_path)), target)
            files[target] = open(os.path.normpath(path)).read()
    tmpl = template.Template(template_format.parse(open(template_path).read()), files=files,
                             env=environment.Environment(env))
    ctx = context.RequestContext(user_id="vnetbench", project_id="vnetbench", is_admin=True)
    st = stack.Stack(ctx, "vnetbench-resolve", tmpl)
    st.validate(validate_res_tmpl_only=True)
    return {"unchecked": _validate_resources(st),
            "resources": {name: {"type": d.resource_type, "properties": function.resolve(d._properties)}
                          for name, d in st.t.resource_definitions(st).items()},
            "conditions": {name: st.t.conditions(st).is_enabled(name)
                           for name in (tmpl.t.get("conditions") or {})}}


def _validate_resources(st) -> dict:
    """Each resource's own validate(), as at stack create (e.g. ProviderNet refuses a
    segmentation_id for any type but vlan). Those that must ask a cloud first (a server,
    a nested group) cannot be checked offline: {name: why}, the rest raise Heat's error."""
    from heat.common import exception
    refused = (exception.StackValidationFailed, exception.ResourcePropertyConflict,
               exception.ResourcePropertyDependency, exception.ResourcePropertyValueDependency,
               exception.PropertyUnspecifiedError)
    unchecked = {}
    for name, res in st.resources.items():
        try:
            res.validate()
        except refused:
            raise
        except Exception as exc:                  # noqa: BLE001 -- needs a cloud
            unchecked[name] = f"{type(exc).__name__}"
    return unchecked


if __name__ == "__main__":
    if sys.argv[1:2] == ["--resolve"]:
        resolve(sys.argv[2])
    else:
        main(sys.argv[1:])
