"""Validation of a dashboard JSON against the dashboard schema of the pinned SDK.

The SDK ships no JSON Schema: its schema is the typed models generated from
Grafana's CUE kinds. A dashboard is valid when (1) decoding it with the models
(plugins registered: panel options, field config and Prometheus queries get
their typed classes) and encoding it again gives back exactly the same JSON, so
no key is unknown to the models, and (2) every attribute of the decoded object
tree has the type its model declares (enums, literals, numbers, strings, lists,
nested models)."""

import enum
import json
import types
import typing

from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.runtime import UnknownDataquery, panelcfg_config
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel
from grafana_foundation_sdk.models.prometheus import Dataquery

# Fields Grafana's Prometheus datasource reads beside `expr` in an annotation
# that the SDK's AnnotationQuery model does not declare.
PROMETHEUS_ANNOTATION_KEYS = frozenset(
    {"titleFormat", "textFormat", "tagKeys", "step", "useValueForTime"})


def diff(expected: object, actual: object, path: str = "") -> list[str]:
    """Paths at which two JSON values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [problem for key in sorted(expected.keys() | actual.keys())
                for problem in (diff(expected[key], actual[key], f"{path}.{key}")
                                if key in expected and key in actual
                                else [f"{path}.{key}: "
                                      + ("unknown to the schema" if key in expected
                                         else "added by the schema")])]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [p for i, (e, a) in enumerate(zip(expected, actual))
                for p in diff(e, a, f"{path}[{i}]")]
    return [] if expected == actual else [f"{path}: {expected!r} became {actual!r}"]


def without_prometheus_annotation_keys(board: dict) -> dict:
    annotations = board.get("annotations", {})
    if "list" not in annotations:
        return board
    kept = [{k: v for k, v in a.items() if k not in PROMETHEUS_ANNOTATION_KEYS}
            for a in annotations.get("list", [])]
    return {**board, "annotations": {**annotations, "list": kept}}


def type_errors(value: object, hint: object, path: str) -> list[str]:
    """Where `value` does not have the declared type `hint`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (typing.Any, object):
        return []
    if origin in (typing.Union, types.UnionType):
        own = [a for a in args if hasattr(a, "from_json") and isinstance(value, a)]
        if own:
            return type_errors(value, own[0], path)
        tries = [type_errors(value, arg, path) for arg in args
                 if value is None or arg is not type(None)]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [e for i, item in enumerate(value) for e in type_errors(item, args[0], f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object"]
        return [e for k, item in value.items() for e in type_errors(item, args[1], f"{path}.{k}")]
    if value is None:
        return [] if hint is type(None) else [f"{path}: null is not {hint}"]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [] if value in {m.value for m in hint} else [f"{path}: {value!r} not in {hint.__name__}"]
    if hint is float:
        return [] if isinstance(value, int | float) and not isinstance(value, bool) else [f"{path}: {value!r} is not a number"]
    if hint is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: {value!r} is not an integer"]
    if hint in (str, bool):
        return [] if type(value) is hint else [f"{path}: {value!r} is not {hint.__name__}"]
    if isinstance(value, dict) and hasattr(hint, "from_json"):
        return decoded_errors(value, hint, path)
    if isinstance(hint, type) and not isinstance(value, hint):
        return [f"{path}: {type(value).__name__} is not {hint.__name__}"]
    return model_errors(value, path)


def encode(model: object) -> object:
    return json.loads(json.dumps(model, cls=JSONEncoder))


def decoded_errors(value: dict, model: type, path: str) -> list[str]:
    """A part the models keep as raw JSON (transformations, links): decoded
    with its own model, it must round-trip and type-check too."""
    decoded = model.from_json(value)
    return diff(value, encode(decoded), path) + model_errors(decoded, path)


def model_errors(model: object, path: str) -> list[str]:
    """Every declared attribute of a decoded model checked against its type."""
    hints = typing.get_type_hints(type(model))
    return [e for name, hint in hints.items()
            for e in type_errors(getattr(model, name), hint, f"{path}.{name}")]


def plugin_errors(panel: Panel, path: str) -> list[str]:
    """The panel type is a known panel plugin whose options and custom field
    config decoded to its typed classes, and every query is a Prometheus one."""
    config = panelcfg_config(panel.type_val)
    if config is None:
        return [f"{path}: unknown panel type {panel.type_val!r}"]
    errors = [f"{path}.targets[{i}]: not a Prometheus query"
              for i, t in enumerate(panel.targets or [])
              if isinstance(t, UnknownDataquery) or not isinstance(t, Dataquery)]
    typed = [(panel.options, config.options_from_json_hook, "options")]
    if panel.field_config is not None:
        typed.append((panel.field_config.defaults.custom,
                      config.field_config_from_json_hook, "fieldConfig.defaults.custom"))
    for value, hook, name in typed:
        owner = getattr(hook, "__self__", None)
        if value is not None and owner is not None and not isinstance(value, owner):
            errors.append(f"{path}.{name}: not a {owner.__module__}.{owner.__name__}")
        elif value is not None and owner is not None:
            errors += model_errors(value, f"{path}.{name}")
    return errors


def validate(board: dict) -> list[str]:
    """Every way `board` departs from the SDK's dashboard schema ([] = valid)."""
    plugins.register_default_plugins()
    model = Dashboard.from_json(board)
    errors = diff(without_prometheus_annotation_keys(board), encode(model))
    errors += model_errors(model, "dashboard")
    errors += [e for i, p in enumerate(model.panels or []) if isinstance(p, Panel)
               for e in plugin_errors(p, f"dashboard.panels[{i}]")]
    return errors
