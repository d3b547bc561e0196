"""A testbed file's text -> a schema-valid document, or one TestbedFileError naming the
field and the fix: the bounded YAML parse, the published JSON Schema (the generic one with
the registered kinds' options put in), and the explanation of a schema error for people.
``check_schema`` serves every published input schema of the suite (workload, hosts,
capacity profile)."""

from __future__ import annotations

import itertools
import json
import math
from importlib import resources

import jsonschema

from vnetbench import inputs, kinds
from vnetbench.errors import TestbedFileError
from vnetbench.testbed.model import VSwitchKind
from vnetbench.testbed.loadcommon import MAX_FILE_BYTES, short

def schema() -> dict:
    """The published JSON Schema of testbed files: the generic one packaged here, with
    the registered kinds and each kind's options schema (``Kind.options_schema``) put in,
    so adding a kind changes no schema by hand (``make schema`` writes the published copy)."""
    text = resources.files("vnetbench").joinpath("schemas/testbed.schema.json").read_text()
    doc = json.loads(text)
    doc["$defs"]["vswitchKind"] = {"enum": list(kinds.names())}
    props = doc["properties"]["vswitch"]["oneOf"][1]["properties"]
    for kind in kinds.all_kinds():
        if kind.options_key:
            doc["$defs"][kind.options_key] = kind.options_schema
            props[kind.options_key] = {"$ref": f"#/$defs/{kind.options_key}"}
    return doc


def parse_yaml(text, source):
    if len(text) > MAX_FILE_BYTES:
        raise TestbedFileError(source, "", f"is larger than {MAX_FILE_BYTES // 1024} KiB",
                               "split or shorten it")
    try:
        doc = inputs.parse_yaml(text)
        inputs.check_tree(doc)
    except inputs.InputError as exc:
        raise TestbedFileError(source, exc.where, exc.problem, exc.fix) from None
    if doc is None:
        raise TestbedFileError(source, "", "file is empty",
                               "declare at least 'vswitch' and 'network: {type: ...}'")
    return doc


def _is_integer(checker, instance) -> bool:
    """JSON Schema's "integer" admits 1.0; a CPU number or an MTU must be a real int."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance) -> bool:
    """A finite number: NaN and infinity compare false with every bound, so a schema's
    ``minimum``/``maximum`` would let them through."""
    return (isinstance(instance, (int, float)) and not isinstance(instance, bool)
            and (isinstance(instance, int) or math.isfinite(instance)))


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}))


def validate(doc, source):
    check_schema(doc, schema(), source)


def check_schema(doc, schema_doc: dict, source: str, published: str = "schemas/testbed.schema.json"):
    """One TestbedFileError naming the field and the fix for the best of the first errors
    of ``doc`` against ``schema_doc`` (any of the suite's published input schemas)."""
    validator = _Validator(schema_doc, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    # the first errors suffice to pick the best one; all of 5,000 bad items take seconds
    error = jsonschema.exceptions.best_match(itertools.islice(validator.iter_errors(doc), 100))
    if error is not None:
        raise TestbedFileError(source, _json_path(error.absolute_path) or "(top level)",
                               *_explain(error, published))


def _json_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _explain(error, published: str = "schemas/testbed.schema.json") -> tuple[str, str]:
    """Turn a jsonschema error into (problem, fix)."""
    kind, inst = error.validator, error.instance
    if kind == "enum":
        return (f"{short(inst)} is not allowed",
                "use one of: " + ", ".join(map(str, error.validator_value)))
    if kind == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        extra = sorted(set(inst) - set(error.schema.get("properties", {})))
        return (f"unknown field {', '.join(map(short, extra[:3]))}", f"allowed fields: {allowed}")
    if kind == "required":
        return (inputs.one_line(error.message, 120), "add it")
    if kind == "type" and isinstance(inst, float) and not math.isfinite(inst):
        return (f"{inst!r} is not a finite number", "give a finite number")
    if kind == "type":
        article = "an" if str(error.validator_value)[0] in "aeiou" else "a"
        return (f"{short(inst)} is not of type {error.validator_value}",
                f"give {article} {error.validator_value}")
    if kind == "format" and error.validator_value == "ipv4":
        return (f"{short(inst)} is not an IPv4 address", "write it as a.b.c.d, e.g. 198.19.1.10")
    if kind == "uniqueItems":
        return (f"{short(inst)} lists an item twice", "list each item once")
    if kind == "minItems":
        return ("the list is empty", "give at least one item or remove the field for the default")
    if kind == "pattern":
        if "$defs/name" in str(error.schema) or error.validator_value.startswith("^[a-z]"):
            return (f"{short(inst)} is not a valid name",
                    "use lowercase letters, digits and '-', starting with a letter, at most 24 characters")
        return (f"{short(inst)} is not a CIDR", "write it as a.b.c.d/len, e.g. 198.19.1.0/24")
    if kind in ("minimum", "maximum"):
        return (f"{short(inst)} is {'less' if kind == 'minimum' else 'greater'} than the "
                f"{kind} of {error.validator_value}",
                f"use a value {'>=' if kind == 'minimum' else '<='} {error.validator_value}")
    if kind in ("exclusiveMinimum", "exclusiveMaximum"):
        above = kind == "exclusiveMinimum"
        return (f"{short(inst)} is not {'above' if above else 'below'} {error.validator_value}",
                f"use a value {'>' if above else '<'} {error.validator_value}")
    if kind == "maxItems":
        return (f"{len(inst)} items, more than the limit of {error.validator_value}",
                f"give at most {error.validator_value} (split the file)")
    if kind == "maxLength":
        return (f"{short(inst)} is longer than {error.validator_value} characters", "shorten it")
    if kind == "const":
        return (f"{short(inst)} is not {error.validator_value!r}", f"give {error.validator_value!r}")
    if kind == "oneOf" and list(error.absolute_path)[:1] == ["vswitch"]:
        kinds = ", ".join(k.value for k in VSwitchKind)
        if isinstance(inst, str):
            return (f"{short(inst)} is not allowed", f"use one of: {kinds}")
        return (f"{short(inst)} is not a vSwitch", f"give a kind ({kinds}) or {{kind: ..., datapath: ...}}")
    if kind == "oneOf" and list(error.absolute_path)[:1] == ["routers"]:
        return (f"{short(inst)} is not a router interface", "give a vnet name or {name: ..., ip: ...}")
    if kind == "oneOf":   # the only other oneOf: a VM's vnets entry
        return (f"{short(inst)} is not a vnet reference", ("give a vnet name or {name: ..., ip: ..., "
                                                          "qos: {max_kbps: ..., max_burst_kbits: ...}, "
                                                          "port_security: ..., security_groups: [...]}"))
    return (inputs.one_line(error.message, 120), f"see {published}")


short = inputs.excerpt
