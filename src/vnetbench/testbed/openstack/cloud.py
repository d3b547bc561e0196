"""One connection to a cloud of clouds.yaml (openstacksdk), and API errors as one line
that names the resource and the fix."""

from __future__ import annotations

import os
from pathlib import Path

from vnetbench.errors import PrerequisiteError, VnetbenchError


class CloudError(VnetbenchError):
    """An OpenStack API call failed; the message names the resource and the fix."""


def config_file() -> str | None:
    """The clouds.yaml openstacksdk reads ($OS_CLIENT_CONFIG_FILE), journaled with a run so
    that cleanup reaches the same cloud from another shell."""
    path = os.environ.get("OS_CLIENT_CONFIG_FILE")
    return str(Path(path).resolve()) if path else None


def connect(cloud: str, clouds_yaml: str | None = None):
    """An openstacksdk Connection to CLOUD (a name in clouds.yaml)."""
    try:
        import openstack
        from openstack import config as osconfig
        from openstack import exceptions
    except ImportError:
        raise PrerequisiteError("openstacksdk is not installed; run 'make install'") from None
    files = [clouds_yaml] if clouds_yaml else None
    if clouds_yaml and not Path(clouds_yaml).is_file():
        raise VnetbenchError(f"clouds.yaml {clouds_yaml}: no such file; set OS_CLIENT_CONFIG_FILE "
                             "to your clouds.yaml")
    try:
        configs = osconfig.OpenStackConfig(config_files=files) if files else osconfig.OpenStackConfig()
        return openstack.connection.Connection(config=configs.get_one(cloud=cloud))
    except exceptions.ConfigException as exc:
        where = clouds_yaml or "clouds.yaml (./, ~/.config/openstack/, /etc/openstack/)"
        raise VnetbenchError(f"cloud {cloud!r}: not usable from {where} ({_first(exc)}); "
                             "name a cloud of your clouds.yaml with --cloud, or set "
                             "OS_CLIENT_CONFIG_FILE") from None


def _first(exc) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


FIXES = {401: "check the credentials of this cloud in clouds.yaml",
         403: "this needs an admin role (or a policy that allows it); use an admin cloud entry "
              "or the non-admin options (existing flavor, tenant network)",
         404: "check the name in the task arguments / options",
         409: "a conflicting object exists (a MAC or name in use?); clean up with "
              "'vnetbench cleanup --backend openstack' or pick other values",
         413: "a quota is exhausted; raise the project's quota or ask for fewer VMs"}


def error(exc, resource: str) -> CloudError:
    """CloudError for an openstacksdk exception raised while handling RESOURCE."""
    code = getattr(exc, "status_code", None)
    fix = FIXES.get(code, "see the service's log; the request was: " + resource)
    what = f"HTTP {code}: " if code else ""
    detail = (_body_message(exc) or str(getattr(exc, "details", None) or exc)).strip()
    detail = (detail.splitlines() or ["no detail"])[0]
    return CloudError(f"{resource}: {what}{detail[:200]}; {fix}")


def _body_message(exc) -> str:
    """The service's own message from the error reply (Heat: error.message; Nova,
    Neutron: the first value's message), where the exception carries the response."""
    try:
        body = exc.response.json()
    except Exception:
        return ""
    if not isinstance(body, dict):
        return ""
    err = body.get("error")
    if isinstance(err, dict) and err.get("message"):
        return f"{err.get('type', '')}: {err['message']}".lstrip(": ")
    for value in body.values():
        if isinstance(value, dict) and value.get("message"):
            return str(value["message"])
    return str(body.get("explanation") or body.get("message") or "")
