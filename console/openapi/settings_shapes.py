"""The system settings bodies, reflected from the settings catalog (``gateway.settings``).

The catalog declares every key with its kind and visibility, and the admin and public views
(``console.services.settings_views``) are built from it, so the document reads the same
declarations: ``PUT /api/settings`` accepts every non-internal key (and its aliases), the
admin view shows every key but write-only ones (a secret as ``<key>_set``), and the public
view shows the public keys.  Computed keys take the type of the value ``derived`` computes.
"""

from __future__ import annotations

from typing import Any

from console.openapi.json_schema import ANY, BOOLEAN, STRING, json_type
from gateway.settings.catalog import ALIASES, SPECS, Spec
from gateway.settings.catalog_derived import derived

#: what a PUT value may be per kind (``gateway.settings.catalog.to_stored_text``)
_PUT_TYPES: dict[str, dict[str, Any]] = {
    "bool": {"type": ["boolean", "integer", "string"]},
    "text": {"type": ["string", "number"]},
    "json": {"type": ["string", "array", "object"]},
}
#: keys whose view value is rebuilt (redacted) from stored JSON rather than the stored text
_REDACTED_JSON = ("oauth_providers", "payment_channels")


def _computed() -> dict[str, dict[str, Any]]:
    return {key: json_type(value)
            for key, value in derived(lambda _key: "", lambda _key: False).items()}


def _view_type(spec: Spec, computed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if spec.key in computed:
        return computed[spec.key]
    if spec.key in _REDACTED_JSON:
        return ANY
    return BOOLEAN if spec.kind == "bool" else STRING


def update_body() -> dict[str, Any]:
    """``PUT /api/settings``: any subset of the writable keys (open: prefix aliases such as
    ``check_in_*`` are accepted too, and the route names any key it refuses)."""
    properties: dict[str, Any] = {}
    for spec in SPECS.values():
        if spec.internal:
            continue
        schema = dict(_PUT_TYPES[spec.kind])
        if spec.readonly:
            schema["description"] = "computed; ignored when sent"
        if spec.secret or spec.writeonly:
            schema["writeOnly"] = True
        properties[spec.key] = schema
    for alias, key in ALIASES.items():
        properties[alias] = {**properties[key], "description": f"alias of {key}"}
    return {"type": "object", "properties": properties, "additionalProperties": True}


def admin_view() -> dict[str, Any]:
    """``GET /api/settings``."""
    computed = _computed()
    properties: dict[str, Any] = {}
    for spec in SPECS.values():
        if spec.internal or spec.writeonly:
            continue
        if spec.secret:
            properties[f"{spec.key}_set"] = BOOLEAN
        else:
            properties[spec.key] = _view_type(spec, computed)
    return {"type": "object", "properties": properties, "required": sorted(properties),
            "additionalProperties": True}


def public_view() -> dict[str, Any]:
    """``GET /api/public/settings``: the public keys (plus the spec's aliases of them)."""
    computed = _computed()
    properties = {spec.key: _view_type(spec, computed) for spec in SPECS.values()
                  if spec.public and not (spec.secret or spec.writeonly or spec.internal)}
    return {"type": "object", "properties": properties, "required": sorted(properties),
            "additionalProperties": True}
